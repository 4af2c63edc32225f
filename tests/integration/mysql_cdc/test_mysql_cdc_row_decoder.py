"""The compiled row decoder (mysql_cdc/row_decoder.py) gives exactly the library path's values.

Every rows event of a table with every compiled type (signed/unsigned integers of each width,
TINYINT(1), YEAR, FLOAT, DOUBLE, DECIMAL of several shapes and signs, CHAR/VARCHAR/TEXT in
utf8mb4, latin1 and utf16, BINARY/VARBINARY/BLOB, ENUM, DATE, TIME(p), DATETIME(p),
TIMESTAMP(p), NULLs, zero dates) is decoded twice from the real server's binlog: by the compiled
decoder and by mysql-replication + ``values.convert`` (the path used before, still used for the
other types). Values and their Python types must be identical. End to end, the binlog values of
the source (which now goes through the compiled decoder) equal the snapshot's.
"""

from __future__ import annotations

import pymysql
import pytest

from changelake.connectors.mysql_cdc import _replication_fixes
from changelake.connectors.mysql_cdc import event_handler as eh
from changelake.connectors.mysql_cdc.row_decoder import decoder_for
from changelake.connectors.mysql_cdc.schema_tracker import SchemaTracker

from mysql_cdc_support import run_sql

pytestmark = pytest.mark.integration

TABLE = (
    "CREATE TABLE t (id INT PRIMARY KEY,"
    " ti TINYINT, tiu TINYINT UNSIGNED NOT NULL DEFAULT 0, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT,"
    " miu MEDIUMINT UNSIGNED, i INT NOT NULL DEFAULT 0, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,"
    " bo TINYINT(1), y YEAR, dbl DOUBLE NOT NULL DEFAULT 0, fl FLOAT, d1 DECIMAL(10,2), d2 DECIMAL(65,30),"
    " d3 DECIMAL(5,5), d4 DECIMAL(20,0) UNSIGNED, d5 DECIMAL(18,9), e ENUM('x','y,z','w'), ch CHAR(5),"
    " chn CHAR(3) NOT NULL DEFAULT '', vc VARCHAR(300), bn BINARY(4), vb VARBINARY(8), tx TEXT CHARACTER SET latin1,"
    " u16 VARCHAR(10) CHARACTER SET utf16, lt LONGTEXT, tb TINYBLOB, t0 TIME, t2 TIME(2), t4 TIME(4), t6 TIME(6),"
    " dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), ts0 TIMESTAMP NULL, ts1 TIMESTAMP(1) NULL, ts6 TIMESTAMP(6) NULL,"
    " dd DATE)"
)
ROWS = [
    "SET sql_mode=''",
    "SET time_zone='+00:00'",
    "INSERT INTO t VALUES (1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,"
    " -9223372036854775808, 18446744073709551615, 1, 0, 1.7976931348623157e308, 0.1234567, -12.34,"
    " 12345678901234567890.123456789012345678901234567890, -0.12345, 18446744073709551615, -123456789.000000001,"
    " 'y,z', 'ab  ', 'q', REPEAT('é', 300), 'a\\0', '', CONCAT('café €', _latin1 X'81'), 'h€llo', 'x', UNHEX('00'),"
    " '00:00:00', '-00:00:01.25', '-838:59:58.9999', '12:34:56.789012', '2024-02-29 23:59:59',"
    " '2018-05-29 17:36:19.7', '1000-01-01 00:00:00.000001', '1970-01-01 00:00:01', '2038-01-19 03:14:07.9',"
    " '2024-01-01 10:00:00.120001', '2024-02-29')",
    "INSERT INTO t (id, ti, bo, y, e, ch, bn, ts0, t2, dbl, fl, dt0, dd, d1, d5) VALUES"
    " (2, 127, 5, 2155, 'x', '', '', '0000-00-00 00:00:00', '-12:00:00.5', -0.0, -3.4028235e38,"
    " '0000-00-00 00:00:00', '0000-00-00', 0, 0.000000001)",
    "INSERT INTO t (id, dt0, dd) VALUES (3, '2015-00-21 10:00:00', '2015-05-00')",
    "INSERT INTO t (id) VALUES (4)",
    "UPDATE t SET vc = 'changed', i = i + 1, d2 = -d2, ts6 = NULL WHERE id IN (1, 2)",
    "DELETE FROM t WHERE id IN (3, 4)",
]


def _connect(params: dict) -> pymysql.Connection:
    return pymysql.connect(host=params["host"], port=params["port"], user=params["user"],
                           password=params["password"], autocommit=True)


def _rows_events(mysql_params: dict, db: str, start: tuple[str, int]):
    """(event, schema) of every rows event of ``db`` after ``start`` (mysql-replication as the reader uses it)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import RowsEvent, TableMapEvent

    _replication_fixes.apply()
    tracker = SchemaTracker(lambda table_id: None)
    stream = BinLogStreamReader(
        connection_settings={k: mysql_params[k] for k in ("host", "port", "user", "password")},
        server_id=5399, blocking=False, resume_stream=True, log_file=start[0], log_pos=start[1],
        only_events=list(_replication_fixes.event_classes()), filter_non_implemented_events=False,
    )
    try:
        for ev in stream:
            if isinstance(ev, TableMapEvent) and ev.schema == db:
                tracker.on_table_map(ev)
            elif isinstance(ev, RowsEvent) and getattr(ev, "schema", None) == db:
                yield ev, tracker.for_rows_event(ev)
    finally:
        stream.close()


def _library_rows(ev, schema):
    """The rows of ``ev`` as EventHandler read them before the compiled decoder."""
    saved = eh._compiled_rows
    eh._compiled_rows = lambda e, s: None
    try:
        handler = eh.EventHandler.__new__(eh.EventHandler)
        return handler._rows(ev, schema)
    finally:
        eh._compiled_rows = saved


def test_compiled_decoder_equals_library_on_every_type(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, TABLE)
    conn = _connect(mysql_params)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
    finally:
        conn.close()
    run_sql(mysql_params, db, *ROWS)

    events = list(_rows_events(mysql_params, db, (str(file), int(pos))))
    assert len(events) == 6  # 4 inserts, 1 update (2 rows), 1 delete (2 rows)
    compared = 0
    for ev, schema in events:
        assert decoder_for(ev.columns, schema.columns) is not None, "every column type here is compiled"
        fast = eh._compiled_rows(ev, schema)
        assert fast is not None
        slow = _library_rows(ev, schema)
        assert [op for op, _, _ in fast] == [op for op, _, _ in slow]
        for (_, fb, fa), (_, sb, sa) in zip(fast, slow):
            for f_img, s_img in ((fb, sb), (fa, sa)):
                if s_img is None:
                    assert f_img is None
                    continue
                assert list(f_img) == list(s_img)  # same columns, same order
                for name in s_img:
                    assert f_img[name] == s_img[name], (name, f_img[name], s_img[name])
                    assert type(f_img[name]) is type(s_img[name]), (name, f_img[name], s_img[name])
                    compared += 1
    assert compared == 10 * 41  # 4 inserts, 2 updates (before and after), 2 deletes; 41 columns


def test_table_with_other_types_stays_with_the_library(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, s SET('a','b'), b BIT(3), j JSON)")
    conn = _connect(mysql_params)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
    finally:
        conn.close()
    run_sql(mysql_params, db, "INSERT INTO t VALUES (1, 'a,b', b'101', '[1]')")
    (ev, schema), = list(_rows_events(mysql_params, db, (str(file), int(pos))))
    assert decoder_for(ev.columns, schema.columns) is None
    assert eh._compiled_rows(ev, schema) is None
    (_, _, after), = _library_rows(ev, schema)
    assert after == {"id": 1, "s": "a,b", "b": b"\x05", "j": "[1]"}


def test_binlog_values_equal_snapshot_values(capture):
    binlog, snapshot = capture([TABLE], ROWS[:6])
    binlog = sorted((e for e in binlog if e.after is not None), key=lambda e: e.after["id"])
    snapshot = sorted(snapshot, key=lambda e: e.after["id"])
    assert [e.after["id"] for e in binlog] == [1, 2, 3, 4]
    assert [e.after["id"] for e in snapshot] == [1, 2, 3, 4]
    for b, s in zip(binlog, snapshot):
        for name in s.after:
            assert b.after[name] == s.after[name], (b.after["id"], name, b.after[name], s.after[name])
            assert type(b.after[name]) is type(s.after[name]), (name, b.after[name], s.after[name])
