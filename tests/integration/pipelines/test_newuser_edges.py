"""A Debezium user's first edge cases, on real MariaDB -> Kafka -> lake (and MySQL -> lake).

Types at their edges (BIT(64), YEAR, negative TIME(6), zero dates, ENUM/SET, JSON with big
numbers, DOUBLE -0.0, FLOAT), keys that are not a plain INT (utf8mb4 emoji, a VARBINARY part of a
composite key, a 768-character VARCHAR), DDL between the snapshot and the binlog and a transaction
touching two tables. Each case compares the lake with MySQL: the DuckDB key-state check
(``verify_lake_table``) and the exact values (``read_lake_table``) against what the server itself
returns for the same rows.
"""

from __future__ import annotations

import pymysql
import pytest

from changelake.changelog import TableId
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration


def _mysql_rows(mysql_params: dict, db: str, sql: str) -> list[tuple]:
    conn = pymysql.connect(**mysql_params, database=db, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def _run_both(p1, p2) -> None:
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)


EDGE_DDL = (
    "CREATE TABLE t (id INT PRIMARY KEY, b64 BIT(64), b1 BIT(1), y YEAR, t6 TIME(6), "
    "e ENUM('a','b',''), s SET('x','y','z'), j JSON, d DOUBLE, f FLOAT, "
    "dt DATETIME, dd DATE) CHARACTER SET utf8mb4"
)
EDGE_ROWS = (
    "INSERT INTO t VALUES "
    "(1, b'1111111111111111111111111111111111111111111111111111111111111111', b'1', 2155, "
    "'-838:59:59.000000', 'a', 'x,z', '{\"big\": 18446744073709551615, \"neg\": -9223372036854775808, \"f\": 0.1}', "
    "-0.0, 3.14159, '9999-12-31 23:59:59', '1000-01-01'), "
    "(2, b'0', b'0', 1901, '-00:00:00.500000', '', '', '[12345678901234567890]', 1.7976931348623157e308, "
    "-3.4e38, '1970-01-01 00:00:00', '1970-01-01'), "
    "(3, NULL, NULL, 0, '838:59:59.000000', NULL, 'x,y,z', 'null', 5e-324, 1.17549435e-38, NULL, NULL)"
)
EDGE_BINLOG = (
    "INSERT INTO t SELECT id + 10, b64, b1, y, t6, e, s, j, d, f, dt, dd FROM t",
    "UPDATE t SET t6 = '-00:00:01.000001', j = '{\"x\": 99999999999999999999}' WHERE id = 11",
)
EDGE_SELECT = ("SELECT id, CAST(b64 AS UNSIGNED), CAST(b1 AS UNSIGNED), y, CAST(t6 AS CHAR), e, s, "
               "CAST(j AS CHAR), d, f + 0e0, dt, dd FROM t ORDER BY id")  # f + 0e0: the stored float32, not its 6-digit print


def _assert_edges(p, db: str, mysql_params: dict) -> None:
    lake = {r["id"]: r for r in read_lake_table(p, TableId(db, "t")).to_pylist()}
    mysql = _mysql_rows(mysql_params, db, EDGE_SELECT)
    assert sorted(lake) == [r[0] for r in mysql]
    problems = []
    for r in mysql:
        got = lake[r[0]]
        for name, want in zip(("b64", "b1", "y", "t6", "e", "s", "j", "d", "f", "dt", "dd"), r[1:]):
            have = got[name]
            if name in ("b64", "b1") and isinstance(have, (bytes, bytearray)):
                have = int.from_bytes(have, "big")
            if name == "b1" and isinstance(have, bool):
                have = int(have)
            if name == "j" and want is not None:
                import json
                ok = json.loads(have) == json.loads(want) if have is not None else False
                if not ok:
                    problems.append((r[0], name, want, have))
                continue
            if name == "d" and want is not None and have is not None:
                import math
                if have != want or math.copysign(1, have) != math.copysign(1, want):
                    problems.append((r[0], name, want, have))
                continue
            if name == "t6" and want is not None and have is not None:
                # MySQL prints TIME(6) as [-]HHH:MM:SS.ffffff; compare numerically
                if _time_us(str(have)) != _time_us(want):
                    problems.append((r[0], name, want, have))
                continue
            if hasattr(have, "tzinfo") and getattr(have, "tzinfo", None) is not None:
                have = have.replace(tzinfo=None)
            if have != want and str(have) != str(want):
                problems.append((r[0], name, want, have))
    assert not problems, problems
    result = verify_lake_table(p, TableId(db, "t"), mysql=mysql_params)
    assert result.passed, result.metadata()


def _time_us(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("-")
    hms, _, frac = text.partition(".")
    h, m, s = (int(x) for x in hms.split(":"))
    return sign * (((h * 60 + m) * 60 + s) * 1_000_000 + int((frac + "000000")[:6]))


def test_edge_types_through_kafka(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(db, EDGE_DDL, EDGE_ROWS)
    p1, p2 = pipeline_pair(db, ["t"])
    _run_both(p1, p2)
    _assert_edges(p2, db, mysql_params)
    mysql_exec(db, *EDGE_BINLOG)
    _run_both(p1, p2)
    _assert_edges(p2, db, mysql_params)


def test_edge_types_direct(database_factory, mysql_exec, mysql_params, direct_pipeline):
    db = database_factory()
    mysql_exec(db, EDGE_DDL, EDGE_ROWS)
    p = direct_pipeline(db)
    run_pipeline(p, until_caught_up=True)
    _assert_edges(p, db, mysql_params)
    mysql_exec(db, *EDGE_BINLOG)
    run_pipeline(p, until_caught_up=True)
    _assert_edges(p, db, mysql_params)


# -- keys that are not a plain INT ----------------------------------------------------------------

KEY_DDL = (
    "CREATE TABLE k (name VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, tag VARBINARY(16), "
    "v INT, PRIMARY KEY (name, tag)) CHARACTER SET utf8mb4",
    "CREATE TABLE lk (k VARCHAR(768) CHARACTER SET utf8mb4 PRIMARY KEY, v INT) CHARACTER SET utf8mb4",
)
KEY_ROWS = (
    "INSERT INTO k VALUES ('\U0001F600', 0x00, 1), ('\U0001F600', 0x0000, 2), ('\U0001F600', 0xFF00FF, 3), "
    "('a\U0001F468\u200D\U0001F469', '', 4), ('\u00e9', 0x80, 5)",
    "INSERT INTO lk VALUES (REPEAT('\U0001F600', 768), 1), (CONCAT(REPEAT('x', 767), 'y'), 2), ('', 3)",
)
KEY_BINLOG = (
    "UPDATE k SET v = v + 100 WHERE tag = 0x0000",
    "DELETE FROM k WHERE tag = 0x00",
    "INSERT INTO k VALUES ('\U0001F600', 0x00000000, 6)",
    "UPDATE k SET tag = 0x01 WHERE tag = 0xFF00FF",
    "UPDATE lk SET v = 20 WHERE k = CONCAT(REPEAT('x', 767), 'y')",
    "DELETE FROM lk WHERE k = REPEAT('\U0001F600', 768)",
    "INSERT INTO lk VALUES (REPEAT('\U0001F601', 768), 4)",
)


def _assert_keys(p, db: str, mysql_params: dict) -> None:
    lake_k = {(r["name"], r["tag"]): r["v"] for r in read_lake_table(p, TableId(db, "k")).to_pylist()}
    mysql_k = {(n, bytes(t)): v for n, t, v in _mysql_rows(mysql_params, db, "SELECT name, tag, v FROM k")}
    assert lake_k == mysql_k
    lake_lk = {r["k"]: r["v"] for r in read_lake_table(p, TableId(db, "lk")).to_pylist()}
    mysql_lk = dict(_mysql_rows(mysql_params, db, "SELECT k, v FROM lk"))
    assert lake_lk == mysql_lk
    for t in ("k", "lk"):
        result = verify_lake_table(p, TableId(db, t), mysql=mysql_params)
        assert result.passed, (t, result.metadata())


def test_unusual_keys_through_kafka(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(db, *KEY_DDL, *KEY_ROWS)
    p1, p2 = pipeline_pair(db, ["k", "lk"])
    p2.transform[:] = [{"source-table": f"{db}.k", "projection": "\\*", "primary-keys": "name,tag"},
                       {"source-table": f"{db}.lk", "projection": "\\*", "primary-keys": "k"}]
    _run_both(p1, p2)
    _assert_keys(p2, db, mysql_params)
    mysql_exec(db, *KEY_BINLOG)
    _run_both(p1, p2)
    _assert_keys(p2, db, mysql_params)


def test_unusual_keys_direct(database_factory, mysql_exec, mysql_params, direct_pipeline):
    db = database_factory()
    mysql_exec(db, *KEY_DDL, *KEY_ROWS)
    p = direct_pipeline(db)
    run_pipeline(p, until_caught_up=True)
    _assert_keys(p, db, mysql_params)
    mysql_exec(db, *KEY_BINLOG)
    run_pipeline(p, until_caught_up=True)
    _assert_keys(p, db, mysql_params)


# -- zero dates (sql_mode without NO_ZERO_DATE / NO_ZERO_IN_DATE) ---------------------------------

ZERO_DDL = "CREATE TABLE z (id INT PRIMARY KEY, dt DATETIME, ts TIMESTAMP NULL, d DATE, dtn DATETIME NOT NULL)"
ZERO_ROWS = (
    "SET SESSION sql_mode = ''",
    "INSERT INTO z VALUES (1, '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00', '0000-00-00 00:00:00'), "
    "(2, '2026-00-15 10:00:00', NULL, '2026-02-00', '2026-01-01 00:00:00'), (3, NULL, NULL, NULL, '1000-01-01 00:00:00')",
)
ZERO_BINLOG = (
    "SET SESSION sql_mode = ''",
    "INSERT INTO z VALUES (4, '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00', '0000-00-00 00:00:00')",
    "UPDATE z SET d = '0000-00-00' WHERE id = 3",
)


def _assert_zero_dates(p, db: str, mysql_params: dict) -> None:
    lake = {r["id"]: r for r in read_lake_table(p, TableId(db, "z")).to_pylist()}
    mysql = _mysql_rows(mysql_params, db, "SELECT id, CAST(dt AS CHAR), CAST(ts AS CHAR), CAST(d AS CHAR), "
                                          "CAST(dtn AS CHAR) FROM z ORDER BY id")
    assert sorted(lake) == [r[0] for r in mysql]
    for r in mysql:
        for name, want in zip(("dt", "ts", "d", "dtn"), r[1:]):
            have = lake[r[0]][name]
            if want is None or want.startswith("0000-00-00") or "-00" in want[:10]:
                # Debezium's rule: a zero (or partly zero) date is NULL, in a NOT NULL column too
                assert have is None, (r[0], name, want, have)
            else:
                text = str(have.replace(tzinfo=None) if hasattr(have, "tzinfo") else have)
                assert text == want, (r[0], name, want, have)
    result = verify_lake_table(p, TableId(db, "z"), mysql=mysql_params)
    assert result.passed, result.metadata()


def test_zero_dates_through_kafka(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(db, ZERO_DDL, *ZERO_ROWS)
    p1, p2 = pipeline_pair(db, ["z"])
    _run_both(p1, p2)
    _assert_zero_dates(p2, db, mysql_params)
    mysql_exec(db, *ZERO_BINLOG)
    _run_both(p1, p2)
    _assert_zero_dates(p2, db, mysql_params)


def test_zero_dates_direct(database_factory, mysql_exec, mysql_params, direct_pipeline):
    db = database_factory()
    mysql_exec(db, ZERO_DDL, *ZERO_ROWS)
    p = direct_pipeline(db)
    run_pipeline(p, until_caught_up=True)
    _assert_zero_dates(p, db, mysql_params)
    mysql_exec(db, *ZERO_BINLOG)
    run_pipeline(p, until_caught_up=True)
    _assert_zero_dates(p, db, mysql_params)


# -- DDL between the snapshot and the binlog ------------------------------------------------------

DDL_DDL = ("CREATE TABLE c (id INT PRIMARY KEY, a VARCHAR(10), n INT, m DECIMAL(5,2), f FLOAT, "
           "e ENUM('p','q'), z INT)")
DDL_ROWS = ("INSERT INTO c VALUES (1, 'one', 1, 1.25, 1.5, 'p', 10), (2, 'two', 2, -999.99, -2.5, 'q', 20)",)
DDL_CHANGES = (
    "ALTER TABLE c ADD COLUMN first_col VARCHAR(8) NOT NULL DEFAULT 'F' FIRST",
    "ALTER TABLE c ADD COLUMN mid BIT(8) DEFAULT b'101' AFTER a, ADD COLUMN en ENUM('x','y') NOT NULL DEFAULT 'y' AFTER id",
    "ALTER TABLE c DROP COLUMN z",
    "ALTER TABLE c MODIFY n BIGINT, MODIFY a VARCHAR(200), MODIFY f DOUBLE, MODIFY e ENUM('p','q','r')",
    "INSERT INTO c (id, first_col, a, mid, en, n, m, f, e) VALUES (3, 'G', REPEAT('a', 200), b'11', 'x', "
    "9000000000, 12.5, 0.1, 'r')",
    "UPDATE c SET a = 'uno', n = -9000000000 WHERE id = 1",
    "ALTER TABLE c RENAME COLUMN m TO money",
    "UPDATE c SET money = 3.14 WHERE id = 2",
    "INSERT INTO c (id, a) VALUES (4, 'four')",
)
DDL_SELECT = "SELECT id, first_col, en, a, CAST(mid AS UNSIGNED), n, money, f, e FROM c ORDER BY id"


def _assert_ddl(p, db: str, mysql_params: dict) -> None:
    lake = {r["id"]: r for r in read_lake_table(p, TableId(db, "c")).to_pylist()}
    mysql = _mysql_rows(mysql_params, db, DDL_SELECT)
    assert sorted(lake) == [r[0] for r in mysql]
    problems = []
    for r in mysql:
        for name, want in zip(("first_col", "en", "a", "mid", "n", "money", "f", "e"), r[1:]):
            have = lake[r[0]].get(name, "<absent>")
            if name == "mid" and isinstance(have, (bytes, bytearray)):
                have = int.from_bytes(have, "big")
            if have != want:
                problems.append((r[0], name, want, have))
    assert not problems, problems
    result = verify_lake_table(p, TableId(db, "c"), mysql=mysql_params)
    assert result.passed, result.metadata()


def test_ddl_after_the_snapshot_through_kafka(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(db, DDL_DDL, *DDL_ROWS)
    p1, p2 = pipeline_pair(db, ["c"])
    _run_both(p1, p2)
    mysql_exec(db, *DDL_CHANGES)
    _run_both(p1, p2)
    _assert_ddl(p2, db, mysql_params)


def test_ddl_after_the_snapshot_read_before_pipeline_2_ran(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(db, DDL_DDL, *DDL_ROWS)
    p1, p2 = pipeline_pair(db, ["c"])
    run_pipeline(p1, until_caught_up=True)
    mysql_exec(db, *DDL_CHANGES)
    _run_both(p1, p2)
    _assert_ddl(p2, db, mysql_params)


def test_ddl_after_the_snapshot_direct(database_factory, mysql_exec, mysql_params, direct_pipeline):
    db = database_factory()
    mysql_exec(db, DDL_DDL, *DDL_ROWS)
    p = direct_pipeline(db)
    run_pipeline(p, until_caught_up=True)
    mysql_exec(db, *DDL_CHANGES)
    run_pipeline(p, until_caught_up=True)
    _assert_ddl(p, db, mysql_params)
