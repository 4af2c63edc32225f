"""Cases V1-V10 (cases/binlog-types.md) and a wider type matrix, against the real MariaDB.

Every case runs twice: binlog path (source started before the inserts) and snapshot path
(``scan.startup.mode: snapshot`` afterwards). Both must give identical Python values, and the
Debezium-JSON value spelling (via the formats' JSON value codec) must equal the case's answer.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from changelake.changelog.event import Op
from changelake.changelog.types import TypeRoot
from changelake.connectors.mysql_cdc.snapshot.reader import read_table

from mysql_cdc_support import json_row

pytestmark = pytest.mark.integration

CASES = {
    "V1": (
        ["CREATE TABLE t (id INT PRIMARY KEY, d DECIMAL(10,2), z DECIMAL(5,5))"],
        ["INSERT INTO t VALUES (1,-12.34,-0.12345),(2,0.00,0.00001)"],
        ['{"id":1,"d":-12.34,"z":-0.12345}', '{"id":2,"d":0.00,"z":0.00001}'],
    ),
    "V2": (
        ["CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY)"],
        ["INSERT INTO t VALUES (18446744073709551615),(9223372036854775808)"],
        ['{"id":9223372036854775808}', '{"id":18446744073709551615}'],
    ),
    "V3": (
        ["CREATE TABLE t (id INT PRIMARY KEY, f FLOAT)"],
        ["INSERT INTO t VALUES (1,5.15),(2,0.1)"],
        ['{"id":1,"f":5.15}', '{"id":2,"f":0.1}'],
    ),
    "V4": (
        ["CREATE TABLE t (id INT PRIMARY KEY, d3 DATETIME(3), d6 DATETIME(6), t1 TIMESTAMP(1) NULL)"],
        ["SET time_zone='+00:00'",
         "INSERT INTO t VALUES (1,'2018-05-29 17:36:19.7','2018-05-29 17:36:19.7','2018-05-29 17:36:19.7')"],
        ['{"id":1,"d3":"2018-05-29 17:36:19.7","d6":"2018-05-29 17:36:19.7","t1":"2018-05-29 17:36:19.7Z"}'],
    ),
    "V5": (
        ["CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP(3) NULL, dt DATETIME(3))"],
        ["SET time_zone='+08:00'", "INSERT INTO t VALUES (1,'2024-01-01 10:00:00.120','2024-01-01 10:00:00.120')"],
        ['{"id":1,"ts":"2024-01-01 02:00:00.12Z","dt":"2024-01-01 10:00:00.12"}'],
    ),
    "V6": (
        ["SET sql_mode=''", "CREATE TABLE t (id INT PRIMARY KEY, d DATE, dn DATE NOT NULL)"],
        ["SET sql_mode=''", "INSERT INTO t VALUES (1,'0000-00-00','0000-00-00'),(2,'2015-00-21','2015-05-00')"],
        ['{"id":1,"d":null,"dn":null}', '{"id":2,"d":null,"dn":null}'],
    ),
    "V7": (
        ["CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(16) CHARACTER SET utf8mb4)"],
        ["INSERT INTO t VALUES (1,'a😀b')"],
        ['{"id":1,"s":"a😀b"}'],
    ),
    "V8": (
        ["CREATE TABLE t (id INT PRIMARY KEY, v VARBINARY(16), bl BLOB)"],
        ["INSERT INTO t VALUES (1,INET6_ATON('::1'),UNHEX('FF00FE'))"],
        ['{"id":1,"v":"AAAAAAAAAAAAAAAAAAAAAQ==","bl":"/wD+"}'],
    ),
    "V9": (
        ["CREATE TABLE t (id INT PRIMARY KEY, j JSON)"],
        ["""INSERT INTO t VALUES (1,'{"b":1,"a":[true,null,"x"]}'),(2,NULL)"""],
        [json.dumps({"id": 1, "j": '{"b":1,"a":[true,null,"x"]}'}, separators=(",", ":")), '{"id":2,"j":null}'],
    ),
    "V10": (
        ["CREATE TABLE t (id INT PRIMARY KEY, a TIME(6), c TIME)"],
        ["INSERT INTO t VALUES (1,'-00:00:01.500000','838:59:59'),(2,'12:34:56.789','-01:00:00')"],
        ['{"id":1,"a":"-00:00:01.5","c":"838:59:59"}', '{"id":2,"a":"12:34:56.789","c":"-01:00:00"}'],
    ),
}


def _by_id(events):
    return sorted(events, key=lambda e: e.after["id"])


@pytest.mark.parametrize("case", sorted(CASES, key=lambda c: int(c[1:])))
def test_case_values_binlog_and_snapshot(capture, case):
    setup, changes, expected = CASES[case]
    binlog, snapshot = capture(setup, changes)
    assert [e.op for e in binlog] == [Op.CREATE] * len(expected)
    assert [e.op for e in snapshot] == [Op.READ] * len(expected)
    assert all(e.ts_ms > 0 for e in binlog) and all(e.ts_ms == 0 for e in snapshot)
    binlog, snapshot = _by_id(binlog), _by_id(snapshot)
    # identical Python values and schemas in both paths
    assert [e.after for e in binlog] == [e.after for e in snapshot]
    assert [e.schema for e in binlog] == [e.schema for e in snapshot]
    # and the Debezium-JSON value spelling of the case
    assert [json_row(e.after, e) for e in binlog] == expected
    assert [json_row(e.after, e) for e in snapshot] == expected


def test_case_types_follow_flink_cdc_mapping(capture):
    binlog, snapshot = capture(
        ["CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, d DECIMAL(10,2), dt DATETIME(3), ts TIMESTAMP(3) NULL, "
         "tm TIME(6), j JSON, v VARBINARY(4), b TINYINT(1), bt BIT(10))"],
        ["INSERT INTO t VALUES (1, 1.5, NOW(), NOW(), '01:00:00', '[]', 'ab', 1, b'1')"],
    )
    for event in (binlog[0], snapshot[0]):
        types = {c.name: c.type for c in event.schema.columns}
        assert types["id"].to_sql() == "DECIMAL(20, 0) NOT NULL"
        assert types["d"].to_sql() == "DECIMAL(10, 2)"
        assert types["dt"].to_sql() == "TIMESTAMP(3)"
        assert types["ts"].to_sql() == "TIMESTAMP_LTZ(3)"
        assert types["tm"].to_sql() == "TIME(6)"
        assert types["j"].root is TypeRoot.STRING
        assert types["v"].root is TypeRoot.BYTES
        assert types["b"].root is TypeRoot.BOOLEAN
        assert types["bt"].to_sql() == "BINARY(2)"
        assert event.schema.primary_key == ("id",)


MATRIX_TABLE = (
    "CREATE TABLE t (id INT PRIMARY KEY,"
    " ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,"
    " i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, bo TINYINT(1), bo1 BOOLEAN, tiu1 TINYINT(1) UNSIGNED,"
    " b1 BIT(1), b10 BIT(10), b64 BIT(64), y YEAR, dbl DOUBLE, fl FLOAT, dec0 DECIMAL(65,30), dz DECIMAL(20,0) UNSIGNED,"
    " e ENUM('x','y,z','w'), st SET('a','b','c'), ch CHAR(5), bn BINARY(4), vb VARBINARY(8),"
    " tx TEXT CHARACTER SET latin1, u16 VARCHAR(10) CHARACTER SET utf16, t2 TIME(2), t4 TIME(4), t0 TIME,"
    " dt0 DATETIME, ts0 TIMESTAMP NULL, d DATE, g GEOMETRY, lt LONGTEXT, tb TINYBLOB)"
)
MATRIX_ROWS = [
    "SET sql_mode=''",
    "SET time_zone='+00:00'",
    "INSERT INTO t VALUES (1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,"
    " -9223372036854775808, 18446744073709551615, 1, 0, 1, b'1', b'1000000001', b'1000000000000000000000000000000000000000000000000000000000000001',"
    " 0, 1.7976931348623157e308, 0.1234567, 12345678901234567890.123456789012345678901234567890, 18446744073709551615,"
    " 'y,z', 'c,a', 'ab  ', 'a\\0', '', CONCAT('café €', _latin1 X'81'), 'h€llo', '-00:00:01.25', '-838:59:58.9999', '00:00:00',"
    " '2024-02-29 23:59:59', '1970-01-01 00:00:01', '2024-02-29', ST_GeomFromText('POINT(1 2)', 4326), 'x', UNHEX('00'))",
    "INSERT INTO t (id, ti, bo, b1, y, e, st, ch, bn, ts0, t2, dbl, fl) VALUES"
    " (2, 127, 5, b'0', 2155, 'x', '', '', '', '0000-00-00 00:00:00', '-12:00:00.5', -0.0, -3.4028235e38)",
    "INSERT INTO t (id) VALUES (3)",
]


def test_type_matrix_identical_in_both_paths(capture, mysql_params):
    binlog, snapshot = capture([MATRIX_TABLE], MATRIX_ROWS)
    binlog, snapshot = _by_id(binlog), _by_id(snapshot)
    assert len(binlog) == len(snapshot) == 3
    for b, s in zip(binlog, snapshot):
        for name in b.after:
            assert b.after[name] == s.after[name], (b.after["id"], name, b.after[name], s.after[name])
            assert type(b.after[name]) is type(s.after[name]), (name, b.after[name], s.after[name])
    assert binlog[0].schema == snapshot[0].schema
    # the checks' reader (read_table) converts exactly as the snapshot path
    table, rows = read_table({k: mysql_params[k] for k in ("host", "port", "user", "password")}, binlog[0].table)
    assert table.schema == snapshot[0].schema
    assert sorted(rows, key=lambda r: r["id"]) == [e.after for e in snapshot]
    row1 = json.loads(json_row(binlog[0].after, binlog[0]))
    assert row1["tiu"] == 255 and row1["siu"] == 65535 and row1["miu"] == 16777215 and row1["iu"] == 4294967295
    assert row1["bi"] == -9223372036854775808 and row1["biu"] == 18446744073709551615
    assert row1["bo"] is True and row1["bo1"] is False and row1["tiu1"] == 1 and row1["b1"] is True
    assert row1["b10"] == "AQI="  # little-endian, as Debezium's BIT converter
    assert row1["y"] == 0 and row1["dbl"] == 1.7976931348623157e308 and row1["fl"] == 0.1234567
    # DECIMAL(p > 38) is STRING in Flink CDC's mapping; the text is exact
    assert row1["dec0"] == "12345678901234567890.123456789012345678901234567890"
    assert binlog[0].after["dz"] == Decimal(18446744073709551615)
    assert row1["e"] == "y,z" and row1["st"] == "a,c" and row1["ch"] == "ab"
    assert row1["bn"] == "YQAAAA==" and row1["vb"] == ""  # BINARY(4) padded with 0x00 as MySQL returns it
    assert row1["tx"] == "café €\x81" and row1["u16"] == "h€llo"
    assert row1["t2"] == "-00:00:01.25" and row1["t4"] == "-838:59:58.9999" and row1["t0"] == "00:00:00"
    assert row1["dt0"] == "2024-02-29 23:59:59" and row1["ts0"] == "1970-01-01 00:00:01Z" and row1["d"] == "2024-02-29"
    assert json.loads(row1["g"]) == {"coordinates": [1.0, 2.0], "type": "Point", "srid": 4326}
    assert row1["tb"] == "AA=="
    # FLT_MAX: the float32 shortest repr (Java's Float.toString gives 3.4028235E38)
    assert repr(binlog[1].after["fl"]) == "-3.4028235e+38"
    row2 = json.loads(json_row({k: v for k, v in binlog[1].after.items() if k != "fl"}, binlog[1]))
    assert row2["bo"] is True and row2["b1"] is False and row2["y"] == 2155 and row2["e"] == "x"
    assert row2["st"] == "" and row2["ch"] == "" and row2["bn"] == "AAAAAA==" and row2["ts0"] is None
    assert row2["t2"] == "-12:00:00.5" and row2["dbl"] == 0.0
    row3 = json.loads(json_row(binlog[2].after, binlog[2]))
    assert all(v is None for k, v in row3.items() if k != "id")


def test_update_and_delete_carry_full_before_and_after(capture):
    binlog, snapshot = capture(
        ["CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n DECIMAL(6,2))"],
        ["INSERT INTO t VALUES (1,'a',1.00),(2,'b',2.00)", "UPDATE t SET v='c', n=3.50 WHERE id=1", "DELETE FROM t WHERE id=2"],
    )
    assert [e.op for e in binlog] == [Op.CREATE, Op.CREATE, Op.UPDATE, Op.DELETE]
    upd, dele = binlog[2], binlog[3]
    assert json_row(upd.before, upd) == '{"id":1,"v":"a","n":1.00}'
    assert json_row(upd.after, upd) == '{"id":1,"v":"c","n":3.50}'
    assert dele.after is None and json_row(dele.before, dele) == '{"id":2,"v":"b","n":2.00}'
    assert [json_row(e.after, e) for e in snapshot] == ['{"id":1,"v":"c","n":3.50}']
