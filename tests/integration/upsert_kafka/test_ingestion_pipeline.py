"""Pipeline 1 with ``sink: {type: upsert-kafka}`` on real MariaDB and Kafka: MySQL -> keyed topics,
read back through the upsert-kafka SQL source (Flink's upsert-kafka table with a fixed schema)."""

from __future__ import annotations

import random
import time
import uuid
from decimal import Decimal
from typing import Any

import pymysql
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from changelake.changelog import DataChangeEvent, Op, RowKind, TableId
from changelake.connectors.upsert_kafka import create_source, parse_create_table
from changelake.connectors.upsert_kafka.ingestion import MissingPrimaryKeyError, UpsertKafkaIngestionSink
from changelake.connectors.upsert_kafka.partitioner import partition_for
from changelake.pipeline.definition import PipelineDefinition, parse_pipeline
from changelake.pipeline.runner import run_pipeline

pytestmark = pytest.mark.integration

ORDERS_DDL = (
    # primary key (region, id): not the column order, so key order is exercised
    "CREATE TABLE orders (id INT NOT NULL, region VARCHAR(8) NOT NULL, amount DECIMAL(10,2), "
    "note VARCHAR(32) CHARACTER SET utf8mb4, PRIMARY KEY (region, id))"
)


def uid() -> str:
    return uuid.uuid4().hex[:10]


def mysql_exec(params: dict, db: str, *statements: str) -> None:
    conn = pymysql.connect(**params, database=db, autocommit=True, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


def mysql_orders(params: dict, db: str) -> dict[tuple, dict[str, Any]]:
    """MySQL's key state of ``orders``: (region, id) -> row."""
    conn = pymysql.connect(**params, database=db, charset="utf8mb4", cursorclass=pymysql.cursors.DictCursor)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT `id`, `region`, `amount`, `note` FROM `orders`")
            return {(r["region"], r["id"]): dict(r) for r in cur.fetchall()}
    finally:
        conn.close()


def pipeline(mysql_params: dict, kafka_bootstrap: str, db: str, sink: dict | None = None,
             route: list | None = None, transform: list | None = None) -> PipelineDefinition:
    data: dict[str, Any] = {
        "pipeline": {"name": f"upsert-it-{uid()}"},
        "source": {
            "type": "mysql", "hostname": mysql_params["host"], "port": mysql_params["port"],
            "username": mysql_params["user"], "password": mysql_params["password"],
            "tables": f"{db}.\\.*", "server-id": str(random.randint(5800, 5999)),
        },
        "sink": {"type": "upsert-kafka", "name": "Upsert Kafka Sink",
                 "properties.bootstrap.servers": kafka_bootstrap, **(sink or {})},
    }
    if route:
        data["route"] = route
    if transform:
        data["transform"] = transform
    return parse_pipeline(data, env={})


def read_changelog(kafka_bootstrap: str, topic: str) -> list:
    """Every changelog row of ``topic`` from the earliest offset, through the upsert-kafka SQL source."""
    decl = parse_create_table(
        f"""CREATE TABLE orders_upsert (id INT, region STRING, amount DECIMAL(10, 2), note STRING,
              PRIMARY KEY (region, id) NOT ENFORCED)
            WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}',
                  'properties.bootstrap.servers' = '{kafka_bootstrap}',
                  'key.format' = 'json', 'value.format' = 'json', 'scan.bounded.mode' = 'latest-offset')"""
    )
    with create_source(decl) as source:
        return source.read_all(timeout_s=60)


def key_state(rows: list) -> dict[tuple, dict[str, Any]]:
    state: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (r.values["region"], r.values["id"])
        if r.kind is RowKind.DELETE:
            assert key in state, f"-D for an unknown key {key}"
            del state[key]
        else:
            assert (r.kind is RowKind.INSERT) == (key not in state), f"{r} for key {key} (known: {key in state})"
            state[key] = dict(r.values)
    return state


def kinds_per_key(rows: list) -> dict[tuple, list[str]]:
    out: dict[tuple, list[str]] = {}
    for r in rows:
        out.setdefault((r.values["region"], r.values["id"]), []).append(str(r.kind))
    return out


def raw_records(kafka_bootstrap: str, topic: str, isolation: str = "read_committed", timeout_s: float = 30.0) -> list:
    """Every record of ``topic`` (all partitions) to the end, as confluent-kafka messages."""
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"raw-{uid()}", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": isolation})
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        out, eof, deadline = [], set(), time.monotonic() + timeout_s
        while len(eof) < len(parts) and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise AssertionError(m.error())
                out.append(m)
        assert len(eof) == len(parts), "did not reach the end of the topic"
        return out
    finally:
        c.close()


def test_snapshot_then_binlog_give_mysql_key_state_and_upsert_changelog(mysql_params, kafka_bootstrap, database_factory):
    db = database_factory()
    mysql_exec(mysql_params, db, ORDERS_DDL,
               "INSERT INTO orders VALUES (1,'eu',12.30,'a😀b'),(2,'us',-0.50,NULL),(3,'apac',7.00,'x')")
    defn = pipeline(mysql_params, kafka_bootstrap, db, sink={"sink.topic.partitions": 3})
    topic = f"{db}.orders"

    first = run_pipeline(defn, until_caught_up=True)
    assert first.events == 3 and first.stopped_because == "caught-up"
    rows = read_changelog(kafka_bootstrap, topic)
    assert [str(r.kind) for r in rows] == ["+I"] * 3
    assert key_state(rows) == mysql_orders(mysql_params, db)

    mysql_exec(
        mysql_params, db,
        "UPDATE orders SET amount=99.99 WHERE region='eu' AND id=1",  # in place -> +U
        "UPDATE orders SET region='sa' WHERE region='us' AND id=2",   # key change -> -D old, +I new
        "DELETE FROM orders WHERE region='apac' AND id=3",            # tombstone -> -D
        "INSERT INTO orders VALUES (4,'eu',1.25,'new')",
    )
    second = run_pipeline(defn, until_caught_up=True)
    assert second.events == 4, second

    rows = read_changelog(kafka_bootstrap, topic)
    want = mysql_orders(mysql_params, db)
    assert key_state(rows) == want
    assert want[("eu", 1)]["amount"] == Decimal("99.99") and want[("eu", 1)]["note"] == "a😀b"
    assert kinds_per_key(rows) == {
        ("eu", 1): ["+I", "+U"],
        ("us", 2): ["+I", "-D"],
        ("sa", 2): ["+I"],
        ("apac", 3): ["+I", "-D"],
        ("eu", 4): ["+I"],
    }
    deleted = [r for r in rows if r.kind is RowKind.DELETE]
    assert {(r.values["region"], r.values["id"], r.values["note"]) for r in deleted} == {("us", 2, None), ("apac", 3, "x")}

    # The raw records: PK-ordered JSON keys, full rows in values, tombstones, murmur2 partitions.
    records = raw_records(kafka_bootstrap, topic)
    assert len(records) == 3 + 1 + 2 + 1 + 1  # snapshot, +U, tombstone+value, tombstone, insert
    assert sum(m.value() is None for m in records) == 2
    for m in records:
        assert m.partition() == partition_for(m.key(), 3)
    assert b'{"region":"sa","id":2}' in {m.key() for m in records}
    assert {m.value() for m in records if m.key() == b'{"region":"eu","id":4}'} == {
        '{"id":4,"region":"eu","amount":1.25,"note":"new"}'.encode()
    }

    # Topics the sink creates are compacted.
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    (config,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    assert config.result(timeout=30)["cleanup.policy"].value == "compact"


def test_route_sink_table_names_the_topic_and_headers_name_the_table(mysql_params, kafka_bootstrap, database_factory):
    db = database_factory()
    mysql_exec(mysql_params, db, ORDERS_DDL, "INSERT INTO orders VALUES (1,'eu',1.00,NULL)")
    routed = f"orders-upsert-{uid()}"
    defn = pipeline(mysql_params, kafka_bootstrap, db, sink={"sink.add-tableId-to-header-enabled": True},
                    route=[{"source-table": f"{db}.orders", "sink-table": routed}])
    run_pipeline(defn, until_caught_up=True)
    mysql_exec(mysql_params, db, "DELETE FROM orders")
    run_pipeline(defn, until_caught_up=True)

    records = raw_records(kafka_bootstrap, routed)
    assert [(m.key(), m.value() is None) for m in records] == [(b'{"region":"eu","id":1}', False),
                                                               (b'{"region":"eu","id":1}', True)]
    for m in records:  # the routed TableId (no database part), on tombstones too
        assert m.headers() == [("namespace", b""), ("schemaName", b""), ("tableName", routed.encode())]
    assert not AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics.get(f"{db}.orders")
    assert key_state(read_changelog(kafka_bootstrap, routed)) == {}


def test_headers_absent_by_default(mysql_params, kafka_bootstrap, database_factory):
    db = database_factory()
    mysql_exec(mysql_params, db, ORDERS_DDL, "INSERT INTO orders VALUES (1,'eu',1.00,NULL)")
    run_pipeline(pipeline(mysql_params, kafka_bootstrap, db), until_caught_up=True)
    (m,) = raw_records(kafka_bootstrap, f"{db}.orders")
    assert not m.headers()


def test_exactly_once_runs_twice_and_an_aborted_batch_is_never_seen(mysql_params, kafka_bootstrap, database_factory):
    db = database_factory()
    mysql_exec(mysql_params, db, ORDERS_DDL, "INSERT INTO orders VALUES (1,'eu',1.00,NULL),(2,'us',2.00,NULL)")
    defn = pipeline(mysql_params, kafka_bootstrap, db, sink={"sink.delivery-guarantee": "exactly-once"})
    topic = f"{db}.orders"

    assert run_pipeline(defn, until_caught_up=True).events == 2
    assert run_pipeline(defn, until_caught_up=True).events == 0  # resumes at the stored position

    # A crashed writer of the same pipeline: its records sit in an open transaction that never commits;
    # the next run's init_transactions() fences it and aborts that transaction.
    crashed = UpsertKafkaIngestionSink(defn.options("sink"), pipeline_name=defn.name)
    crashed.open()
    ghost_key = b'{"region":"xx","id":9}'
    crashed.write([DataChangeEvent(TableId(db, "orders"), Op.CREATE, None,
                                   {"id": 9, "region": "xx", "amount": None, "note": None}, _orders_schema())])
    deadline = time.monotonic() + 30
    while ghost_key not in {m.key() for m in raw_records(kafka_bootstrap, topic, "read_uncommitted")}:
        assert time.monotonic() < deadline, "the uncommitted record never reached the log"
        time.sleep(0.2)

    mysql_exec(mysql_params, db, "UPDATE orders SET amount=5.00 WHERE id=1", "DELETE FROM orders WHERE id=2")
    assert run_pipeline(defn, until_caught_up=True).events == 2
    assert run_pipeline(defn, until_caught_up=True).events == 0
    crashed.close()  # fenced: the abort fails and is only logged

    committed = raw_records(kafka_bootstrap, topic, "read_committed")
    assert [(m.key(), m.value() is None) for m in committed] == [
        (b'{"region":"eu","id":1}', False),  # snapshot
        (b'{"region":"us","id":2}', False),  # snapshot
        (b'{"region":"eu","id":1}', False),  # update
        (b'{"region":"us","id":2}', True),  # delete
    ]
    rows = read_changelog(kafka_bootstrap, topic)
    assert key_state(rows) == mysql_orders(mysql_params, db)
    assert kinds_per_key(rows) == {("eu", 1): ["+I", "+U"], ("us", 2): ["+I", "-D"]}


def _orders_schema():
    return parse_create_table(
        "CREATE TABLE o (id INT, region STRING, amount DECIMAL(10, 2), note STRING, PRIMARY KEY (region, id) "
        "NOT ENFORCED) WITH ('connector' = 'upsert-kafka')"
    ).schema


def test_table_without_primary_key_is_refused_unless_a_transform_declares_one(mysql_params, kafka_bootstrap,
                                                                              database_factory):
    db = database_factory()
    mysql_exec(mysql_params, db, "CREATE TABLE notes (id INT NOT NULL, note VARCHAR(16))",
               "INSERT INTO notes VALUES (1,'a'),(2,'b')")
    with pytest.raises(MissingPrimaryKeyError) as err:
        run_pipeline(pipeline(mysql_params, kafka_bootstrap, db), until_caught_up=True)
    assert f"{db}.notes" in str(err.value) and "'primary-keys'" in str(err.value)

    defn = pipeline(mysql_params, kafka_bootstrap, db,
                    transform=[{"source-table": f"{db}.notes", "projection": "\\*", "primary-keys": "id"}])
    assert run_pipeline(defn, until_caught_up=True).events == 2
    assert sorted(m.key() for m in raw_records(kafka_bootstrap, f"{db}.notes")) == [b'{"id":1}', b'{"id":2}']
