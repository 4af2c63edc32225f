"""The binlog reader's own packet reading (mysql_cdc/binlog/reader.py, ``stream_events``) against the library's.

One stretch of a real server's binlog (transactions, a row event larger than a read chunk, a DDL,
a rotate to a new binlog file with rows after it) is read through the binlog reader's stream setup
twice: by iterating mysql-replication's stream reader (``fetchone`` per packet, the oracle) and
by ``stream_events`` with read chunks from 7 bytes (every packet split across reads) to
256 KiB. Every event must be the same (class, header, body bytes, the library's fields), the
fast path must have read all but the first event itself, and ``idle`` must run before it waits.
A connection the server stays silent on past the read timeout, and one the server kills, end in
a connection-loss error that the reader retries.
"""

from __future__ import annotations

import threading
import time

import pymysql
import pytest

from changelake.connectors.mysql_cdc.binlog import _replication_fixes, row_decoder
from changelake.connectors.mysql_cdc.binlog.reader import stream_events
from changelake.connectors.mysql_cdc.binlog.row_decoder import FramedRows
from changelake.connectors.mysql_cdc.connection import is_connection_loss

from mysql_cdc_support import run_sql

pytestmark = pytest.mark.integration


def _connect(mysql_params: dict) -> pymysql.Connection:
    return pymysql.connect(host=mysql_params["host"], port=mysql_params["port"], user=mysql_params["user"],
                           password=mysql_params["password"], autocommit=True)


def _master_status(mysql_params: dict) -> tuple[str, int]:
    conn = _connect(mysql_params)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
    finally:
        conn.close()
    return str(file), int(pos)


def _stream(mysql_params: dict, start: tuple[str, int], server_id: int, blocking: bool = False, **settings):
    from pymysqlreplication import BinLogStreamReader

    _replication_fixes.apply()
    row_decoder.install_framer()
    connection = {k: mysql_params[k] for k in ("host", "port", "user", "password")}
    connection.update(settings)
    return BinLogStreamReader(
        connection_settings=connection, server_id=server_id, blocking=blocking, resume_stream=True,
        log_file=start[0], log_pos=start[1],
        only_events=[*_replication_fixes.event_classes(), *row_decoder.framed_classes()],
        filter_non_implemented_events=False,
    )


def _fields(ev) -> tuple:
    """What the event handler and the oracle read of an event."""
    packet = ev.packet
    # a table map is the library's the first time its body bytes are seen, then framed from the
    # library's cache (process-wide): the same table map either way
    name = "TableMap" if type(ev).__name__ in ("TableMapEvent", "FramedTableMap") else type(ev).__name__
    out: tuple = (name, int(packet.event_type), int(packet.log_pos or 0), int(packet.event_size),
                  int(ev.timestamp))
    if isinstance(ev, FramedRows):
        return (*out, ev.table_id, ev.schema, ev.table, bytes(ev.data[ev.start:ev.end]),
                bytes(ev.columns_present_bitmap), ev.number_of_columns)
    for name in ("query", "next_binlog", "position", "gtid", "xid", "flags", "table_id", "schema", "table",
                 "cache_key"):
        value = getattr(ev, name, None)
        if value is not None and not callable(value):
            out = (*out, name, bytes(value) if isinstance(value, (bytes, bytearray)) else value)
    return out


def _read(mysql_params: dict, start: tuple[str, int], end: tuple[str, int], chunk: int | None) -> tuple[list, dict]:
    """Events from ``start`` up to ``end`` (file, pos); ``chunk`` None: the library's iteration."""
    stream = _stream(mysql_params, start, server_id=5411)
    calls = {"fetchone": 0, "idle": 0}
    fetchone = stream.fetchone

    def counted():
        calls["fetchone"] += 1
        return fetchone()

    stream.fetchone = counted

    def idle():
        calls["idle"] += 1

    out = []
    # rows events of every table framed (in the reader, those of tables with a compiled decoder)
    saved, row_decoder.framing_requires_decoder = row_decoder.framing_requires_decoder, False
    try:
        source = iter(stream) if chunk is None else stream_events(stream, idle, chunk=chunk)
        for ev in source:
            out.append(_fields(ev))
            if isinstance(ev, FramedRows) and chunk is not None:  # the oracle's rows of the same packet still read
                assert ev.rows is not None
            if (stream.log_file, int(ev.packet.log_pos or 0)) == end:
                break
    finally:
        row_decoder.framing_requires_decoder = saved
        stream.close()
    return out, calls


def test_packet_stream_reads_the_events_the_library_reads(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), big LONGTEXT) ENGINE=InnoDB")
    start = _master_status(mysql_params)
    run_sql(mysql_params, db,
            "BEGIN", "INSERT INTO t VALUES (1, 'a', NULL)", "INSERT INTO t VALUES (2, 'b', 'x')", "COMMIT",
            "UPDATE t SET v = 'c' WHERE id = 1",
            # a row event of about 600 KB: more than a 256 KiB read chunk
            "INSERT INTO t VALUES (3, 'big', REPEAT('0123456789', 60000))",
            "ALTER TABLE t ADD COLUMN w INT",
            "FLUSH BINARY LOGS",
            "INSERT INTO t VALUES (4, 'after', NULL, 7)",
            "BEGIN", "DELETE FROM t WHERE id = 2", "UPDATE t SET big = NULL WHERE id = 3", "COMMIT")
    end = _master_status(mysql_params)
    assert end[0] != start[0], "the binlog did not rotate"

    library, _ = _read(mysql_params, start, end, None)
    kinds = {f[0] for f in library}
    assert {"FramedWriteRows", "FramedUpdateRows", "FramedDeleteRows", "TableMap", "FramedXid",
            "FramedMariadbGtid", "QueryEvent", "RotateEvent"} <= kinds, kinds
    assert any(len(f[8]) > 256 * 1024 for f in library if f[0] == "FramedWriteRows"), "no row event above a chunk"
    for chunk in (7, 1000, 1 << 18):
        read, calls = _read(mysql_params, start, end, chunk)
        assert read == library, f"chunk {chunk}"
        assert calls["fetchone"] == 1, "the fast path read every event after the first"
        assert calls["idle"] >= 2


def test_packet_stream_reports_a_silent_connection_as_lost(mysql_params):
    stream = _stream(mysql_params, _master_status(mysql_params), server_id=5412, blocking=True, read_timeout=1)
    started = time.monotonic()
    try:
        with pytest.raises(pymysql.err.OperationalError) as caught:
            for _ in stream_events(stream, lambda: None):
                pass
    finally:
        stream.close()
    assert caught.value.args[0] == 2013 and is_connection_loss(caught.value)
    assert 0.9 <= time.monotonic() - started < 10


def test_packet_stream_reports_a_killed_connection_as_lost(mysql_params):
    stream = _stream(mysql_params, _master_status(mysql_params), server_id=5413, blocking=True, read_timeout=30)
    killed: list[int] = []

    def kill() -> None:
        conn = _connect(mysql_params)
        try:
            with conn.cursor() as cur:
                for _ in range(50):
                    time.sleep(0.1)
                    cur.execute("SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'")
                    ids = [int(r[0]) for r in cur.fetchall()]
                    if ids:
                        for i in ids:
                            cur.execute(f"KILL {i}")
                        killed.extend(ids)
                        return
        finally:
            conn.close()

    killer = threading.Thread(target=kill)
    killer.start()
    started = time.monotonic()
    try:
        with pytest.raises(pymysql.err.OperationalError) as caught:
            for _ in stream_events(stream, lambda: None):
                pass
    finally:
        stream.close()
        killer.join()
    assert killed, "no binlog dump thread to kill"
    assert is_connection_loss(caught.value), caught.value
    assert time.monotonic() - started < 20
