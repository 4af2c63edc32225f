"""The columnar lane (Kafka -> lake in Arrow) gives the lake the per-record path gives it.

Real Kafka and Iceberg / Paimon. Records are written as Pipeline 1 writes them (bare debezium-json
payload, schema fingerprint headers, the schema in a schema topic), so Pipeline 2 takes the
columnar lane; each scenario also runs with ``pipeline.columnar.enabled: false`` (record by record)
into another lake, and the two lakes must hold the same rows with the same Arrow types.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from changelake.changelog import DataChangeEvent, Op, Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.kafka.dead_letter import DLQ_HEADERS
from changelake.connectors.kafka.schemas import (
    SCHEMA_ID_HEADER,
    SCHEMA_TOPIC_HEADER,
    encode_schema_record,
    schema_fingerprint,
)
from changelake.formats import create_format
from changelake.formats.errors import DecodeError
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table
from lake_blocks import lake_sink  # beside this file (pytest puts it on sys.path)

pytestmark = pytest.mark.integration

TABLE = TableId("shop", "orders")
COLUMNS = [
    ("id", "BIGINT NOT NULL"),
    ("qty", "SMALLINT"),
    ("name", "VARCHAR(40)"),
    ("price", "DECIMAL(10,2)"),
    ("big", "DECIMAL(20,0)"),
    ("ratio", "DOUBLE"),
    ("f", "FLOAT"),
    ("ok", "BOOLEAN"),
    ("day", "DATE"),
    ("at", "TIMESTAMP(6)"),
    ("ltz", "TIMESTAMP_LTZ(3)"),
    ("t", "TIME(3)"),
    ("blob", "VARBINARY(16)"),
]
SCHEMA = Schema.of([(n, parse_data_type(t)) for n, t in COLUMNS], ["id"])
#: the same table after ALTER TABLE ... ADD COLUMN note VARCHAR(20)
SCHEMA2 = Schema.of([*[(n, parse_data_type(t)) for n, t in COLUMNS], ("note", parse_data_type("VARCHAR(20)"))], ["id"])


def _image(rng: random.Random, key: int, schema: Schema = SCHEMA) -> dict:
    row = {
        "id": key,
        "qty": rng.choice([None, -32768, 32767, rng.randint(0, 99)]),
        "name": rng.choice([None, "", "plain", "é ünïcode \u2603", 'quote " and \\ back']),
        "price": rng.choice([None, Decimal("0.00"), Decimal("1.50"), Decimal(rng.randint(-10**6, 10**6)) / 100]),
        "big": rng.choice([None, Decimal(18446744073709551615), Decimal(rng.randint(0, 10**9))]),
        "ratio": rng.choice([None, 0.1, -2.5, rng.random()]),
        "f": rng.choice([None, 0.25, 1.5]),
        "ok": rng.choice([None, True, False]),
        "day": rng.choice([None, dt.date(2026, 2, 28), dt.date(1970, 1, 1)]),
        "at": rng.choice([None, dt.datetime(2026, 2, 28, 12, 34, 56, 123456), dt.datetime(2026, 1, 1)]),
        "ltz": rng.choice([None, dt.datetime(2026, 2, 28, 12, 34, 56, 123000, tzinfo=dt.timezone.utc)]),
        "t": rng.choice([None, dt.timedelta(hours=12, minutes=34, seconds=56, milliseconds=789),
                         dt.timedelta(hours=-1), dt.timedelta(hours=838, minutes=59, seconds=59)]),
        "blob": rng.choice([None, b"\x00\xffab", b""]),
    }
    if "note" in schema.names:
        row["note"] = rng.choice([None, "n", "later"])
    return row


def _changes(rng: random.Random, n: int, keys: int, schema: Schema = SCHEMA, state: dict | None = None) -> list:
    """``n`` events over ``keys`` keys, about 40 % inserts, 40 % updates, 20 % deletes, valid in
    order (an update or delete only of a live key)."""
    state = {} if state is None else state
    events = []
    while len(events) < n:
        key = rng.randrange(keys)
        roll = rng.random()
        if key not in state:
            after = _image(rng, key, schema)
            events.append(DataChangeEvent(TABLE, Op.CREATE if roll < 0.8 else Op.READ, None, after, schema, ts_ms=1))
            state[key] = after
        elif roll < 0.67:
            after = _image(rng, key, schema)
            events.append(DataChangeEvent(TABLE, Op.UPDATE, state[key], after, schema, ts_ms=2))
            state[key] = after
        else:
            events.append(DataChangeEvent(TABLE, Op.DELETE, state.pop(key), None, schema, ts_ms=3))
    return events


class _Writer:
    """Writes records as Pipeline 1 does: bare payload + schema headers, schema in a schema topic."""

    def __init__(self, bootstrap: str, topic: str, schema_topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap})
        self.topic, self.schema_topic = topic, schema_topic
        self.known: set[str] = set()

    def headers(self, schema: Schema) -> list[tuple[str, bytes]]:
        fingerprint = schema_fingerprint(schema)
        if fingerprint not in self.known:
            key, value = encode_schema_record(TABLE, schema)
            self.producer.produce(self.schema_topic, key=key, value=value)
            self.known.add(fingerprint)
        return [(SCHEMA_ID_HEADER, fingerprint.encode()), (SCHEMA_TOPIC_HEADER, self.schema_topic.encode())]

    def events(self, events: list, partitions: int = 1) -> None:
        for event in events:
            fmt = create_format("debezium-json", event.schema, {})
            key = (event.after or event.before)["id"]
            self.raw(fmt.encode_event(event), event.schema, partition=key % partitions)

    def raw(self, value: bytes, schema: Schema, partition: int = 0) -> None:
        self.producer.produce(self.topic, key=None, value=value, partition=partition, headers=self.headers(schema))

    def flush(self) -> None:
        assert self.producer.flush(30) == 0


def _p2(kafka_bootstrap, tmp_path, lake: str, topic: str, *, columnar: bool, name: str, transform=None,
        route=None, **source_extra):
    where = tmp_path / ("columnar" if columnar else "per-record")
    where.mkdir(exist_ok=True)
    block = {
        "pipeline": {"name": name, "columnar.enabled": "true" if columnar else "false"},
        "source": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap, "topic": topic,
                   "scan.startup.mode": "earliest-offset", "value.format": "debezium-json",
                   "debezium-json.distributed-tables": True, **source_extra},
        "sink": lake_sink(lake, where),
    }
    if transform is not None:
        block["transform"] = transform
    if route is not None:
        block["route"] = route
    return parse_pipeline(block, env={})


def _run_both(kafka_bootstrap, tmp_path, lake, topic, table=TABLE, **kw):
    """Run the topic through both paths; returns (columnar stats, per-record stats, lake A, lake B)."""
    results = []
    for columnar in (True, False):
        p2 = _p2(kafka_bootstrap, tmp_path, lake, topic, columnar=columnar,
                 name=f"col-{topic}-{'a' if columnar else 'b'}", **kw)
        stats = run_pipeline(p2, until_caught_up=True)
        lake_rows = read_lake_table(p2, table)
        results.append((stats, lake_rows.sort_by("id")))
    (a_stats, a), (b_stats, b) = results
    return a_stats, b_stats, a, b


def _final_state(events: list) -> dict:
    state: dict = {}
    for e in events:
        if e.op is Op.DELETE:
            state.pop(e.before["id"], None)
        else:
            state[e.after["id"]] = e.after
    return state


def test_the_columnar_lane_writes_what_the_per_record_path_writes(kafka_bootstrap, topic_factory, tmp_path, lake):
    topic = topic_factory(partitions=2)
    rng, state = random.Random(7), {}
    writer = _Writer(kafka_bootstrap, topic, f"{topic}-schemas")
    events = []
    # two runs: the second one's updates and deletes meet keys the lake already holds
    for wave in range(2):
        more = _changes(rng, 3000, 400, state=state)
        events += more
        writer.events(more, partitions=2)
        writer.flush()
        a_stats, b_stats, a, b = _run_both(kafka_bootstrap, tmp_path, lake, topic)
        assert a_stats.metrics["change_batches"] > 0, "the columnar lane was not taken"
        assert b_stats.metrics["change_batches"] == 0
        assert a.schema == b.schema  # types included
        assert a.to_pylist() == b.to_pylist()
        assert a.column("id").to_pylist() == sorted(_final_state(events))
        assert a_stats.tables == b_stats.tables and a_stats.events == b_stats.events == 3000


def test_route_and_transform_apply_to_whole_batches(kafka_bootstrap, topic_factory, tmp_path, lake):
    topic = topic_factory()
    events = _changes(random.Random(8), 1500, 300)
    writer = _Writer(kafka_bootstrap, topic, f"{topic}-schemas")
    writer.events(events)
    writer.flush()
    sink_table = TableId("lake", "orders_copy")
    transform = [{"source-table": "shop.orders", "projection": "id, name, price, price * 2 AS double_price, "
                  "UPPER(name) AS shout, __table_name__ AS src, day", "filter": "id % 3 <> 0 OR qty > 50",
                  "primary-keys": "id"}]
    a_stats, b_stats, a, b = _run_both(kafka_bootstrap, tmp_path, lake, topic, table=sink_table, transform=transform,
                                       route=[{"source-table": "shop.orders", "sink-table": "lake.orders_copy"}])
    assert a_stats.metrics["change_batches"] > 0, "the batches were not transformed whole"
    assert a.schema == b.schema
    assert a.to_pylist() == b.to_pylist()
    assert a.num_rows > 0 and set(a.column_names) >= {"double_price", "shout", "src"}


def test_a_corrupt_record_in_the_middle_of_a_batch_is_named_by_offset(kafka_bootstrap, topic_factory, tmp_path, lake):
    topic = topic_factory()
    rng = random.Random(9)
    state: dict = {}
    first, second = _changes(rng, 40, 30, state=state), _changes(rng, 40, 30, state=state)
    writer = _Writer(kafka_bootstrap, topic, f"{topic}-schemas")
    writer.events(first)
    writer.raw(b'{"before":null,"after":{"id":2', SCHEMA)  # offset 40: truncated JSON, with a schema header
    writer.events(second)
    writer.flush()
    p2 = _p2(kafka_bootstrap, tmp_path, lake, topic, columnar=True, name=f"col-{topic}-stop")
    with pytest.raises(DecodeError) as info:
        run_pipeline(p2, until_caught_up=True)
    assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 40)

    # with ignore-parse-errors: the bad record goes to the dead-letter topic, the others to the lake
    dlq = f"{topic}-dlq"
    extra = {"debezium-json.ignore-parse-errors": True, "dead-letter.topic": dlq}
    a_stats, b_stats, a, b = _run_both(kafka_bootstrap, tmp_path, lake, topic, **extra)
    assert a_stats.metrics["change_batches"] > 0
    assert a_stats.bad_records == b_stats.bad_records == 1
    assert a_stats.dead_letters == b_stats.dead_letters == 1
    assert a.schema == b.schema and a.to_pylist() == b.to_pylist()
    assert a.column("id").to_pylist() == sorted(_final_state(first + second))
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"check-{topic}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(dlq, 0, 0)])
        copies = []
        for _ in range(30):
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                copies.append(msg)
            if len(copies) >= 2:
                break
    finally:
        consumer.close()
    assert len(copies) == 2  # one per run
    for msg in copies:
        headers = dict(msg.headers() or [])
        assert msg.value() == b'{"before":null,"after":{"id":2'
        assert (headers[DLQ_HEADERS[0]], headers[DLQ_HEADERS[1]], headers[DLQ_HEADERS[2]]) == (topic.encode(), b"0", b"40")


def test_a_schema_change_in_the_middle_of_a_batch(kafka_bootstrap, topic_factory, tmp_path, lake):
    topic = topic_factory()
    rng = random.Random(10)
    state: dict = {}
    before = _changes(rng, 60, 40, state=state)
    after = _changes(rng, 60, 40, schema=SCHEMA2, state=state)
    writer = _Writer(kafka_bootstrap, topic, f"{topic}-schemas")
    writer.events(before)
    writer.events(after)
    writer.flush()
    a_stats, b_stats, a, b = _run_both(kafka_bootstrap, tmp_path, lake, topic)
    assert a_stats.metrics["change_batches"] >= 2  # one per schema
    assert "note" in a.column_names
    assert a.schema == b.schema and a.to_pylist() == b.to_pylist()
    final = _final_state(before + after)
    assert a.column("id").to_pylist() == sorted(final)
    notes = dict(zip(a.column("id").to_pylist(), a.column("note").to_pylist()))
    assert notes == {k: v.get("note") for k, v in final.items()}
