"""Partition placement and delivery guarantees of the Kafka pipeline sink on the real broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.errors import SinkFlushError
from changelake.connectors.kafka import KafkaPipelineSink, KafkaPipelineSource
from changelake.connectors.upsert_kafka.partitioner import partition_for

pytestmark = pytest.mark.integration

SCHEMA = Schema.of([("id", DataType(TypeRoot.INT, nullable=False)), ("v", DataType(TypeRoot.STRING))], ["id"])


def uid() -> str:
    return uuid.uuid4().hex[:10]


def inserts(table: TableId, ids) -> list[DataChangeEvent]:
    return [DataChangeEvent(table, Op.CREATE, None, {"id": i, "v": f"v{i}"}, SCHEMA) for i in ids]


def java_partition(key: bytes, partitions: int) -> int:
    """Where Kafka's Java client puts ``key`` (murmur2; checked against Kafka's own vectors in
    tests/unit/connectors/upsert_kafka/test_partitioner.py)."""
    return partition_for(key, partitions)


def read_committed_records(bootstrap: str, topic: str, expected: int | None = None) -> list:
    """Read ``topic`` read_committed until caught up with the end offsets.

    A transaction's commit markers reach the partitions shortly after ``commit_transaction``
    returns, so the last stable offset may lag for a moment: with ``expected`` the end offsets are
    re-read (up to 15 s) until that many records arrived; one more refresh then proves no extra
    (duplicate) record follows.
    """
    src = KafkaPipelineSource({"properties.bootstrap.servers": bootstrap, "topic": topic,
                               "scan.bounded.mode": "latest-offset"}, group_id=f"g-{uid()}")
    src.open()
    out: list = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        out.extend(src.poll(200, 0.5))
        if src.caught_up():
            if expected is None or len(out) >= expected:
                break
            time.sleep(0.2)
            src.refresh()
    assert src.caught_up(), (src.positions(), src.end_offsets())
    if expected is not None:
        time.sleep(0.5)
        src.refresh()
        for _ in range(10):
            out.extend(src.poll(200, 0.3))
            if src.caught_up():
                break
    src.close()
    return out


def read_uncommitted_values(bootstrap: str, topic: str, max_polls: int = 200) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uid()}", "isolation.level": "read_uncommitted",
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    meta = c.list_topics(topic, timeout=10).topics[topic]
    c.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
    pending, out = set(meta.partitions), []
    for _ in range(max_polls):
        if not pending:
            break
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                pending.discard(msg.partition())
            continue
        out.append(msg.value())
    c.close()
    return out


def test_hash_by_key_places_records_as_kafkas_java_partitioner(kafka_bootstrap):
    table = TableId(f"db_{uid()}", "customers")
    opts = {"properties.bootstrap.servers": kafka_bootstrap, "partition.strategy": "hash-by-key",
            "sink.topic.partitions": "4"}
    for run in range(2):  # a second sink instance (a restart) places every key the same way
        with KafkaPipelineSink(opts, pipeline_name=f"p-{uid()}") as sink:
            sink.write(inserts(table, range(40)))
            sink.commit({"run": run})
    records = read_committed_records(kafka_bootstrap, str(table), 80)
    assert len(records) == 80
    placements: dict[bytes, set[int]] = {}
    for r in records:
        assert r.partition == java_partition(r.key, 4), r.key
        placements.setdefault(r.key, set()).add(r.partition)
    assert all(len(p) == 1 for p in placements.values())
    assert len({r.partition for r in records}) == 4  # 40 keys do spread over all partitions


def test_all_to_zero_uses_partition_zero_of_a_multi_partition_topic(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=3)
    opts = {"properties.bootstrap.servers": kafka_bootstrap, "topic": topic}
    with KafkaPipelineSink(opts, pipeline_name=f"p-{uid()}") as sink:
        sink.write(inserts(TableId("d", "t"), range(20)))
        sink.commit({"pos": 1})
    records = read_committed_records(kafka_bootstrap, topic, 20)
    assert len(records) == 20 and {r.partition for r in records} == {0}


@pytest.mark.parametrize("guarantee", ["at-least-once", "none"])
def test_position_is_stored_after_the_data(kafka_bootstrap, guarantee):
    name, offsets = f"p-{uid()}", f"offsets-{uid()}"
    table = TableId(f"db_{uid()}", "t")
    opts = {"properties.bootstrap.servers": kafka_bootstrap, "sink.delivery-guarantee": guarantee,
            "sink.offsets-topic": offsets}
    with KafkaPipelineSink(opts, pipeline_name=name) as sink:
        assert sink.stored_position() is None
        sink.write(inserts(table, range(5)))
        sink.commit({"file": "mysql-bin.000001", "pos": 5})
        sink.write(inserts(table, range(5, 8)))
        sink.commit({"file": "mysql-bin.000001", "pos": 8})
    # the offsets topic is compacted and keyed by pipeline name; another pipeline does not interfere
    with KafkaPipelineSink(opts, pipeline_name=f"other-{uid()}") as other:
        other.write(inserts(table, [100]))
        other.commit({"pos": 1})
        assert other.stored_position() == {"pos": 1}
    restarted = KafkaPipelineSink(opts, pipeline_name=name)
    assert restarted.stored_position() == {"file": "mysql-bin.000001", "pos": 8}
    assert len(read_committed_records(kafka_bootstrap, str(table), 9)) == 9
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, offsets)
    config = admin.describe_configs([res])[res].result(timeout=10)
    assert config["cleanup.policy"].value == "compact"


def test_exactly_once_zombie_is_fenced_and_restart_neither_loses_nor_duplicates(kafka_bootstrap):
    name, offsets = f"p-{uid()}", f"offsets-{uid()}"
    table = TableId(f"db_{uid()}", "t")
    opts = {"properties.bootstrap.servers": kafka_bootstrap, "sink.delivery-guarantee": "exactly-once",
            "sink.offsets-topic": offsets}
    zombie = KafkaPipelineSink(opts, pipeline_name=name)
    zombie.open()
    assert zombie.stored_position() is None
    zombie.write(inserts(table, range(0, 3)))
    zombie.commit({"pos": 3})
    zombie.write(inserts(table, range(3, 6)))
    zombie.commit({"pos": 6})
    zombie.write(inserts(table, range(6, 9)))  # this batch's transaction is never committed
    assert zombie.producer.flush(10) == 0  # the records did reach the broker

    restarted = KafkaPipelineSink(opts, pipeline_name=name)
    restarted.open()  # init_transactions fences the zombie and aborts its open transaction
    position = restarted.stored_position()
    assert position == {"pos": 6}
    restarted.write(inserts(table, range(position["pos"], 9)))
    restarted.commit({"pos": 9})

    with pytest.raises(SinkFlushError, match="commit of the transaction"):
        zombie.commit({"pos": 999})  # a fenced producer cannot commit
    restarted.close()
    zombie.close()

    ids = [e.after["id"] for r in read_committed_records(kafka_bootstrap, str(table), 9) for e in r.events]
    assert ids == list(range(9))  # each event exactly once, in order
    raw = read_uncommitted_values(kafka_bootstrap, str(table))
    assert len(raw) == 12  # the aborted batch is in the log, invisible to read_committed readers
    assert KafkaPipelineSink(opts, pipeline_name=name).stored_position() == {"pos": 9}


def test_exactly_once_background_commit_keeps_each_transaction_and_a_failed_one_stops_the_next_write(kafka_bootstrap):
    """start_commit (the runner's path): the next batch is encoded while the transaction commits
    and produced after it, so each transaction holds its own events and its position; a commit
    that fails in the background (the producer was fenced) is raised by the next write, before
    any of that batch reaches the broker."""
    name, offsets = f"p-{uid()}", f"offsets-{uid()}"
    table = TableId(f"db_{uid()}", "t")
    opts = {"properties.bootstrap.servers": kafka_bootstrap, "sink.delivery-guarantee": "exactly-once",
            "sink.offsets-topic": offsets}
    sink = KafkaPipelineSink(opts, pipeline_name=name)
    sink.open()
    for n in range(3):
        sink.write(inserts(table, range(n * 100, (n + 1) * 100)))  # encoded while batch n-1 commits
        sink.start_commit({"pos": (n + 1) * 100})
    assert sink.stored_position() == {"pos": 300}  # waits for the running commit
    assert sink.metrics["commits"] == 3
    sink.write(inserts(table, range(300, 310)))
    sink.start_commit({"pos": 310})
    assert sink.finish_commit() is True and sink.finish_commit() is False

    sink.write(inserts(table, range(310, 320)))  # left open: the next producer fences this one
    assert sink.producer.flush(10) == 0  # the records did reach the broker
    restarted = KafkaPipelineSink(opts, pipeline_name=name)
    restarted.open()
    with pytest.raises(SinkFlushError, match="commit of the transaction|cannot produce"):
        sink.start_commit({"pos": 320})  # fails in the background (or at once, if the client knows)
        sink.write(inserts(table, range(900, 910)))  # raises the commit's failure first
    # nothing of the batch after the failed commit was produced (310-319 are there, aborted)
    assert len(read_uncommitted_values(kafka_bootstrap, str(table), max_polls=2000)) == 320
    sink.close()
    assert restarted.stored_position() == {"pos": 310}
    restarted.close()
    ids = [e.after["id"] for r in read_committed_records(kafka_bootstrap, str(table), 310) for e in r.events]
    assert ids == list(range(310))


def test_exactly_once_abort_discards_the_batch(kafka_bootstrap):
    name, offsets = f"p-{uid()}", f"offsets-{uid()}"
    table = TableId(f"db_{uid()}", "t")
    opts = {"properties.bootstrap.servers": kafka_bootstrap, "sink.delivery-guarantee": "exactly-once",
            "sink.offsets-topic": offsets}
    with KafkaPipelineSink(opts, pipeline_name=name) as sink:
        sink.write(inserts(table, [1]))
        sink.commit({"pos": 1})
        sink.write(inserts(table, [2]))
        sink.abort()
        assert sink.stored_position() == {"pos": 1}
        sink.write(inserts(table, [3]))
        sink.commit({"pos": 3})
    assert [e.after["id"] for r in read_committed_records(kafka_bootstrap, str(table), 2) for e in r.events] == [1, 3]


_CRASHING_WRITER = textwrap.dedent(
    """
    import json, os, sys
    from changelake.changelog.event import DataChangeEvent, Op
    from changelake.changelog.schema import Schema, TableId
    from changelake.changelog.types import DataType, TypeRoot
    from changelake.connectors.kafka import KafkaPipelineSink

    opts, name, db = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    schema = Schema.of([("id", DataType(TypeRoot.INT, nullable=False)), ("v", DataType(TypeRoot.STRING))], ["id"])
    ev = lambda i: DataChangeEvent(TableId(db, "t"), Op.CREATE, None, {"id": i, "v": f"v{i}"}, schema)
    sink = KafkaPipelineSink(opts, pipeline_name=name)
    sink.open()
    sink.write([ev(i) for i in range(0, 50)])
    sink.commit({"pos": 50})
    sink.write([ev(i) for i in range(50, 80)])
    sink.producer.flush(10)
    print("mid-batch", flush=True)
    sys.stdin.read()  # wait to be killed
    """
)


def test_exactly_once_survives_a_killed_process(kafka_bootstrap):
    name, offsets, db = f"p-{uid()}", f"offsets-{uid()}", f"db_{uid()}"
    opts = {"properties.bootstrap.servers": kafka_bootstrap, "sink.delivery-guarantee": "exactly-once",
            "sink.offsets-topic": offsets}
    proc = subprocess.Popen([sys.executable, "-c", _CRASHING_WRITER, json.dumps(opts), name, db],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
    try:
        assert proc.stdout.readline().strip() == "mid-batch"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    with KafkaPipelineSink(opts, pipeline_name=name) as sink:
        position = sink.stored_position()
        assert position == {"pos": 50}
        table = TableId(db, "t")
        sink.write(inserts(table, range(position["pos"], 100)))
        sink.commit({"pos": 100})
    ids = [e.after["id"] for r in read_committed_records(kafka_bootstrap, f"{db}.t", 100) for e in r.events]
    assert ids == list(range(100))
