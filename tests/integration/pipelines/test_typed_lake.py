"""With Flink CDC's default options (no schema wrapper) the lake's column types equal MySQL's.

Real MariaDB -> Kafka -> Iceberg: Pipeline 1 writes the bare debezium-json payload plus the schema
fingerprint header (schema in the compacted schema topic); Pipeline 2 resolves it.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from confluent_kafka import Consumer, TopicPartition
import pyarrow as pa

from changelake.changelog import TableId
from changelake.connectors.lake.errors import LakeSchemaEvolutionError
from changelake.connectors.kafka.schemas import SCHEMA_ID_HEADER, SCHEMA_TOPIC_HEADER
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration


def _lake_types(p2, table: TableId) -> dict[str, str]:
    """The lake table's column types as read back through Arrow, in a lake-neutral spelling:
    ``decimal(p,s)``, ``timestamp``, ``timestamptz``, ``date``, ``binary``, ``boolean``,
    ``int32``/``int64``, ``string``."""
    return {f.name: _kind(f.type) for f in read_lake_table(p2, table).schema}


def _kind(t: pa.DataType) -> str:
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamptz" if t.tz is not None else "timestamp"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return f"int{t.bit_width}"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    return str(t)


def _lake_rows(p2, table: TableId) -> list[dict]:
    return read_lake_table(p2, table).to_pylist()


def _first_record(bootstrap: str, topic: str):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "typed-lake-test",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        msg = None
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                return msg
        raise AssertionError(f"no record in {topic}")
    finally:
        consumer.close()


def test_default_options_give_mysql_types_in_the_lake_and_a_flink_payload_in_kafka(
    database_factory, mysql_exec, mysql_params, pipeline_pair, kafka_bootstrap
):
    db = database_factory()
    mysql_exec(
        db,
        "CREATE TABLE orders (order_id BIGINT PRIMARY KEY, customer VARCHAR(64), amount DECIMAL(12,2), "
        "status ENUM('new','paid'), updated_at DATETIME(3), paid_at TIMESTAMP(3) NULL, day DATE, tag BINARY(4), "
        "big BIGINT UNSIGNED, flag TINYINT(1), doc JSON, dur TIME, qty INT, note VARCHAR(8))",
        "INSERT INTO orders VALUES (1,'ann',1234567890.12,'paid','2026-01-01 00:00:10.010','2026-01-01 00:00:10.010',"
        "'2026-01-01',0x01020000,18446744073709551615,1,'{\"a\": 1}','-12:30:00',7,'42')",
    )
    p1, p2 = pipeline_pair(db, ["orders"], primary_keys="order_id")  # no debezium-json.include-schema.enabled
    assert "debezium-json.include-schema.enabled" not in p1.options("sink")
    orders = TableId(db, "orders")
    run_pipeline(p1, until_caught_up=True)

    # Kafka: the payload is what Flink's debezium-json reads by default; the schema rides in headers.
    msg = _first_record(kafka_bootstrap, f"{db}.orders")
    payload = json.loads(msg.value())
    assert set(payload) == {"before", "after", "op", "source"}
    assert payload["after"]["updated_at"] == "2026-01-01 00:00:10.01"
    headers = dict(msg.headers())
    assert len(headers[SCHEMA_ID_HEADER]) == 32 and headers[SCHEMA_TOPIC_HEADER] == b"changelake-schemas"

    stats = run_pipeline(p2, until_caught_up=True)
    assert stats.inferred_schema_tables == []
    check = verify_lake_table(p2, orders, mysql=mysql_params)  # the DuckDB key-state check
    assert check.passed, check.metadata()
    types = _lake_types(p2, orders)
    assert types["amount"] == "decimal(12,2)"
    assert types["updated_at"] == "timestamp"
    assert types["paid_at"] == "timestamptz"
    assert types["day"] == "date"
    assert types["tag"] == "binary"
    assert types["big"] == "decimal(20,0)"
    assert types["flag"] == "boolean"
    assert types["order_id"] == "int64" and types["qty"] == "int32"
    for col in ("customer", "status", "doc", "dur"):
        assert types[col] == "string", col
    row = _lake_rows(p2, orders)[0]
    assert row["amount"] == Decimal("1234567890.12")
    assert row["updated_at"] == dt.datetime(2026, 1, 1, 0, 0, 10, 10_000)
    assert row["paid_at"] == dt.datetime(2026, 1, 1, 0, 0, 10, 10_000, tzinfo=dt.timezone.utc)
    assert row["tag"] == b"\x01\x02\x00\x00"
    assert row["big"] == Decimal(18446744073709551615)
    assert row["flag"] is True and row["status"] == "paid" and row["dur"] == "-12:30:00"

    # Type changes mid-stream evolve the lake table.
    mysql_exec(
        db,
        "ALTER TABLE orders MODIFY amount DECIMAL(14,2), MODIFY qty BIGINT, MODIFY customer VARCHAR(128)",
        "INSERT INTO orders (order_id, customer, amount, qty) VALUES (2, 'bob', 123456789012.34, 9000000000)",
    )
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    types = _lake_types(p2, orders)
    assert types["amount"] == "decimal(14,2)" and types["qty"] == "int64"
    rows = {r["order_id"]: r for r in _lake_rows(p2, orders)}
    assert rows[2]["amount"] == Decimal("123456789012.34") and rows[2]["qty"] == 9_000_000_000

    # An incompatible change is a clear error naming table, column, old and new type.
    mysql_exec(db, "ALTER TABLE orders MODIFY note INT", "INSERT INTO orders (order_id, note) VALUES (3, 5)")
    run_pipeline(p1, until_caught_up=True)
    with pytest.raises(LakeSchemaEvolutionError) as info:
        run_pipeline(p2, until_caught_up=True)
    text = str(info.value).lower()
    assert f"{db}.orders" in text and "'note'" in text and "string" in text and "int" in text
    assert info.value.column == "note"


def test_canal_json_topics_are_typed_by_the_schema_header_too(database_factory, mysql_exec, pipeline_pair):
    db = database_factory()
    mysql_exec(
        db,
        "CREATE TABLE t (id INT PRIMARY KEY, amount DECIMAL(12,2), at DATETIME(3), tag BINARY(2))",
        "INSERT INTO t VALUES (1, 0.10, '2026-01-01 00:00:10.010', 0x0102)",
    )
    p1, p2 = pipeline_pair(db, ["t"], p1_extra={"value.format": "canal-json"})
    del p2.source["debezium-json.distributed-tables"]
    p2.source.update({"value.format": "canal-json", "canal-json.distributed-tables": "true"})
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    types = _lake_types(p2, TableId(db, "t"))
    assert (types["amount"], types["at"], types["tag"]) == ("decimal(12,2)", "timestamp", "binary")
    [row] = _lake_rows(p2, TableId(db, "t"))
    assert row["amount"] == Decimal("0.10") and row["tag"] == b"\x01\x02"
