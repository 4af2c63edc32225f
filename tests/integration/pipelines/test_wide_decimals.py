"""DECIMAL values past Python's default 28-digit decimal context, end to end.

A DECIMAL(38, 10) with 38 digits, a DECIMAL(38, 0) near its limit and a DECIMAL(65, 30) (a STRING
in the lake, as Flink CDC maps DECIMAL(p > 38)) go through the snapshot and the binlog, through
each of Pipeline 1's value formats, into both lakes, and through the direct MySQL -> lake pipeline.
Python's ``decimal`` rounds or signals at 28 digits under the thread's context; before the column
contexts of ``changelake.changelog.decimals`` this stopped Pipeline 1 with an EncodeError
(InvalidOperation) at the first such value.
"""

from __future__ import annotations

from decimal import Decimal

import pymysql
import pytest

from changelake.changelog import TableId
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration

DDL = "CREATE TABLE t (id INT PRIMARY KEY, d38 DECIMAL(38,10), i38 DECIMAL(38,0), d65 DECIMAL(65,30))"
SNAPSHOT_ROWS = (
    "INSERT INTO t VALUES "
    "(1, 1234567890123456789012345678.1234567891, 99999999999999999999999999999999999999, "
    "12345678901234567890123456789012345.123456789012345678901234567891), "
    "(2, -9999999999999999999999999999.9999999999, -12345678901234567890123456789012345678, "
    "-0.000000000000000000000000000001), "
    "(3, 0.0000000001, 0, 0)"
)
BINLOG_CHANGES = (
    "INSERT INTO t VALUES (4, 8765432109876543210987654321.0987654321, "
    "10000000000000000000000000000000000001, 99999999999999999999999999999999999.999999999999999999999999999999)",
    "UPDATE t SET d38 = d38 - 0.0000000001, i38 = i38 - 1 WHERE id = 1",
    "UPDATE t SET d65 = '-77777777777777777777777777777777777.777777777777777777777777777777' WHERE id = 3",
    "DELETE FROM t WHERE id = 2",
)


def _mysql_rows(mysql_params: dict, db: str) -> dict[int, tuple]:
    conn = pymysql.connect(**mysql_params, database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, d38, i38, CAST(d65 AS CHAR) FROM t ORDER BY id")
            return {r[0]: tuple(r[1:]) for r in cur.fetchall()}
    finally:
        conn.close()


def _assert_lake_equals_mysql(p2, db: str, mysql_params: dict) -> None:
    lake = {r["id"]: (r["d38"], r["i38"], r["d65"]) for r in read_lake_table(p2, TableId(db, "t")).to_pylist()}
    mysql = _mysql_rows(mysql_params, db)
    assert lake.keys() == mysql.keys()
    for k, (d38, i38, d65) in mysql.items():
        assert lake[k][0] == d38 and lake[k][1] == i38, (k, lake[k], (d38, i38))
        assert isinstance(lake[k][0], Decimal) and isinstance(lake[k][1], Decimal)
        assert Decimal(lake[k][2]) == Decimal(d65), (k, lake[k][2], d65)  # DECIMAL(65, 30) as text
    result = verify_lake_table(p2, TableId(db, "t"), mysql=mysql_params)
    assert result.passed, result.metadata()


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json", "json"])
def test_wide_decimals_through_snapshot_binlog_each_format_and_lake_are_exact(
        database_factory, mysql_exec, mysql_params, pipeline_pair, lake, fmt):
    db = database_factory()
    mysql_exec(db, DDL, SNAPSHOT_ROWS)
    p1, p2 = pipeline_pair(db, ["t"], p1_extra={"value.format": fmt} if fmt != "debezium-json" else None)
    if fmt != "debezium-json":
        del p2.source["debezium-json.distributed-tables"]
        p2.source.update({"value.format": fmt, f"{fmt}.distributed-tables": "true"})

    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    _assert_lake_equals_mysql(p2, db, mysql_params)

    mysql_exec(db, *BINLOG_CHANGES)
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    _assert_lake_equals_mysql(p2, db, mysql_params)


def test_wide_decimals_through_the_direct_pipeline_are_exact(
        database_factory, mysql_exec, mysql_params, direct_pipeline):
    db = database_factory()
    mysql_exec(db, DDL, SNAPSHOT_ROWS)
    p = direct_pipeline(db)
    run_pipeline(p, until_caught_up=True)
    _assert_lake_equals_mysql(p, db, mysql_params)
    mysql_exec(db, *BINLOG_CHANGES)
    run_pipeline(p, until_caught_up=True)
    _assert_lake_equals_mysql(p, db, mysql_params)
