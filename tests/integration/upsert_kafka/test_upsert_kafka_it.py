"""upsert-kafka source and sink against the real Kafka broker (fixtures from tests/conftest.py)."""

from __future__ import annotations

import argparse
import io
import time
import uuid
from decimal import Decimal

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from changelake.changelog import ChangelogRow, RowKind, Schema, parse_data_type
from changelake.changelog.state import SqliteKeyStateStore
from cli import changelog as changelog_cmd
from changelake.connectors.errors import SinkFlushError, SourceError
from changelake.connectors.upsert_kafka import create_sink, create_source
from changelake.connectors.upsert_kafka.partitioner import partition_for
from changelake.formats.errors import DecodeError

pytestmark = pytest.mark.integration

SCHEMA = Schema.of(
    [
        ("region", parse_data_type("STRING NOT NULL")),
        ("pv", parse_data_type("BIGINT")),
        ("amount", parse_data_type("DECIMAL(10, 2)")),
    ],
    ["region"],
)


def opts(bootstrap: str, topic: str, key_format: str = "json", value_format: str = "json", **extra: str) -> dict[str, str]:
    o = {
        "connector": "upsert-kafka",
        "topic": topic,
        "properties.bootstrap.servers": bootstrap,
        "key.format": key_format,
        "value.format": value_format,
        "scan.bounded.mode": "latest-offset",
    }
    o.update(extra)
    return o


def row(kind: RowKind, region: str, pv: int | None = None, amount: str | None = None) -> ChangelogRow:
    return ChangelogRow(kind, {"region": region, "pv": pv, "amount": None if amount is None else Decimal(amount)})


def raw_records(bootstrap: str, topic: str, timeout_s: float = 20.0, isolation: str = "read_committed") -> list:
    """Every record of ``topic`` (all partitions), read to the end, as confluent-kafka messages."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"raw-{uuid.uuid4().hex}", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": isolation,
    })
    md = c.list_topics(topic, timeout=10)
    parts = sorted(md.topics[topic].partitions)
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
    c.close()
    assert len(eof) == len(parts), "did not reach the end of the topic"
    return out


def changelog(rows: list[ChangelogRow]) -> list[str]:
    return [str(r) for r in rows]


UPDATING_STREAM = [
    row(RowKind.INSERT, "eu", 1, "1.50"),
    row(RowKind.INSERT, "us", 2, "2.00"),
    row(RowKind.UPDATE_BEFORE, "eu", 1, "1.50"),  # dropped by the sink
    row(RowKind.UPDATE_AFTER, "eu", 3, "4.25"),
    row(RowKind.UPDATE_AFTER, "us", 2, "2.00"),  # identical: written, but the source emits nothing
    row(RowKind.DELETE, "us"),  # tombstone; the source emits the full last row
    row(RowKind.DELETE, "ap"),  # tombstone for a key never seen: ignored by the source
    row(RowKind.INSERT, "ap", 5, None),
]
EXPECTED_CHANGELOG = [
    "+I[eu, 1, 1.50]",
    "+I[us, 2, 2.00]",
    "+U[eu, 3, 4.25]",
    "-D[us, 2, 2.00]",
    "+I[ap, 5, NULL]",
]


@pytest.mark.parametrize(
    "key_format,value_format,fields_include",
    [("json", "json", "ALL"), ("csv", "csv", "ALL"), ("avro", "avro", "ALL"), ("json", "avro", "EXCEPT_KEY"), ("csv", "json", "EXCEPT_KEY")],
)
def test_sink_then_source_gives_the_exact_changelog(kafka_bootstrap, key_format, value_format, fields_include):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    o = opts(kafka_bootstrap, topic, key_format, value_format, **{"value.fields-include": fields_include})
    sink = create_sink(o, SCHEMA)
    with sink:
        sink.write_all(UPDATING_STREAM)
    assert sink.metrics.snapshot()["numRecordsOut"] == 7  # -U dropped

    records = raw_records(kafka_bootstrap, topic)
    assert [m.value() is None for m in records] == [False, False, False, False, True, True, False]
    assert len({m.key() for m in records}) == 3

    with create_source(o, SCHEMA) as source:
        rows = source.read_all()
        assert source.is_bounded_end_reached()
        assert source.metrics.snapshot()["numRecordsIn"] == 7
    assert changelog(rows) == EXPECTED_CHANGELOG
    assert rows[3].kind is RowKind.DELETE and rows[3].values["pv"] == 2  # full-row -D
    assert {r.metadata["topic"] for r in rows} == {topic}


def test_retract_mode_emits_update_before(kafka_bootstrap):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    o = opts(kafka_bootstrap, topic, **{"scan.changelog-mode": "retract"})
    with create_sink(o, SCHEMA) as sink:
        sink.write_all(UPDATING_STREAM)
    with create_source(o, SCHEMA) as source:
        rows = source.read_all()
    assert changelog(rows) == [
        "+I[eu, 1, 1.50]", "+I[us, 2, 2.00]", "-U[eu, 1, 1.50]", "+U[eu, 3, 4.25]", "-D[us, 2, 2.00]", "+I[ap, 5, NULL]",
    ]


def test_created_topic_is_compacted(kafka_bootstrap):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    with create_sink(opts(kafka_bootstrap, topic), SCHEMA) as sink:
        sink.write(row(RowKind.INSERT, "eu", 1, "1.00"))
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    config = admin.describe_configs([res])[res].result(timeout=10)
    assert config["cleanup.policy"].value == "compact"


def test_buffer_dedups_per_key_on_the_topic(kafka_bootstrap):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    o = opts(kafka_bootstrap, topic, **{"sink.buffer-flush.max-rows": "1000", "sink.buffer-flush.interval": "1 h"})
    with create_sink(o, SCHEMA) as sink:
        for i in range(50):
            sink.write(row(RowKind.UPDATE_AFTER, "b", i, "1.00"))
            sink.write(row(RowKind.UPDATE_AFTER, "a", i, "2.00"))
        sink.write(row(RowKind.INSERT, "gone", 1, "1.00"))
        sink.write(row(RowKind.DELETE, "gone"))  # INSERT then DELETE -> a tombstone
        sink.write(row(RowKind.DELETE, "back"))
        sink.write(row(RowKind.INSERT, "back", 7, "7.00"))  # DELETE then INSERT -> only the value
        assert raw_records(kafka_bootstrap, topic) == []  # nothing flushed yet
        sink.flush()
    records = raw_records(kafka_bootstrap, topic)
    got = [(m.key(), m.value()) for m in records]
    assert got == [
        (b'{"region":"b"}', b'{"region":"b","pv":49,"amount":1.00}'),
        (b'{"region":"a"}', b'{"region":"a","pv":49,"amount":2.00}'),
        (b'{"region":"gone"}', None),
        (b'{"region":"back"}', b'{"region":"back","pv":7,"amount":7.00}'),
    ]


def test_buffer_flushes_on_the_interval_without_writes(kafka_bootstrap):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    o = opts(kafka_bootstrap, topic, **{"sink.buffer-flush.max-rows": "1000", "sink.buffer-flush.interval": "200 ms"})
    sink = create_sink(o, SCHEMA).open()
    try:
        sink.write(row(RowKind.INSERT, "eu", 1, "1.00"))
        deadline = time.monotonic() + 10
        records: list = []
        while not records and time.monotonic() < deadline:
            time.sleep(0.3)
            sink.producer.flush(5)
            records = raw_records(kafka_bootstrap, topic)
        assert [m.key() for m in records] == [b'{"region":"eu"}']
    finally:
        sink.close()


def test_partitions_by_key_equal_partition_for(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=6, config={"cleanup.policy": "compact"})
    with create_sink(opts(kafka_bootstrap, topic), SCHEMA) as sink:
        for i in range(300):
            sink.write(row(RowKind.INSERT, f"region-{i}", i, "1.00"))
    records = raw_records(kafka_bootstrap, topic)
    assert len(records) == 300
    assert len({m.partition() for m in records}) == 6
    for m in records:
        assert m.partition() == partition_for(m.key(), 6), m.key()


def test_at_least_once_flush_names_topic_and_partition_of_a_failed_delivery(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=1, config={"max.message.bytes": "2000"})
    schema = Schema.of([("k", parse_data_type("STRING NOT NULL")), ("blob", parse_data_type("STRING"))], ["k"])
    sink = create_sink(opts(kafka_bootstrap, topic), schema, create_topics=False).open()
    try:
        sink.write(ChangelogRow.insert({"k": "big", "blob": "x" * 50_000}))
        with pytest.raises(SinkFlushError, match=rf"topic '{topic}' partition 0"):
            sink.flush()
    finally:
        sink.close()


def test_exactly_once_aborted_records_are_never_visible(kafka_bootstrap):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    o = opts(kafka_bootstrap, topic, **{"sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": f"tx-{uuid.uuid4().hex[:8]}",
                                       "sink.buffer-flush.max-rows": "100", "sink.buffer-flush.interval": "1 h"})
    sink = create_sink(o, SCHEMA).open()
    try:
        sink.write(row(RowKind.INSERT, "aborted", 1, "1.00"))
        sink.flush()  # sent inside the open transaction
        sink.abort_transaction()
        sink.write(row(RowKind.INSERT, "eu", 1, "1.00"))
        sink.write(row(RowKind.UPDATE_AFTER, "eu", 2, "2.00"))  # buffered: flushed by commit
        sink.commit_transaction()
        sink.write(row(RowKind.INSERT, "open", 9, "9.00"))
        sink.flush()  # in an open transaction: not visible to read_committed
        committed = raw_records(kafka_bootstrap, topic, isolation="read_committed")
        uncommitted = raw_records(kafka_bootstrap, topic, isolation="read_uncommitted")
    finally:
        sink.close()  # aborts the open transaction
    assert [m.key() for m in committed] == [b'{"region":"eu"}']
    assert committed[0].value() == b'{"region":"eu","pv":2,"amount":2.00}'
    assert {m.key() for m in uncommitted} == {b'{"region":"aborted"}', b'{"region":"eu"}', b'{"region":"open"}'}
    with create_source(o, SCHEMA) as source:
        assert changelog(source.read_all()) == ["+I[eu, 2, 2.00]"]


def test_exactly_once_new_instance_fences_the_old_one(kafka_bootstrap):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    o = opts(kafka_bootstrap, topic, **{"sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": f"tx-{uuid.uuid4().hex[:8]}"})
    old = create_sink(o, SCHEMA).open()
    old.write(row(RowKind.INSERT, "zombie", 1, "1.00"))
    old.flush()
    new = create_sink(o, SCHEMA).open()  # init_transactions: aborts the old open transaction
    try:
        with pytest.raises(SinkFlushError):
            old.commit_transaction()
        new.write(row(RowKind.INSERT, "eu", 1, "1.00"))
        new.commit_transaction()
    finally:
        new.close()
        old._producer = None  # fenced: nothing left to release
    assert [m.key() for m in raw_records(kafka_bootstrap, topic)] == [b'{"region":"eu"}']


def test_consume_transform_produce_commits_offsets_in_the_transaction(kafka_bootstrap, topic_factory):
    src_topic = topic_factory(partitions=1)
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    for region in ["eu", "us", "eu"]:
        p.produce(src_topic, value=region.encode())
    p.flush(10)
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(src_topic, 0, 0)])
    out_topic = f"uk-{uuid.uuid4().hex[:10]}"
    o = opts(kafka_bootstrap, out_topic, **{"sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": f"ctp-{uuid.uuid4().hex[:8]}"})
    counts: dict[str, int] = {}
    msgs: list = []
    deadline = time.monotonic() + 20
    while len(msgs) < 3 and time.monotonic() < deadline:
        msgs += [m for m in consumer.consume(10, 0.5) if not m.error()]
    with create_sink(o, SCHEMA) as sink:
        for m in msgs:
            region = m.value().decode()
            counts[region] = counts.get(region, 0) + 1
            sink.write(row(RowKind.UPDATE_AFTER, region, counts[region], None))
        sink.commit_transaction(offsets=[TopicPartition(src_topic, 0, msgs[-1].offset() + 1)], group_metadata=consumer.consumer_group_metadata())
    committed = consumer.committed([TopicPartition(src_topic, 0)], timeout=10)
    consumer.close()
    assert committed[0].offset == 3
    with create_source(opts(kafka_bootstrap, out_topic), SCHEMA) as source:
        assert changelog(source.read_all()) == ["+I[eu, 1, NULL]", "+I[us, 1, NULL]", "+U[eu, 2, NULL]"]


def test_restart_with_sqlite_state_resumes_without_duplicates(kafka_bootstrap, tmp_path):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    o = opts(kafka_bootstrap, topic)
    with create_sink(o, SCHEMA) as sink:
        sink.write_all([row(RowKind.INSERT, "eu", 1, "1.00"), row(RowKind.INSERT, "us", 2, "2.00")])
    store = SqliteKeyStateStore(tmp_path / "state")
    with create_source(o, SCHEMA, store=store) as source:
        assert changelog(source.read_all()) == ["+I[eu, 1, 1.00]", "+I[us, 2, 2.00]"]
    store.close()

    with create_sink(o, SCHEMA) as sink:
        sink.write_all([row(RowKind.UPDATE_AFTER, "eu", 3, "3.00"), row(RowKind.DELETE, "us"), row(RowKind.INSERT, "ap", 4, "4.00")])
    store = SqliteKeyStateStore(tmp_path / "state")
    with create_source(o, SCHEMA, store=store) as source:
        assert source.positions == {(topic, 0): 2}  # resumed, not re-read
        assert changelog(source.read_all()) == ["+U[eu, 3, 3.00]", "-D[us, 2, 2.00]", "+I[ap, 4, 4.00]"]
    store.close()

    # deleting the state rebuilds from the earliest offset
    with create_source(o, SCHEMA, store=SqliteKeyStateStore(tmp_path / "fresh")) as source:
        assert changelog(source.read_all()) == [
            "+I[eu, 1, 1.00]", "+I[us, 2, 2.00]", "+U[eu, 3, 3.00]", "-D[us, 2, 2.00]", "+I[ap, 4, 4.00]",
        ]


def test_null_key_fails_with_partition_and_offset_or_is_skipped(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=1)
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    p.produce(topic, key=b'{"region":"eu"}', value=b'{"region":"eu","pv":1,"amount":1.00}')
    p.produce(topic, key=None, value=b'{"region":"xx","pv":1,"amount":1.00}')
    p.produce(topic, key=b'{"region":"us"}', value=b'{"region":"us","pv":2,"amount":2.00}')
    p.flush(10)
    with create_source(opts(kafka_bootstrap, topic), SCHEMA) as source:
        with pytest.raises(SourceError, match=rf"null key at topic '{topic}' partition 0 offset 1"):
            source.read_all()
    with create_source(opts(kafka_bootstrap, topic, **{"scan.null-key.mode": "skip"}), SCHEMA) as source:
        assert changelog(source.read_all()) == ["+I[eu, 1, 1.00]", "+I[us, 2, 2.00]"]
        assert source.null_key_records == 1


def test_decode_error_names_position_unless_ignored(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=1)
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    p.produce(topic, key=b'{"region":"eu"}', value=b'{"region":"eu","pv":1,"amount":1.00}')
    p.produce(topic, key=b'{"region":"us"}', value=b"{not json")
    p.flush(10)
    with create_source(opts(kafka_bootstrap, topic), SCHEMA) as source:
        with pytest.raises(DecodeError) as info:
            source.read_all()
    assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 1)
    with create_source(opts(kafka_bootstrap, topic, **{"value.json.ignore-parse-errors": "true"}), SCHEMA) as source:
        assert changelog(source.read_all()) == ["+I[eu, 1, 1.00]"]


def test_bounded_specific_offsets_and_timestamp(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=1)
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    base_ts = 1_700_000_000_000
    for i in range(5):
        p.produce(topic, key=f'{{"region":"r{i}"}}'.encode(), value=f'{{"region":"r{i}","pv":{i},"amount":null}}'.encode(), timestamp=base_ts + i * 1000)
    p.flush(10)
    o = opts(kafka_bootstrap, topic, **{"scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "partition:0,offset:2"})
    with create_source(o, SCHEMA) as source:
        assert changelog(source.read_all()) == ["+I[r0, 0, NULL]", "+I[r1, 1, NULL]"]
    o = opts(kafka_bootstrap, topic, **{"scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": str(base_ts + 3000)})
    with create_source(o, SCHEMA) as source:
        assert changelog(source.read_all()) == ["+I[r0, 0, NULL]", "+I[r1, 1, NULL]", "+I[r2, 2, NULL]"]


def test_changelog_command_prints_flink_changelog(kafka_bootstrap, tmp_path, monkeypatch):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    with create_sink(opts(kafka_bootstrap, topic), SCHEMA) as sink:
        sink.write_all(UPDATING_STREAM)
    ddl = tmp_path / "t.sql"
    ddl.write_text(
        "CREATE TABLE t (region STRING, pv BIGINT, amount DECIMAL(10, 2), PRIMARY KEY (region) NOT ENFORCED) "
        f"WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}', 'key.format' = 'json', 'value.format' = 'json')"
    )
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    parser = argparse.ArgumentParser()
    changelog_cmd.register(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    assert changelog_cmd.run(parser.parse_args(["changelog", "--ddl", str(ddl)]), out=out) == 0
    assert out.getvalue().splitlines() == EXPECTED_CHANGELOG


def test_multi_topic_sink_and_topic_pattern_source(kafka_bootstrap):
    prefix = f"pat{uuid.uuid4().hex[:8]}"
    a, b = f"{prefix}-a", f"{prefix}-b"
    with create_sink(opts(kafka_bootstrap, f"{a};{b}"), SCHEMA) as sink:
        sink.write(ChangelogRow(RowKind.INSERT, {"region": "eu", "pv": 1, "amount": None}, None, {"topic": a}))
        sink.write(ChangelogRow(RowKind.INSERT, {"region": "us", "pv": 2, "amount": None}, None, {"topic": b}))
    o = opts(kafka_bootstrap, "unused")
    del o["topic"]
    o["topic-pattern"] = f"{prefix}-.*"
    with create_source(o, SCHEMA) as source:
        rows = source.read_all()
    assert sorted(changelog(rows)) == ["+I[eu, 1, NULL]", "+I[us, 2, NULL]"]
    assert {r.metadata["topic"] for r in rows} == {a, b}


def test_group_offsets_bound_and_none_guarantee(kafka_bootstrap):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    with create_sink(opts(kafka_bootstrap, topic, **{"sink.delivery-guarantee": "none"}), SCHEMA) as sink:
        sink.write_all([row(RowKind.INSERT, f"r{i}", i, None) for i in range(4)])
        sink.producer.flush(10)  # 'none' does not wait on flush(); wait here for the test
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    c.close()
    o = opts(kafka_bootstrap, topic, **{"scan.bounded.mode": "group-offsets", "properties.group.id": group})
    with create_source(o, SCHEMA) as source:
        assert changelog(source.read_all()) == ["+I[r0, 0, NULL]", "+I[r1, 1, NULL]", "+I[r2, 2, NULL]"]


def test_kafka_common_helpers(kafka_bootstrap, topic_factory):
    from changelake.connectors.kafka_common import end_offsets, ensure_topics, partition_count

    name = f"kc-{uuid.uuid4().hex[:8]}"
    assert ensure_topics(kafka_bootstrap, [name], partitions=3, config={"cleanup.policy": "compact"}) == [name]
    assert ensure_topics(kafka_bootstrap, [name], partitions=3) == []  # exists: left alone
    assert partition_count(kafka_bootstrap, name) == 3
    p = Producer({"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2_random"})
    for i in range(10):
        p.produce(name, key=b"k", value=str(i).encode())
    p.flush(10)
    ends = end_offsets(kafka_bootstrap, name)
    assert sorted(ends.values()) == [0, 0, 10]
    assert ends[partition_for(b"k", 3)] == 10


def test_partition_watermarks_fresh_cached_and_an_error_naming_the_partition(kafka_bootstrap):
    from changelake.connectors.kafka_common import (
        WatermarkError,
        ensure_topics,
        partition_end_offsets,
        partition_watermarks,
    )

    name = f"kw-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_bootstrap, [name], partitions=2)
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(6):
        p.produce(name, value=str(i).encode(), partition=1)
    p.flush(10)
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})
    try:
        tps = [(name, 1), (name, 0)]
        assert partition_watermarks(c, tps, 10) == {(name, 1): (0, 6), (name, 0): (0, 0)}
        assert list(partition_end_offsets(c, tps, 10)) == tps  # the order given
        # cached: nothing fetched yet, so the broker is asked; after a fetch, the fetch's watermark
        assert partition_end_offsets(c, [(name, 1)], 10, cached=True) == {(name, 1): 6}
        c.assign([TopicPartition(name, 1, 0)])
        got = 0
        deadline = time.monotonic() + 20
        while got < 6 and time.monotonic() < deadline:
            got += sum(1 for m in c.consume(10, 0.5) if m.error() is None)
        assert got == 6
        assert partition_end_offsets(c, [(name, 1)], 10, cached=True) == {(name, 1): 6}  # from the fetches
        p.produce(name, value=b"late", partition=1)
        p.flush(10)
        assert partition_end_offsets(c, [(name, 1)], 10) == {(name, 1): 7}
        with pytest.raises(WatermarkError) as err:
            partition_watermarks(c, [(name, 0), (name, 5)], 3)
        assert f"Kafka topic {name!r} partition 5" in str(err.value)
        assert (err.value.topic, err.value.partition) == (name, 5)
        assert isinstance(err.value.args[0], KafkaError)  # callers' translations still see the client's error
    finally:
        c.close()
