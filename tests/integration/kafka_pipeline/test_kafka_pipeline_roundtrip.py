"""Kafka pipeline sink -> real broker -> Kafka pipeline source, per value format."""

from __future__ import annotations

import decimal
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.kafka import KafkaPipelineSink, KafkaPipelineSource
from changelake.formats.errors import DecodeError

pytestmark = pytest.mark.integration

SCHEMA = Schema.of(
    [
        ("id", DataType(TypeRoot.INT, nullable=False)),
        ("name", DataType(TypeRoot.STRING)),
        ("price", DataType.decimal(10, 2)),
    ],
    primary_key=["id"],
)


def uid() -> str:
    return uuid.uuid4().hex[:10]


def changes(table: TableId) -> list[DataChangeEvent]:
    a = {"id": 1, "name": "apple", "price": decimal.Decimal("1.10")}
    b = {"id": 2, "name": "pear", "price": decimal.Decimal("2.25")}
    a2 = {**a, "price": decimal.Decimal("1.30")}
    return [
        DataChangeEvent(table, Op.READ, None, a, SCHEMA, ts_ms=0),
        DataChangeEvent(table, Op.CREATE, None, b, SCHEMA, ts_ms=1700000000000),
        DataChangeEvent(table, Op.UPDATE, a, a2, SCHEMA, ts_ms=1700000000001),
        DataChangeEvent(table, Op.DELETE, b, None, SCHEMA, ts_ms=1700000000002),
    ]


def read_all(bootstrap: str, options: dict, group: str | None = None, max_polls: int = 60) -> tuple[list, KafkaPipelineSource]:
    src = KafkaPipelineSource({"properties.bootstrap.servers": bootstrap, "scan.bounded.mode": "latest-offset", **options},
                              group_id=group or f"g-{uid()}")
    src.open()
    records = []
    for _ in range(max_polls):
        if src.caught_up():
            break
        records.extend(src.poll(max_records=100, timeout_s=0.5))
    assert src.caught_up(), f"not caught up: positions {src.positions()} end {src.end_offsets()}"
    src.close()
    return records, src


def _canonical(e: DataChangeEvent) -> tuple:
    def norm(row):
        if row is None:
            return None
        return {k: (decimal.Decimal(str(v)) if k == "price" and v is not None else v) for k, v in row.items()}

    return (e.table, e.op, norm(e.before), norm(e.after))


@pytest.mark.parametrize("value_format", ["debezium-json", "canal-json"])
def test_changelog_formats_round_trip(kafka_bootstrap, value_format):
    table = TableId(f"db_{uid()}", "customers")
    sink = KafkaPipelineSink({"properties.bootstrap.servers": kafka_bootstrap, "value.format": value_format},
                             pipeline_name=f"p-{uid()}")
    sink.open()
    sink.write(changes(table))
    sink.commit({"file": "mysql-bin.000001", "pos": 100})
    sink.close()

    records, _ = read_all(kafka_bootstrap, {"topic": str(table), "value.format": value_format})
    assert [r.key for r in records] == [
        f'{{"TableId":"{table}","id":1}}'.encode(),
        f'{{"TableId":"{table}","id":2}}'.encode(),
        f'{{"TableId":"{table}","id":1}}'.encode(),
        f'{{"TableId":"{table}","id":2}}'.encode(),
    ]
    assert {r.partition for r in records} == {0}
    got = [_canonical(e) for r in records for e in r.events]
    want = [_canonical(e) for e in changes(table)]
    if value_format == "canal-json":  # canal has no snapshot op: a read is an INSERT
        want[0] = (table, Op.CREATE, None, want[0][3])
    assert got == want
    assert records[2].events[0].position == {"topic": str(table), "partition": 0, "offset": 3}


def test_debezium_json_with_schema_round_trips_schema_and_exact_decimals(kafka_bootstrap):
    table = TableId(f"db_{uid()}", "customers")
    opts = {"properties.bootstrap.servers": kafka_bootstrap, "debezium-json.include-schema.enabled": "true"}
    with KafkaPipelineSink(opts, pipeline_name=f"p-{uid()}") as sink:
        sink.write(changes(table))
        sink.commit({"pos": 1})
    records, _ = read_all(kafka_bootstrap, {"topic": str(table)})
    events = [e for r in records for e in r.events]
    assert [(e.op, e.before, e.after) for e in events] == [(e.op, e.before, e.after) for e in changes(table)]
    assert events[0].after["price"] == decimal.Decimal("1.10") and str(events[0].after["price"]) == "1.10"
    assert events[0].schema.names == ["id", "name", "price"]


def test_plain_json_is_an_upsert_topic_with_tombstones(kafka_bootstrap):
    table = TableId(f"db_{uid()}", "customers")
    with KafkaPipelineSink({"properties.bootstrap.servers": kafka_bootstrap, "value.format": "json"},
                           pipeline_name=f"p-{uid()}") as sink:
        sink.write(changes(table))
        sink.commit({"pos": 1})
        # an update that changes the key writes a tombstone for the old key first
        moved = DataChangeEvent(table, Op.UPDATE, {"id": 1, "name": "apple", "price": decimal.Decimal("1.30")},
                                {"id": 7, "name": "apple", "price": decimal.Decimal("1.30")}, SCHEMA)
        sink.write([moved])
        sink.commit({"pos": 2})

    records, _ = read_all(kafka_bootstrap, {"topic": str(table), "value.format": "json"})
    events = [e for r in records for e in r.events]
    assert [(e.op, e.before, e.after and e.after["id"]) for e in events] == [
        (Op.CREATE, None, 1),
        (Op.CREATE, None, 2),
        (Op.CREATE, None, 1),
        (Op.DELETE, {"id": 2}, None),
        (Op.DELETE, {"id": 1}, None),
        (Op.CREATE, None, 7),
    ]
    assert records[3].key == f'{{"TableId":"{table}","id":2}}'.encode()
    assert all(e.table == table for e in events)


def test_topic_mapping_headers_and_custom_headers(kafka_bootstrap):
    db = f"db_{uid()}"
    topic = f"customers-{uid()}"
    opts = {
        "properties.bootstrap.servers": kafka_bootstrap,
        "sink.tableId-to-topic.mapping": f"{db}.customers:{topic}",
        "sink.add-tableId-to-header-enabled": "true",
        "sink.custom-header": "team:lake;env:test",
    }
    with KafkaPipelineSink(opts, pipeline_name=f"p-{uid()}") as sink:
        sink.write(changes(TableId(db, "customers"))[:1] + changes(TableId(db, "products"))[:1])
        sink.commit({"pos": 1})
    records, _ = read_all(kafka_bootstrap, {"topic": topic})
    assert len(records) == 1
    assert records[0].headers[:5] == [
        ("namespace", b""), ("schemaName", db.encode()), ("tableName", b"customers"),
        ("team", b"lake"), ("env", b"test"),
    ]
    # then changelake's schema headers (the table's exact schema, in the compacted schema topic)
    assert [name for name, _ in records[0].headers[5:]] == ["changelake.schema.id", "changelake.schema.topic"]
    other, _ = read_all(kafka_bootstrap, {"topic": f"{db}.products"})
    assert [e.table for r in other for e in r.events] == [TableId(db, "products")]


@pytest.mark.parametrize("value_format", ["debezium-json", "canal-json", "json"])
def test_distributed_tables_in_one_topic(kafka_bootstrap, value_format):
    db = f"db_{uid()}"
    topic = f"inventory-{uid()}"
    customers, products = TableId(db, "customers"), TableId(db, "products")
    with KafkaPipelineSink({"properties.bootstrap.servers": kafka_bootstrap, "topic": topic,
                            "value.format": value_format}, pipeline_name=f"p-{uid()}") as sink:
        sink.write(changes(customers)[:2] + changes(products)[:2])
        sink.commit({"pos": 1})
    records, _ = read_all(kafka_bootstrap, {"topic": topic, "value.format": value_format,
                                            f"{value_format}.distributed-tables": "true"})
    assert [e.table for r in records for e in r.events] == [customers, customers, products, products]
    # without distributed-tables the topic is the table
    records, _ = read_all(kafka_bootstrap, {"topic": topic, "value.format": value_format})
    assert {e.table for r in records for e in r.events} == {TableId.parse(topic)}


def test_corrupt_record_raises_with_position_or_is_counted(kafka_bootstrap, topic_factory):
    from confluent_kafka import Producer

    topic = topic_factory()
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    good = b'{"before":null,"after":{"id":1},"op":"c","source":{"db":"d","table":"t","ts_ms":0}}'
    for value in (good, b"{not json", good):
        p.produce(topic, value=value, partition=0)
    p.flush(10)
    src = KafkaPipelineSource({"properties.bootstrap.servers": kafka_bootstrap, "topic": topic}, group_id=f"g-{uid()}")
    src.open()
    with pytest.raises(DecodeError) as info:
        for _ in range(40):
            src.poll(10, 0.5)
    src.close()
    assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 1)
    assert f"topic {topic!r} partition 0 offset 1" in str(info.value)

    records, src = read_all(kafka_bootstrap, {"topic": topic, "debezium-json.ignore-parse-errors": "true"})
    assert [len(r.events) for r in records] == [1, 0, 1]
    assert src.parse_errors == 1


def test_startup_modes_advisory_commit_and_lag(kafka_bootstrap):
    table = TableId(f"db_{uid()}", "customers")
    with KafkaPipelineSink({"properties.bootstrap.servers": kafka_bootstrap}, pipeline_name=f"p-{uid()}") as sink:
        sink.write(changes(table))
        sink.commit({"pos": 1})
    base = {"properties.bootstrap.servers": kafka_bootstrap, "topic": str(table)}
    group = f"g-{uid()}"

    src = KafkaPipelineSource(base, group_id=group)
    src.open(start_offsets={(str(table), 0): 2})
    assert src.positions() == {(str(table), 0): 2}
    assert src.lag() == {(str(table), 0): 2}
    got = []
    for _ in range(40):
        got.extend(src.poll(10, 0.5))
        if src.caught_up():
            break
    assert [r.offset for r in got] == [2, 3]
    assert src.lag() == {(str(table), 0): 0}
    src.commit_advisory({(str(table), 0): 3})
    src.close()

    latest = KafkaPipelineSource({**base, "scan.startup.mode": "latest-offset"}, group_id=group)
    latest.open()
    assert latest.caught_up() and latest.positions() == {(str(table), 0): 4}
    latest.close()

    grouped = KafkaPipelineSource({**base, "scan.startup.mode": "group-offsets"}, group_id=group)
    grouped.open()
    assert grouped.positions() == {(str(table), 0): 3}
    grouped.close()

    specific = KafkaPipelineSource({**base, "scan.startup.mode": "specific-offsets",
                                    "scan.startup.specific-offsets": "partition:0,offset:1"}, group_id=group)
    specific.open()
    assert specific.positions() == {(str(table), 0): 1}
    specific.close()


def test_topic_pattern_reads_every_matching_topic(kafka_bootstrap):
    db = f"db_{uid()}"
    with KafkaPipelineSink({"properties.bootstrap.servers": kafka_bootstrap}, pipeline_name=f"p-{uid()}") as sink:
        sink.write(changes(TableId(db, "a"))[:1] + changes(TableId(db, "b"))[:1])
        sink.commit({"pos": 1})
    records, _ = read_all(kafka_bootstrap, {"topic-pattern": rf"{db}\..*"})
    assert sorted(str(e.table) for r in records for e in r.events) == [f"{db}.a", f"{db}.b"]


def test_missing_topic_is_a_source_error(kafka_bootstrap):
    from changelake.connectors.errors import SourceError

    src = KafkaPipelineSource({"properties.bootstrap.servers": kafka_bootstrap, "topic": f"missing-{uid()}"},
                              group_id="g")
    with pytest.raises(SourceError, match="does not exist"):
        src.open()


def test_refresh_discovers_new_topics_and_new_records(kafka_bootstrap):
    db = f"db_{uid()}"
    opts = {"properties.bootstrap.servers": kafka_bootstrap}
    with KafkaPipelineSink(opts, pipeline_name=f"p-{uid()}") as sink:
        sink.write(changes(TableId(db, "a"))[:1])
        sink.commit({"pos": 1})
    src = KafkaPipelineSource({**opts, "topic-pattern": rf"{db}\..*"}, group_id=f"g-{uid()}")
    src.open()
    got = []
    for _ in range(40):
        got.extend(src.poll(10, 0.3))
        if src.caught_up():
            break
    assert src.assignment() == [(f"{db}.a", 0)]
    with KafkaPipelineSink(opts, pipeline_name=f"p-{uid()}") as sink:
        sink.write(changes(TableId(db, "b"))[:2] + changes(TableId(db, "a"))[1:2])
        sink.commit({"pos": 2})
    assert src.caught_up()  # against the old snapshot
    src.refresh()
    assert not src.caught_up()
    assert sorted(src.assignment()) == [(f"{db}.a", 0), (f"{db}.b", 0)]
    for _ in range(40):
        got.extend(src.poll(10, 0.3))
        if src.caught_up():
            break
    src.close()
    assert sorted((str(e.table), e.after["id"]) for r in got for e in r.events) == [
        (f"{db}.a", 1), (f"{db}.a", 2), (f"{db}.b", 1), (f"{db}.b", 2)
    ]
