"""The plain 'kafka' table connector against a real broker: changelog formats round trip, startup
and bounded modes, key layout and partitioners, transactions."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from changelake.changelog import ChangelogRow, DataType, RowKind, Schema
from changelake.connectors.kafka_table import create_sink, create_source
from changelake.connectors.upsert_kafka.partitioner import partition_for

pytestmark = pytest.mark.integration

SCHEMA = Schema.of([("id", DataType.of("BIGINT")), ("name", DataType.of("STRING")), ("score", DataType.of("INT"))])


def table(bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
    return {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, **extra}


def read_all(opts: dict[str, str], schema: Schema = SCHEMA, timeout_s: float = 30) -> list[ChangelogRow]:
    out: list[ChangelogRow] = []
    deadline = time.monotonic() + timeout_s
    with create_source({"scan.bounded.mode": "latest-offset", **opts}, schema) as src:
        while not src.finished:
            assert time.monotonic() < deadline, "source did not reach its end offsets"
            out.extend(src.poll(0.3, 1000))
    return out


def raw_records(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kt-raw", "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, eof = [], set()
    deadline = time.monotonic() + 30
    while len(eof) < partitions and time.monotonic() < deadline:
        for m in c.consume(500, 0.5):
            if m.error():
                eof.add(m.partition())
            else:
                out.append(m)
    c.close()
    return out


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json", "maxwell-json"])
def test_changelog_format_topic_reads_back_all_four_kinds(kafka_bootstrap: str, topic_factory, fmt: str) -> None:
    topic = topic_factory()
    rows = [
        ChangelogRow(RowKind.INSERT, {"id": 1, "name": "a", "score": 1}),
        ChangelogRow(RowKind.INSERT, {"id": 2, "name": "b", "score": 2}),
        ChangelogRow(RowKind.UPDATE_BEFORE, {"id": 1, "name": "a", "score": 1}),
        ChangelogRow(RowKind.UPDATE_AFTER, {"id": 1, "name": "a", "score": 5}),
        ChangelogRow(RowKind.DELETE, {"id": 2, "name": "b", "score": 2}),
    ]
    with create_sink(table(kafka_bootstrap, topic, format=fmt), SCHEMA) as sink:
        sink.check_input_mode(frozenset(RowKind))
        for r in rows:
            sink.write(r)
        sink.flush()
    got = read_all(table(kafka_bootstrap, topic, format=fmt, **{"scan.startup.mode": "earliest-offset"}))
    assert [str(r) for r in got] == ["+I[1, a, 1]", "+I[2, b, 2]", "-U[1, a, 1]", "+U[1, a, 5]", "-D[2, b, 2]"]
    assert [r.metadata["offset"] for r in got] == [0, 1, 2, 2, 3]  # the update is one message


def test_startup_and_bounded_modes(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory()
    base = table(kafka_bootstrap, topic, format="json")
    with create_sink(base, SCHEMA) as sink:
        for i in range(10):
            sink.write(ChangelogRow.insert({"id": i, "name": f"n{i}", "score": i}))
        sink.flush()
    ids = lambda rows: [r.values["id"] for r in rows]  # noqa: E731
    assert ids(read_all({**base, "scan.startup.mode": "earliest-offset"})) == list(range(10))
    assert ids(read_all({**base, "scan.startup.mode": "latest-offset"})) == []
    assert ids(read_all({**base, "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "partition:0,offset:7"})) == [7, 8, 9]
    assert ids(read_all({**base, "scan.startup.mode": "earliest-offset", "scan.bounded.mode": "specific-offsets",
                         "scan.bounded.specific-offsets": "partition:0,offset:3"})) == [0, 1, 2]
    # timestamp: records written after a point in time
    t_ms = int(time.time() * 1000) + 1
    time.sleep(0.05)
    with create_sink(base, SCHEMA) as sink:
        sink.write(ChangelogRow.insert({"id": 10, "name": "late", "score": 0}))
        sink.flush()
    assert ids(read_all({**base, "scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": str(t_ms)})) == [10]
    # group offsets: committed by a first reader, resumed by a second
    group = {**base, "properties.group.id": f"g-{topic}", "scan.startup.mode": "group-offsets"}
    with create_source({**group, "scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "partition:0,offset:4"}, SCHEMA) as src:
        while not src.finished:
            src.poll(0.3)
        src.commit()
    assert ids(read_all(group)) == [4, 5, 6, 7, 8, 9, 10]


def test_key_fields_partitioners_and_tombstones(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory(partitions=3)
    opts = table(kafka_bootstrap, topic, format="json", **{"key.format": "json", "key.fields": "id"})
    with create_sink(opts, SCHEMA) as sink:
        for i in range(12):
            sink.write(ChangelogRow.insert({"id": i, "name": f"n{i}", "score": i}))
        sink.flush()
    recs = raw_records(kafka_bootstrap, topic, 3)
    assert len(recs) == 12
    for m in recs:  # default partitioner = Kafka's murmur2 of the key bytes
        assert m.partition() == partition_for(m.key(), 3)
    got = read_all({**opts, "scan.startup.mode": "earliest-offset"})
    assert sorted(r.values["id"] for r in got) == list(range(12))

    fixed = topic_factory(partitions=3)
    with create_sink(table(kafka_bootstrap, fixed, format="json", **{"sink.partitioner": "fixed"}), SCHEMA) as sink:
        for i in range(6):
            sink.write(ChangelogRow.insert({"id": i, "name": "x", "score": 0}))
        sink.flush()
    assert {m.partition() for m in raw_records(kafka_bootstrap, fixed, 3)} == {0}

    rr = topic_factory(partitions=3)
    with create_sink(table(kafka_bootstrap, rr, format="json", **{"sink.partitioner": "round-robin"}), SCHEMA) as sink:
        for i in range(6):
            sink.write(ChangelogRow.insert({"id": i, "name": "x", "score": 0}))
        sink.flush()
    parts = sorted(m.partition() for m in raw_records(kafka_bootstrap, rr, 3))
    assert parts == [0, 0, 1, 1, 2, 2]


def test_exactly_once_sink_aborted_transaction_is_invisible(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory()
    opts = table(kafka_bootstrap, topic, format="debezium-json",
                 **{"sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": f"kt-{topic}"})
    with create_sink(opts, SCHEMA) as sink:
        sink.begin_transaction()
        sink.write(ChangelogRow.insert({"id": 1, "name": "kept", "score": 1}))
        sink.commit_transaction()
        sink.begin_transaction()
        sink.write(ChangelogRow.insert({"id": 2, "name": "dropped", "score": 2}))
        sink.flush()  # delivered, but never committed
        sink.abort_transaction()
    got = read_all(table(kafka_bootstrap, topic, format="debezium-json", **{"scan.startup.mode": "earliest-offset"}))
    assert [str(r) for r in got] == ["+I[1, kept, 1]"]
