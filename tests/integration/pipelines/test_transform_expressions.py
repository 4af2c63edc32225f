"""Flink CDC transform expressions end to end on real MariaDB -> Kafka -> the lake (both lakes).

The lake's computed columns must equal MariaDB's own evaluation of the same expressions (a SELECT
with the MySQL spelling of each: ``CAST(x AS CHAR)`` for Flink's ``CAST(x AS VARCHAR)``,
``LIKE BINARY`` for Flink's case-sensitive ``LIKE``, ``DATABASE()`` for ``__schema_name__``),
across the snapshot and the binlog (an update leaving the filter becomes a delete in the lake).
"""

from __future__ import annotations

from decimal import Decimal

import pymysql
import pytest

from changelake.changelog import TableId
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table

pytestmark = pytest.mark.integration

PROJECTION = (
    "id, UPPER(name) AS name_upper, price * qty AS total, CAST(id AS VARCHAR) AS id_text, "
    "CONCAT(TRIM(name), '-', CAST(qty AS VARCHAR)) AS label, CHAR_LENGTH(name) AS name_len, "
    "SUBSTR(name, 2, 3) AS mid, CASE WHEN qty >= 10 THEN 'bulk' ELSE 'single' END AS size, "
    "ROUND(price, 1) AS price_1, COALESCE(note, 'none') AS note_or, __schema_name__ AS src_db, "
    "__table_name__ AS src_table"
)
FILTER = "qty >= 10 OR name LIKE 'a%'"
MYSQL_SELECT = (
    "SELECT id, UPPER(name) AS name_upper, price * qty AS total, CAST(id AS CHAR) AS id_text, "
    "CONCAT(TRIM(name), '-', CAST(qty AS CHAR)) AS label, CHAR_LENGTH(name) AS name_len, "
    "SUBSTR(name, 2, 3) AS mid, CASE WHEN qty >= 10 THEN 'bulk' ELSE 'single' END AS size, "
    "ROUND(price, 1) AS price_1, COALESCE(note, 'none') AS note_or, DATABASE() AS src_db, "
    "'orders' AS src_table FROM orders WHERE qty >= 10 OR name LIKE BINARY 'a%' ORDER BY id"
)


def _mysql_rows(mysql_params, db: str) -> list[dict]:
    conn = pymysql.connect(**mysql_params, database=db, charset="utf8mb4", cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute(MYSQL_SELECT)
            return [_norm(r) for r in cur.fetchall()]
    finally:
        conn.close()


def _norm(row: dict) -> dict:
    return {k: (int(v) if k == "name_len" and v is not None else v) for k, v in row.items()}


def _lake_rows(p2, table: TableId) -> list[dict]:
    rows = read_lake_table(p2, table).to_pylist()
    return sorted((_norm(r) for r in rows), key=lambda r: r["id"])


def test_computed_columns_cast_string_functions_metadata_and_or_filter_equal_mysql(
    database_factory, mysql_exec, mysql_params, pipeline_pair
):
    db = database_factory()
    mysql_exec(
        db,
        "CREATE TABLE orders (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL, price DECIMAL(10,2) NOT NULL, "
        "qty INT NOT NULL, note VARCHAR(20) NULL)",
        "INSERT INTO orders VALUES (1,'alice',12.35,3,NULL),(2,'bob',1.25,10,'rush'),(3,'Alice',2.50,1,NULL),"
        "(4,' anna ',0.05,2,'x'),(5,'carl',99.99,12,NULL),(6,'dave',3.00,1,'no')",
    )
    p1, p2 = pipeline_pair(db, ["orders"], name=f"tx-{db}")
    raw = p2.transform[0]
    assert raw["source-table"] == "\\.*.\\.*"
    p2 = parse_pipeline(
        {"pipeline": dict(p2.pipeline), "source": dict(p2.source), "sink": dict(p2.sink),
         "transform": [{"source-table": "\\.*.\\.*", "projection": PROJECTION, "filter": FILTER,
                        "primary-keys": "id"}]},
        env={},
    )
    orders = TableId(db, "orders")

    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    expected = _mysql_rows(mysql_params, db)
    assert [r["id"] for r in expected] == [1, 2, 5]  # 'Alice' and ' anna ' fail the case-sensitive LIKE
    assert _lake_rows(p2, orders) == expected

    # The lake gets the computed columns typed as Flink CDC types them.
    schema = read_lake_table(p2, orders).schema
    assert str(schema.field("total").type) == "decimal128(19, 2)"  # DECIMAL(10,2) * INT, capped at UP_TO_19
    assert str(schema.field("price_1").type) == "decimal128(10, 1)"
    assert str(schema.field("name_len").type) == "int32"
    assert "string" in str(schema.field("id_text").type)

    # Binlog: into and out of the filter, a delete, an insert.
    mysql_exec(
        db,
        "UPDATE orders SET qty = 20 WHERE id = 6",  # dave enters (qty >= 10)
        "UPDATE orders SET qty = 1 WHERE id = 2",  # bob leaves: a delete in the lake
        "UPDATE orders SET name = 'amber', price = 7.77 WHERE id = 3",  # enters by the LIKE
        "DELETE FROM orders WHERE id = 5",
        "INSERT INTO orders VALUES (7,'al',0.99,11,'new')",
    )
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    expected = _mysql_rows(mysql_params, db)
    assert [r["id"] for r in expected] == [1, 3, 6, 7]
    lake = _lake_rows(p2, orders)
    assert lake == expected
    assert lake[0]["total"] == Decimal("37.05") and lake[0]["src_db"] == db and lake[0]["src_table"] == "orders"


def test_the_same_transform_on_a_direct_mysql_to_lake_pipeline(database_factory, mysql_exec, mysql_params, direct_pipeline):
    """The class, not the instance: the stage is the same for every source -> sink pair."""
    db = database_factory()
    mysql_exec(
        db,
        "CREATE TABLE orders (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL, price DECIMAL(10,2) NOT NULL, "
        "qty INT NOT NULL, note VARCHAR(20) NULL)",
        "INSERT INTO orders VALUES (1,'alice',12.35,3,NULL),(2,'bob',1.25,10,'rush'),(3,'Alice',2.50,1,NULL)",
    )
    base = direct_pipeline(db)
    defn = parse_pipeline(
        {"pipeline": dict(base.pipeline), "source": dict(base.source), "sink": dict(base.sink),
         "transform": [{"source-table": "\\.*.\\.*", "projection": PROJECTION, "filter": FILTER, "primary-keys": "id"}]},
        env={},
    )
    run_pipeline(defn, until_caught_up=True)
    mysql_exec(db, "UPDATE orders SET qty = 0 WHERE id = 2", "INSERT INTO orders VALUES (4,'ann',3.33,2,NULL)")
    run_pipeline(defn, until_caught_up=True)
    expected = _mysql_rows(mysql_params, db)
    assert [r["id"] for r in expected] == [1, 4]
    assert _lake_rows(defn, TableId(db, "orders")) == expected
