"""The compiled row decoder (mysql_cdc/binlog/row_decoder.py) gives exactly the library path's values.

Every rows event of a table with every compiled type (signed/unsigned integers of each width,
TINYINT(1), YEAR, FLOAT, DOUBLE, DECIMAL of several shapes and signs, CHAR/VARCHAR/TEXT in
utf8mb4, latin1 and utf16, BINARY/VARBINARY/BLOB, ENUM, DATE, TIME(p), DATETIME(p),
TIMESTAMP(p), NULLs, zero dates) is decoded twice from the real server's binlog: by the compiled
decoder and by mysql-replication + ``values.convert`` (the path used before, still used for the
other types). Values and their Python types must be identical. End to end, the binlog values of
the source (which now goes through the compiled decoder) equal the snapshot's.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pymysql
import pytest

from changelake.connectors.mysql_cdc.binlog import _replication_fixes
from changelake.connectors.mysql_cdc.binlog import event_handler as eh
from changelake.connectors.mysql_cdc.binlog import row_decoder
from changelake.connectors.mysql_cdc.binlog.row_decoder import (
    FramedDeleteRows,
    FramedRows,
    FramedTableMap,
    FramedUpdateRows,
    FramedWriteRows,
    decoder_for,
    frame_rows,
    rows_bytes,
)
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker
from changelake.connectors.mysql_cdc.values import library_rows

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


def _rows_events(mysql_params: dict, db: str, start: tuple[str, int], framing: bool = True, frames: list | None = None,
                 maps: list | None = None):
    """(event, schema) of every rows event of ``db`` after ``start`` (mysql-replication as the reader uses it).

    ``framing`` False: every packet is framed by the library (the oracle). ``frames``: if given,
    each library rows event's packet is also framed by ``row_decoder.frame_rows`` (compiled
    decoder or not) and ``(library event, framed event)`` appended to it. ``maps``: the table
    maps of ``db`` are appended to it.
    """
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import RowsEvent, TableMapEvent

    _replication_fixes.apply()
    row_decoder.install_framer()
    tracker = SchemaTracker(lambda table_id: None)
    stream = BinLogStreamReader(
        connection_settings={k: mysql_params[k] for k in ("host", "port", "user", "password")},
        server_id=5399, blocking=False, resume_stream=True, log_file=start[0], log_pos=start[1],
        only_events=[*_replication_fixes.event_classes(), *row_decoder.framed_classes()],
        filter_non_implemented_events=False,
    )
    saved, row_decoder.framing_enabled = row_decoder.framing_enabled, framing
    try:
        for ev in stream:
            if isinstance(ev, (TableMapEvent, FramedTableMap)) and ev.schema == db:
                if maps is not None:
                    maps.append(ev)
                tracker.on_table_map(ev)
            elif isinstance(ev, (RowsEvent, FramedRows)) and getattr(ev, "schema", None) == db:
                if frames is not None and not isinstance(ev, FramedRows):
                    frames.append((ev, frame_rows(
                        ev.packet.packet._data, stream.table_map, stream._BinLogStreamReader__use_checksum,
                        stream._BinLogStreamReader__post_header_lengths, require_compiled=False)))
                yield ev, tracker.for_rows_event(ev)
    finally:
        row_decoder.framing_enabled = saved
        stream.close()


def _binlog_start(mysql_params: dict) -> tuple[str, int]:
    conn = _connect(mysql_params)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
    finally:
        conn.close()
    return str(file), int(pos)


def _assert_same_images(fast, slow) -> int:
    """Same ops, same columns in the same order, equal values of identical Python types."""
    assert [op for op, _, _ in fast] == [op for op, _, _ in slow]
    compared = 0
    for (_, fb, fa), (_, sb, sa) in zip(fast, slow):
        for f_img, s_img in ((fb, sb), (fa, sa)):
            if s_img is None:
                assert f_img is None
                continue
            assert list(f_img) == list(s_img)
            for name in s_img:
                assert f_img[name] == s_img[name], (name, f_img[name], s_img[name])
                assert type(f_img[name]) is type(s_img[name]), (name, f_img[name], s_img[name])
                compared += 1
    return compared


def _assert_framed_like_library(lib, framed) -> None:
    """The framer read the packet exactly as the library did: header fields and row-image span."""
    assert framed is not None, "a v1/v2 rows event with its table map is framed"
    assert type(framed).__mro__[1] is FramedRows
    assert isinstance(lib, row_decoder_lib_class(framed))
    assert (framed.table_id, framed.schema, framed.table) == (lib.table_id, lib.schema, lib.table)
    assert framed.number_of_columns == lib.number_of_columns
    assert bytes(framed.columns_present_bitmap) == bytes(lib.columns_present_bitmap)
    assert (None if framed.columns_present_bitmap2 is None else bytes(framed.columns_present_bitmap2)) == (
        bytes(lib.columns_present_bitmap2) if getattr(lib, "columns_present_bitmap2", None) is not None else None)
    assert (framed.event_type, framed.timestamp, framed.log_pos, framed.event_size) == (
        lib.packet.event_type, lib.timestamp, lib.packet.log_pos, lib.packet.event_size)
    assert framed.columns is lib.columns
    span = rows_bytes(lib)
    assert span is not None and (framed.start, framed.end) == span[1:]
    assert framed.data is span[0]


def row_decoder_lib_class(framed):
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    return {FramedWriteRows: WriteRowsEvent, FramedUpdateRows: UpdateRowsEvent, FramedDeleteRows: DeleteRowsEvent}[type(framed)]


def _library_rows(ev, schema):
    """The rows of ``ev`` as mysql-replication + values.convert read them (the test oracle)."""
    return library_rows(ev, schema.columns)


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
    # SET and BIT are compiled now, and MariaDB's JSON is LONGTEXT: the library's values, from both paths
    assert decoder_for(ev.columns, schema.columns) is not None
    (_, _, fast_after), = eh._compiled_rows(ev, schema)  # first: the library's read consumes the packet
    (_, _, after), = _library_rows(ev, schema)
    assert after == {"id": 1, "s": "a,b", "b": b"\x05", "j": "[1]"}
    assert fast_after == after


def test_pre_56_temporal_types_are_compiled(mysql_params, database_factory):
    """TIME / DATETIME / TIMESTAMP in the pre-5.6 binlog formats (MariaDB with
    mysql56_temporal_format=OFF at CREATE time: binlog types 11, 12, 7) are compiled, with the
    library's values; a negative old TIME, which the library reads unsigned, is read signed (as
    the snapshot has it)."""
    db = database_factory()
    with _old_temporal_format(mysql_params):
        run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, t TIME, dt DATETIME, ts TIMESTAMP NULL)")
    start = _binlog_start(mysql_params)
    run_sql(mysql_params, db, "SET time_zone='+00:00'", "SET sql_mode=''",
            "INSERT INTO t VALUES (1, '01:02:03', '2024-02-29 23:59:59', '2024-01-01 10:00:00')",
            "INSERT INTO t VALUES (2, '838:59:59', '1000-01-01 00:00:00', '1970-01-01 00:00:01')",
            "INSERT INTO t VALUES (3, '00:00:00', '0000-00-00 00:00:00', '0000-00-00 00:00:00')",
            "INSERT INTO t VALUES (4, NULL, '2015-00-21 10:00:00', NULL)",
            "INSERT INTO t VALUES (5, '-01:02:03', '9999-12-31 23:59:59', '2038-01-19 03:14:07')",
            "UPDATE t SET t = '-838:59:59' WHERE id = 1")
    events = list(_rows_events(mysql_params, db, start))
    assert len(events) == 6
    assert {int(c.type) for c in events[0][0].columns} == {3, 11, 12, 7}  # LONG, TIME, DATETIME, TIMESTAMP
    compiled = [eh._compiled_rows(ev, schema) for ev, schema in events]
    for (ev, schema), fast in zip(events[:4], compiled[:4]):
        assert _assert_same_images(fast, _library_rows(ev, schema)) == 4
    assert compiled[0][0][2] == {"id": 1, "t": dt.timedelta(hours=1, minutes=2, seconds=3),
                                 "dt": dt.datetime(2024, 2, 29, 23, 59, 59),
                                 "ts": dt.datetime(2024, 1, 1, 10, tzinfo=dt.timezone.utc)}
    assert compiled[2][0][2] == {"id": 3, "t": dt.timedelta(0), "dt": None, "ts": None}
    assert compiled[3][0][2] == {"id": 4, "t": None, "dt": None, "ts": None}
    # negative TIME: the library's unsigned read is wrong; the decoder's is the snapshot's value
    (_, _, fifth), = compiled[4]
    (_, _, lib_fifth), = _library_rows(*events[4])
    assert fifth["t"] == -dt.timedelta(hours=1, minutes=2, seconds=3) != lib_fifth["t"]
    assert {k: v for k, v in fifth.items() if k != "t"} == {k: v for k, v in lib_fifth.items() if k != "t"}
    (_, before, after), = compiled[5]
    assert before["t"] == dt.timedelta(hours=1, minutes=2, seconds=3)
    assert after["t"] == -dt.timedelta(hours=838, minutes=59, seconds=59)


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


def _check_framer(mysql_params, database_factory, table: str | None, rows: list[str],
                  db: str | None = None) -> tuple[int, int]:
    """Rows events framed from the raw packet (row_decoder.frame_rows) read exactly like the
    library's: same header fields, bitmaps and row-image span, and, decoded by the compiled
    decoder, the library's values. A second pass over the same binlog with the framer in front of
    the library's framing gets every rows event and every table map seen before as a framed event
    (no library event object), with the same values. Returns (rows events, values compared).
    ``db``: a database whose table exists already (``table`` None)."""
    if db is None:
        db = database_factory()
        run_sql(mysql_params, db, table)
    start = _binlog_start(mysql_params)
    run_sql(mysql_params, db, *rows)

    frames: list = []
    lib_maps: list = []
    oracle = list(_rows_events(mysql_params, db, start, framing=False, frames=frames, maps=lib_maps))
    assert len(oracle) == len(frames) > 0
    expected = []
    for (lib, framed), (ev, schema) in zip(frames, oracle):
        assert ev is lib and not isinstance(ev, FramedRows)
        _assert_framed_like_library(lib, framed)
        assert decoder_for(lib.columns, schema.columns) is not None, "every column type here is compiled"
        slow = _library_rows(lib, schema)
        assert _assert_same_images(eh._compiled_rows(framed, schema), slow) > 0
        expected.append(slow)

    # the library's table maps made the decoders above; now the framer frames these tables' events
    framed_maps: list = []
    streamed = list(_rows_events(mysql_params, db, start, framing=True, maps=framed_maps))
    assert len(streamed) == len(oracle)
    assert len(framed_maps) == len(lib_maps) == len(oracle)
    for lib, framed in zip(lib_maps, framed_maps):  # table maps seen before: from the cache, no library object
        assert isinstance(framed, FramedTableMap) and not isinstance(lib, FramedTableMap)
        assert (framed.table_id, framed.schema, framed.table, framed.cache_key) == (lib.table_id, lib.schema, lib.table,
                                                                                  lib.cache_key)
        assert framed.get_table() is lib.get_table() and framed.columns is lib.columns
        assert (framed.event_type, framed.timestamp, framed.log_pos, framed.event_size) == (
            lib.packet.event_type, lib.timestamp, lib.packet.log_pos, lib.packet.event_size)
    compared = 0
    for (ev, schema), slow in zip(streamed, expected):
        assert isinstance(ev, FramedRows), type(ev)
        compared += _assert_same_images(eh.EventHandler._rows(eh.EventHandler.__new__(eh.EventHandler), ev, schema), slow)
    return len(oracle), compared


def test_framer_reads_every_type_case_as_the_library(mysql_params, database_factory):
    """The type matrix above (integers signed/unsigned, DECIMAL, FLOAT/DOUBLE, charsets, BLOBs,
    temporal types with fsp, zero dates, ENUM, NULL bitmaps) through the framer."""
    events, compared = _check_framer(mysql_params, database_factory, TABLE, ROWS)
    assert (events, compared) == (6, 10 * 41)


COMPILED_EXTRA = (
    "CREATE TABLE t (id INT PRIMARY KEY, s SET('a','b','c'), s64 SET('m0','m1','m2','m3','m4','m5','m6','m7','m8'),"
    " b1 BIT(1), b3 BIT(3), b9 BIT(9), b64 BIT(64), g GEOMETRY, p POINT, mb MEDIUMBLOB, lb LONGBLOB,"
    " vc VARCHAR(20) CHARACTER SET ascii, gb VARCHAR(20) CHARACTER SET gbk, nn VARCHAR(5) NOT NULL DEFAULT '',"
    " d DECIMAL(65,30), ts TIMESTAMP(3) NULL, bi BIGINT UNSIGNED, e ENUM('x','y') NOT NULL DEFAULT 'y')"
)
COMPILED_EXTRA_ROWS = [
    "INSERT INTO t VALUES (1, 'a,c', 'm0,m8', b'1', b'101', b'100000001',"
    " b'1111111111111111111111111111111111111111111111111111111111111111',"
    " ST_GeomFromText('LINESTRING(0 0, 1 1)'), POINT(1.5, -2), REPEAT(X'00FF', 40000), REPEAT('z', 70000),"
    " 'abc', X'C4E3BAC3', 'n', -1.5, '2024-01-01 00:00:00.123', 18446744073709551615, 'x')",
    "INSERT INTO t (id) VALUES (2)",
    "INSERT INTO t (id, s, b1, b3, g) VALUES (3, '', b'0', b'000', ST_GeomFromText('POLYGON((0 0, 1 0, 1 1, 0 0))'))",
    "UPDATE t SET s = '', s64 = 'm3', b9 = b'0', p = NULL, nn = 'zz' WHERE id = 1",
    "DELETE FROM t WHERE id IN (2, 3)",
]


def test_framer_reads_set_bit_geometry_and_more_as_the_library(mysql_params, database_factory):
    """SET (empty set -> ''), BIT(1) / BIT(n) of several widths, GEOMETRY and POINT, large BLOBs
    (3- and 4-byte lengths), ascii and gbk text, unsigned BIGINT, NOT NULL runs: compiled, framed,
    and equal to the library's values."""
    events, compared = _check_framer(mysql_params, database_factory, COMPILED_EXTRA, COMPILED_EXTRA_ROWS)
    assert (events, compared) == (5, 7 * 18)


OLD_TEMPORAL = "CREATE TABLE t (id INT PRIMARY KEY, t TIME, dt DATETIME, ts TIMESTAMP NULL, v VARCHAR(10))"
OLD_TEMPORAL_ROWS = [
    "SET time_zone='+00:00'",
    "INSERT INTO t VALUES (1, '01:02:03', '2024-02-29 23:59:59', '2024-01-01 10:00:00', 'a')",
    "INSERT INTO t (id) VALUES (2)",
    "UPDATE t SET v = 'b', t = '12:00:00' WHERE id = 1",
    "DELETE FROM t WHERE id = 2",
]


class _old_temporal_format:
    """``with _old_temporal_format(params):`` tables created inside use the pre-5.6 formats."""

    def __init__(self, params: dict) -> None:
        self.params = params

    def __enter__(self) -> None:
        run_sql(self.params, None, "SET GLOBAL mysql56_temporal_format = OFF")

    def __exit__(self, *exc: object) -> None:
        run_sql(self.params, None, "SET GLOBAL mysql56_temporal_format = ON")


def test_framer_reads_pre_56_temporal_tables_as_the_library(mysql_params, database_factory):
    """A table with pre-5.6 TIME / DATETIME / TIMESTAMP: compiled, framed from the raw packet
    exactly as the library frames it, and read with the library's values."""
    with _old_temporal_format(mysql_params):
        db = database_factory()
        run_sql(mysql_params, db, OLD_TEMPORAL)
    events, compared = _check_framer(mysql_params, database_factory, None, OLD_TEMPORAL_ROWS, db=db)
    assert (events, compared) == (4, 5 * 5)


def test_framer_reads_partial_images_as_the_library(mysql_params, database_factory):
    """binlog_row_image=MINIMAL: the framer's column bitmaps are the library's (partial images
    are then refused by the handler, RowImageError, whichever framed the event)."""
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(10))",
            "INSERT INTO t VALUES (1, 1, 'x')")
    start = _binlog_start(mysql_params)
    run_sql(mysql_params, db, "SET SESSION binlog_row_image = 'MINIMAL'", "UPDATE t SET a = 2 WHERE id = 1",
            "DELETE FROM t WHERE id = 1")
    frames: list = []
    oracle = list(_rows_events(mysql_params, db, start, framing=False, frames=frames))
    assert len(oracle) == 2
    for lib, framed in frames:
        _assert_framed_like_library(lib, framed)
        assert bytes(framed.columns_present_bitmap) != b"\x07"  # not the full image


def test_framer_leaves_stream_readers_without_its_classes_to_the_library(mysql_params, database_factory):
    """A stream reader whose ``only_events`` lacks the framed classes (the library would drop
    framed events) gets the library's events even for a compiled table."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    events, _ = _check_framer(mysql_params, database_factory, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5))",
                              ["INSERT INTO t VALUES (1, 'a')"])  # compiled, framed in the reader's stream
    assert events == 1
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5))")
    start = _binlog_start(mysql_params)
    run_sql(mysql_params, db, "INSERT INTO t VALUES (1, 'a')", "INSERT INTO t VALUES (2, 'b')")
    list(_rows_events(mysql_params, db, start, framing=False))  # decoder built for this table
    stream = BinLogStreamReader(
        connection_settings={k: mysql_params[k] for k in ("host", "port", "user", "password")},
        server_id=5398, blocking=False, resume_stream=True, log_file=start[0], log_pos=start[1],
        only_events=list(_replication_fixes.event_classes()), filter_non_implemented_events=False,
    )
    try:
        got = [ev for ev in stream if isinstance(ev, (WriteRowsEvent, FramedRows)) and ev.schema == db]
    finally:
        stream.close()
    assert len(got) == 2 and not any(isinstance(ev, FramedRows) for ev in got)


# -- the cases once left to the library: each compared value for value with the library oracle ----

MINIMAL_TABLE = (
    "CREATE TABLE t (id INT PRIMARY KEY, e ENUM('x','y,z','w'), s SET('a','b','c'), iu INT UNSIGNED,"
    " tiu TINYINT UNSIGNED NOT NULL DEFAULT 0, miu MEDIUMINT UNSIGNED, biu BIGINT UNSIGNED, l VARCHAR(10) CHARACTER SET latin1,"
    " u16 VARCHAR(10) CHARACTER SET utf16, ch CHAR(4), bn BINARY(4), vb VARBINARY(8), bl BLOB,"
    " vcb VARCHAR(8) CHARACTER SET binary, tx TEXT, d DECIMAL(10,3))"
)


def _minimal_rows(base: int) -> list[str]:
    return [
        f"INSERT INTO t VALUES ({base + 1}, 'y,z', 'a,c', 4294967295, 255, 16777215, 18446744073709551615, 'café',"
        " 'h€llo', 'ab', X'FF00', X'80FF00', X'00C3', X'FE', 'é', -1.5)",
        f"INSERT INTO t (id, s) VALUES ({base + 2}, '')",
        f"UPDATE t SET e = 'w', s = 'b', iu = 0, vb = X'C3A9' WHERE id = {base + 1}",
        f"DELETE FROM t WHERE id = {base + 2}",
    ]


def _hinted_rows_events(mysql_params: dict, db: str, start: tuple[str, int], each=None, **kwargs):
    """:func:`_rows_events` with a schema tracker that reads information_schema (as the source's);
    ``each(ev, schema)``: called while streaming (the library reads rows with the table map of
    the moment), its results returned instead of the events."""
    from changelake.connectors.mysql_cdc.schema.tracker import load_table_schema

    conn = pymysql.connect(host=mysql_params["host"], port=mysql_params["port"], user=mysql_params["user"],
                           password=mysql_params["password"], autocommit=True, charset="utf8mb4")
    saved = SchemaTracker.__init__

    def init(self, loader):
        saved(self, lambda table_id: load_table_schema(conn, table_id))

    SchemaTracker.__init__ = init
    try:
        return [each(ev, schema) if each else (ev, schema) for ev, schema in _rows_events(mysql_params, db, start, **kwargs)]
    finally:
        SchemaTracker.__init__ = saved
        conn.close()


def _shift(rows, by: int):
    def img(values):
        return None if values is None else {**values, "id": values["id"] + by}
    return [(op, img(b), img(a)) for op, b, a in rows]


def test_table_maps_without_column_metadata_are_compiled(mysql_params, database_factory):
    """binlog_row_metadata=MINIMAL: the table maps carry no column names, signedness, charsets
    or ENUM/SET labels (the library reads such ENUMs as None, unsigned integers signed, every
    string - BINARY/BLOB too - as utf-8 text). The decoder reads them with the schema's
    (information_schema) facts: the same rows written under MINIMAL decode to exactly the values
    the library oracle gives for them written under FULL, binary columns as bytes."""
    db = database_factory()
    run_sql(mysql_params, db, MINIMAL_TABLE)
    start = _binlog_start(mysql_params)
    run_sql(mysql_params, db, *_minimal_rows(0))
    run_sql(mysql_params, None, "SET GLOBAL binlog_row_metadata = MINIMAL")
    try:
        run_sql(mysql_params, db, *_minimal_rows(100))
    finally:
        run_sql(mysql_params, None, "SET GLOBAL binlog_row_metadata = FULL")

    def both(ev, schema):
        names = [c.name for c in ev.columns]
        fast = eh._compiled_rows(ev, schema)  # first: the library's read consumes the packet
        try:
            return names, fast, _library_rows(ev, schema)
        except UnicodeDecodeError as exc:  # the library on MINIMAL maps: latin1 read as utf-8
            return names, fast, exc

    events = _hinted_rows_events(mysql_params, db, start, each=both, framing=False)
    assert len(events) == 8
    full, minimal = events[:4], events[4:]
    assert all(n is not None for n in full[0][0])
    assert all(n is None for n in minimal[0][0]), "MINIMAL table maps carry no names"
    compared = 0
    for (_, fast, oracle), (_, mfast, _) in zip(full, minimal):
        assert _assert_same_images(fast, oracle) > 0
        compared += _assert_same_images(_shift(mfast, -100), oracle)
    assert compared == 5 * 16  # 2 inserts, 1 update (before and after), 1 delete; 16 columns
    (_, _, first), = minimal[0][1]
    assert (first["e"], first["s"], first["biu"], first["l"], first["bn"], first["vcb"]) == (
        "y,z", "a,c", decimal.Decimal(18446744073709551615), "café", b"\xff\x00\x00\x00", b"\xfe")
    # the library itself cannot read the MINIMAL event (latin1 'café' decoded as utf-8)
    assert isinstance(minimal[0][2], UnicodeDecodeError)


def test_compressed_rows_events_are_compiled(mysql_params, database_factory):
    """log_bin_compress=ON: MariaDB's WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT_V1 are framed
    from the raw packet (row images uncompressed, .compression) and read by the decoder, also
    when the library framed them (uncompressed bytes pushed back, _replication_fixes item 3).
    The same statements run uncompressed in another database are the oracle's (the library
    itself misreads a compressed event's DECIMALs: its big-endian reads bypass the pushed-back
    bytes): every value, for the whole type matrix, equals the library's."""
    plain_db, db = database_factory(), database_factory()
    run_sql(mysql_params, plain_db, TABLE)
    run_sql(mysql_params, db, TABLE)
    extra = ["INSERT INTO t (id, vc) VALUES (5, REPEAT('q', 300))", "UPDATE t SET vc = REPEAT('r', 290) WHERE id = 5",
             "DELETE FROM t WHERE id = 5"]
    start = _binlog_start(mysql_params)
    run_sql(mysql_params, plain_db, *ROWS, *extra)
    run_sql(mysql_params, None, "SET GLOBAL log_bin_compress = ON")
    try:
        run_sql(mysql_params, db, *ROWS, *extra)
    finally:
        run_sql(mysql_params, None, "SET GLOBAL log_bin_compress = OFF")
    oracle = []
    for ev, schema in _rows_events(mysql_params, plain_db, start, framing=False):
        oracle.append((int(ev.packet.event_type), _library_rows(ev, schema)))
    frames: list = []
    compressed = list(_rows_events(mysql_params, db, start, framing=False, frames=frames))
    codes = [int(lib.packet.event_type) for lib, _ in frames]
    assert {0xA6, 0xA7, 0xA8} <= set(codes), codes
    assert len(compressed) == len(oracle) == 9
    compared = 0
    for (lib, framed), (ev, schema), (plain_code, slow) in zip(frames, compressed, oracle):
        assert framed is not None and framed.event_type == int(lib.packet.event_type)
        compared += _assert_same_images(eh._compiled_rows(lib, schema), slow)  # framed by the library
        _assert_same_images(eh._compiled_rows(framed, schema), slow)  # framed from the raw packet
    assert compared == (10 + 4) * 41
    streamed = list(_rows_events(mysql_params, db, start, framing=True))
    assert len(streamed) == len(oracle)
    for (ev, schema), (_, slow) in zip(streamed, oracle):
        assert isinstance(ev, FramedRows), type(ev)
        _assert_same_images(eh.EventHandler._rows(eh.EventHandler.__new__(eh.EventHandler), ev, schema), slow)


def test_unreadable_column_stops_with_table_column_file_and_position(mysql_params, database_factory):
    """No fallback: a column the decoder does not read (MariaDB 5.3's TIME(n) format, created
    with mysql56_temporal_format=OFF) stops the reader with an error naming the table, the
    column, the binlog file and the event's position."""
    from changelake.connectors.mysql_cdc.errors import UnsupportedBinlogEventError

    db = database_factory()
    with _old_temporal_format(mysql_params):
        run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, t3 TIME(3))")
    start = _binlog_start(mysql_params)
    run_sql(mysql_params, db, "INSERT INTO t VALUES (1, '01:02:03.456')")
    (ev, schema), = _hinted_rows_events(mysql_params, db, start)
    handler = eh.EventHandler.__new__(eh.EventHandler)
    handler._file = start[0]
    with pytest.raises(UnsupportedBinlogEventError) as err:
        handler._rows(ev, schema)
    text = str(err.value)
    pos = int(ev.packet.log_pos) - int(ev.packet.event_size)
    assert pos > start[1]
    assert f"{db}.t" in text and "'t3'" in text and f"{start[0]}:{pos}" in text, text
    assert (err.value.file, err.value.pos, err.value.table) == (start[0], pos, f"{db}.t")
