"""The upsert-kafka sink's batch path (write_all: batch encoding + produce_batch) on the real broker:
the same records, partitions, tombstones and delivery errors as write() row by row."""

from __future__ import annotations

import random
import time
import uuid
from decimal import Decimal

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from changelake.changelog import ChangelogRow, RowKind, Schema, parse_data_type
from changelake.connectors.errors import SinkFlushError
from changelake.connectors.upsert_kafka import create_sink, create_source
from changelake.connectors.upsert_kafka.partitioner import partition_for

pytestmark = pytest.mark.integration

# the helpers of test_upsert_kafka_it.py
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




def random_stream(n: int, seed: int) -> list[ChangelogRow]:
    rnd = random.Random(seed)
    kinds = [RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.UPDATE_BEFORE, RowKind.DELETE]
    return [row(rnd.choice(kinds), f"region-{rnd.randrange(200)}", rnd.randrange(1000), f"{rnd.randrange(10000) / 100:.2f}")
            for _ in range(n)]


def test_write_all_equals_write_row_by_row_on_the_topic(kafka_bootstrap, topic_factory):
    rows = random_stream(25_000, seed=1)  # more than one produce_batch chunk
    by_row = topic_factory(partitions=6, config={"cleanup.policy": "compact"})
    batched = topic_factory(partitions=6, config={"cleanup.policy": "compact"})
    with create_sink(opts(kafka_bootstrap, by_row), SCHEMA) as sink:
        for r in rows:
            sink.write(r)
    with create_sink(opts(kafka_bootstrap, batched), SCHEMA) as sink:
        assert sink.write_all(rows[:10]) == 10
        assert sink.write_all(iter(rows[10:])) == len(rows) - 10
        sink.flush()
        assert sink.metrics.snapshot()["numRecordsOut"] == sum(r.kind is not RowKind.UPDATE_BEFORE for r in rows)
    want = raw_records(kafka_bootstrap, by_row)
    got = raw_records(kafka_bootstrap, batched)
    assert len(got) == len(want) == sum(r.kind is not RowKind.UPDATE_BEFORE for r in rows)
    # per partition the same records in the same order (Kafka's order is per partition)
    def per_partition(msgs):  # type: ignore[no-untyped-def]
        out: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for m in msgs:
            out.setdefault(m.partition(), []).append((m.key(), m.value()))
        return out
    assert per_partition(got) == per_partition(want)
    assert len({m.partition() for m in got}) == 6
    for m in got:
        assert m.partition() == partition_for(m.key(), 6), m.key()
    assert any(m.value() is None for m in got)  # -D: tombstones
    with create_source(opts(kafka_bootstrap, batched), SCHEMA) as a, create_source(opts(kafka_bootstrap, by_row), SCHEMA) as b:
        assert sorted(changelog(a.read_all())) == sorted(changelog(b.read_all()))  # partitions interleave freely


def test_write_all_delivery_failure_names_topic_and_partition(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=1, config={"max.message.bytes": "2000"})
    schema = Schema.of([("k", parse_data_type("STRING NOT NULL")), ("blob", parse_data_type("STRING"))], ["k"])
    sink = create_sink(opts(kafka_bootstrap, topic), schema, create_topics=False).open()
    try:
        sink.write_all([ChangelogRow.insert({"k": "small", "blob": "x"}), ChangelogRow.insert({"k": "big", "blob": "x" * 50_000})])
        with pytest.raises(SinkFlushError, match=rf"topic '{topic}' partition 0"):
            sink.flush()
    finally:
        sink.close()


def test_write_all_exactly_once_commits_and_aborts(kafka_bootstrap):
    topic = f"uk-{uuid.uuid4().hex[:10]}"
    o = opts(kafka_bootstrap, topic, **{"sink.delivery-guarantee": "exactly-once",
                                       "sink.transactional-id-prefix": f"tx-{uuid.uuid4().hex[:8]}"})
    sink = create_sink(o, SCHEMA).open()
    try:
        sink.write_all([row(RowKind.INSERT, "aborted", 1, "1.00")])  # begins the transaction
        assert sink.in_transaction
        sink.flush()
        sink.abort_transaction()
        sink.write_all([row(RowKind.INSERT, "eu", 1, "1.00"), row(RowKind.UPDATE_BEFORE, "eu", 1, "1.00"),
                        row(RowKind.UPDATE_AFTER, "eu", 2, "2.00"), row(RowKind.DELETE, "us")])
        sink.commit_transaction()
    finally:
        sink.close()
    committed = raw_records(kafka_bootstrap, topic, isolation="read_committed")
    assert [(m.key(), m.value()) for m in committed] == [
        (b'{"region":"eu"}', b'{"region":"eu","pv":1,"amount":1.00}'),
        (b'{"region":"eu"}', b'{"region":"eu","pv":2,"amount":2.00}'),
        (b'{"region":"us"}', None),
    ]


def test_write_all_with_buffer_equals_write_with_buffer(kafka_bootstrap, topic_factory):
    rows = random_stream(5_000, seed=2)
    buffer = {"sink.buffer-flush.max-rows": "100", "sink.buffer-flush.interval": "1 h"}  # size triggers only
    topics = []
    for batched in (False, True):
        topic = topic_factory(partitions=3, config={"cleanup.policy": "compact"})
        topics.append(topic)
        with create_sink(opts(kafka_bootstrap, topic, **buffer), SCHEMA) as sink:
            if batched:
                for i in range(0, len(rows), 777):
                    sink.write_all(rows[i:i + 777])
            else:
                for r in rows:
                    sink.write(r)
    want, got = (raw_records(kafka_bootstrap, t) for t in topics)
    assert len(got) < sum(r.kind is not RowKind.UPDATE_BEFORE for r in rows)  # reduced by key
    assert sorted((m.partition(), m.offset(), m.key(), m.value()) for m in got) == \
        sorted((m.partition(), m.offset(), m.key(), m.value()) for m in want)
