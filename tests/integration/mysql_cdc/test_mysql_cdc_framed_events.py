"""MariaDB GTID and XID events framed by mysql_cdc/binlog/framed_events.py read as the library reads them.

The same stretch of a real server's binlog (transactions of a transactional table, a statement
in autocommit, a DDL: GTID events with different flags, XID events) is read twice through the
binlog reader's stream setup: every packet framed by mysql-replication (the oracle), then with
the framer installed. The GTID and XID events must carry the same fields, and the framed ones
must be the framer's classes (or the comparison would compare the library with itself).
"""

from __future__ import annotations

import pymysql
import pytest

from changelake.connectors.mysql_cdc.binlog import _replication_fixes, row_decoder
from changelake.connectors.mysql_cdc.binlog.framed_events import FramedMariadbGtid, FramedXid

from mysql_cdc_support import run_sql

pytestmark = pytest.mark.integration


def _master_status(mysql_params: dict) -> tuple[str, int]:
    conn = pymysql.connect(host=mysql_params["host"], port=mysql_params["port"], user=mysql_params["user"],
                           password=mysql_params["password"], autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
    finally:
        conn.close()
    return str(file), int(pos)


def _gtid_and_xid_events(mysql_params: dict, start: tuple[str, int], end: int, framing: bool) -> list:
    """The GTID (0xA2) and XID (0x10) events of ``start``'s file before ``end``, in order."""
    from pymysqlreplication import BinLogStreamReader

    _replication_fixes.apply()
    row_decoder.install_framer()
    stream = BinLogStreamReader(
        connection_settings={k: mysql_params[k] for k in ("host", "port", "user", "password")},
        server_id=5401, blocking=False, resume_stream=True, log_file=start[0], log_pos=start[1],
        only_events=[*_replication_fixes.event_classes(), *row_decoder.framed_classes()],
        filter_non_implemented_events=False,
    )
    saved, row_decoder.framing_enabled = row_decoder.framing_enabled, framing
    out = []
    try:
        for ev in stream:
            if int(ev.packet.log_pos or 0) > end:
                break
            if int(ev.packet.event_type) in (0xA2, 0x10):
                out.append(ev)
    finally:
        row_decoder.framing_enabled = saved
        stream.close()
    return out


def _fields(ev) -> tuple:
    common = (int(ev.packet.event_type), int(ev.timestamp), int(ev.packet.log_pos), int(ev.packet.event_size))
    if int(ev.packet.event_type) == 0xA2:
        return (*common, ev.server_id, ev.gtid_seq_no, ev.domain_id, ev.flags, ev.gtid)
    return (*common, ev.xid)


def test_framed_gtid_and_xid_events_equal_the_library(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB")
    start = _master_status(mysql_params)
    run_sql(mysql_params, db,
            "BEGIN", "INSERT INTO t VALUES (1, 'a')", "INSERT INTO t VALUES (2, 'b')", "COMMIT",
            "UPDATE t SET v = 'c' WHERE id = 1",
            "ALTER TABLE t ADD COLUMN w INT",
            "BEGIN", "DELETE FROM t WHERE id = 2", "COMMIT")
    file, end = _master_status(mysql_params)
    assert file == start[0], "the binlog rotated during the test"

    library = _gtid_and_xid_events(mysql_params, start, end, framing=False)
    framed = _gtid_and_xid_events(mysql_params, start, end, framing=True)

    codes = [int(ev.packet.event_type) for ev in library]
    assert codes.count(0xA2) == 4 and codes.count(0x10) == 3, codes  # 4 groups; the DDL has no XID
    assert not any(isinstance(ev, (FramedMariadbGtid, FramedXid)) for ev in library)
    assert all(isinstance(ev, FramedMariadbGtid if int(ev.packet.event_type) == 0xA2 else FramedXid) for ev in framed)
    assert [_fields(ev) for ev in framed] == [_fields(ev) for ev in library]
    flags = {ev.flags & 0x01 for ev in library if int(ev.packet.event_type) == 0xA2}
    assert flags == {0, 1}, "a standalone DDL and transactions: both GTID flag values compared"
