"""Debezium's ``stop-snapshot``, Kafka signaling channel and ``additional-conditions`` on real
MariaDB -> Kafka: a stopped ad-hoc snapshot emits no more rows for the stopped table and a restart
(after ``kill -9``) does not resume it while the other table's snapshot finishes exactly once; a
Kafka ``execute-snapshot`` with a filter snapshots exactly the matching rows, exactly once across
``kill -9``s, and is not replayed by a later run; a malicious filter is refused and never runs."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter

import pymysql
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline

pytestmark = pytest.mark.integration

CHILD = textwrap.dedent(
    """
    import json, sys
    from changelake.pipeline.definition import parse_pipeline
    from changelake.pipeline.runner import run_pipeline
    defn = parse_pipeline(json.loads(sys.argv[1]), env={})
    def report(b):
        p = b["position"] or {}
        print("batch", json.dumps({"phase": p.get("phase"), "tables": (p.get("snapshot") or {}).get("tables"),
                                   "signal_offset": p.get("signal_offset")}), flush=True)
    run_pipeline(defn, until_caught_up=True, batch_size=100, on_batch=report)
    """
)


def _records(bootstrap: str, topic: str) -> list[dict]:
    """Every committed record of partition 0 of ``topic``, decoded (debezium-json)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"sig-{random.random()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    out: list[dict] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            msgs = consumer.consume(1000, timeout=5)
            if not msgs:
                break
            eof = False
            for m in msgs:
                if m.error():
                    eof = True
                    continue
                out.append(json.loads(m.value()))
            if eof:
                break
    finally:
        consumer.close()
    return out


def _reads(records: list[dict]) -> Counter:
    return Counter(r["after"]["id"] for r in records if r["op"] == "r")


def _run_child(raw: dict, kill_when) -> bool:
    """Run Pipeline 1 in a child process; ``kill -9`` it at the first batch line ``kill_when``
    accepts (True if it was killed, False if it ended by itself)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(raw)], stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    killed = False
    for line in child.stdout:
        if line.startswith("batch ") and kill_when(json.loads(line[6:])):
            child.send_signal(signal.SIGKILL)
            killed = True
            break
    child.wait(timeout=120)
    if not killed:
        assert child.returncode == 0
    return killed


def _source(p1, mysql_params, db: str, **extra) -> dict:
    return {"pipeline": p1.pipeline, "sink": p1.sink,
            "source": {**p1.source, "scan.startup.mode": "latest-offset", **extra}}


SIGNAL_TABLE = "CREATE TABLE sig (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048))"


@pytest.mark.parametrize("lake", ["iceberg"])
def test_stop_snapshot_stops_the_named_table_and_a_restart_does_not_resume_it(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap, pipeline_pair, lake
):
    db = database_factory()
    n = 60_000
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY, v INT)", f"INSERT INTO a SELECT seq, 0 FROM seq_1_to_{n}",
               "CREATE TABLE b (id INT PRIMARY KEY, v INT)", "INSERT INTO b SELECT seq, 0 FROM seq_1_to_3000",
               "CREATE TABLE c (id INT PRIMARY KEY, v INT)", SIGNAL_TABLE)
    p1, _ = pipeline_pair(db, ["a", "b", "c"])
    raw = _source(p1, mysql_params, db, **{"tables": f"{db}.a,{db}.b,{db}.c", "signal.data.collection": f"{db}.sig",
                                           "scan.incremental.snapshot.chunk.size": "50"})
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)  # latest-offset: no snapshot, position stored
    # the snapshot of a and b, and right behind it in the binlog its stop-snapshot for a
    mysql_exec(db, "INSERT INTO sig VALUES ('snap-1', 'execute-snapshot', "
                   f"'{{\"data-collections\": [\"{db}.a\", \"{db}.b\"], \"type\": \"incremental\"}}')",
               "INSERT INTO c VALUES (1, 1)",
               "INSERT INTO sig VALUES ('stop-1', 'stop-snapshot', "
               f"'{{\"data-collections\": [\"{db}.a\"], \"type\": \"incremental\"}}')",
               "INSERT INTO c VALUES (2, 2)")
    seen: list[dict] = []

    def kill_in_b(batch: dict) -> bool:  # kill -9 once the snapshot reads b only (a is stopped)
        seen.append(batch)
        return batch["phase"] == "snapshot" and batch["tables"] == [f"{db}.b"]

    killed = _run_child(raw, kill_in_b)
    assert any(b["phase"] == "snapshot" and b["tables"] and b["tables"][0] == f"{db}.a" for b in seen)
    assert killed, seen[-3:]
    mysql_exec(db, "INSERT INTO c VALUES (3, 3)", "UPDATE a SET v = 1 WHERE id = 1")
    assert not _run_child(raw, lambda _b: False)  # resumes b only, then streams
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)  # and again: nothing more is snapshotted

    a_reads, b_reads = _reads(_records(kafka_bootstrap, f"{db}.a")), _reads(_records(kafka_bootstrap, f"{db}.b"))
    assert sum(a_reads.values()) < n
    assert set(a_reads.values()) <= {1}  # rows emitted before the stop stay, once
    assert sorted(a_reads) == list(range(1, len(a_reads) + 1))  # a prefix in key order: nothing after the stop
    assert b_reads == Counter({i: 1 for i in range(1, 3001)})  # b: exactly once across the kill -9
    c = _records(kafka_bootstrap, f"{db}.c")
    assert [(r["op"], r["after"]["id"]) for r in c] == [("c", 1), ("c", 2), ("c", 3)]  # streaming went on
    a_changes = [r for r in _records(kafka_bootstrap, f"{db}.a") if r["op"] != "r"]
    assert [(r["op"], r["after"]["id"], r["after"]["v"]) for r in a_changes] == [("u", 1, 1)]


def _produce(bootstrap: str, topic: str, key: str, value: dict | str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=key.encode(), value=(value if isinstance(value, str) else json.dumps(value)).encode())
    assert producer.flush(30) == 0


@pytest.mark.parametrize("lake", ["iceberg"])
def test_kafka_signal_with_additional_conditions_exactly_once_across_kill_9(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap, pipeline_pair, lake, caplog
):
    db = database_factory()
    n = 20_000
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, n INT, m INT)",
               f"INSERT INTO t SELECT seq, seq % 10, 0 FROM seq_1_to_{n}", "CREATE TABLE canary (id INT PRIMARY KEY)")
    p1, _ = pipeline_pair(db, ["t"])
    name = p1.name
    topic = f"{name}-signal"  # signal.kafka.topic's default: <pipeline name>-signal
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    raw = _source(p1, mysql_params, db, **{"tables": f"{db}.t", "signal.enabled.channels": "source,kafka",
                                           "signal.kafka.bootstrap.servers": kafka_bootstrap,
                                           "scan.incremental.snapshot.chunk.size": "500"})
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)  # latest-offset: no snapshot

    # refused: statements, subqueries and side effects in a filter; a record for another pipeline
    for i, bad in enumerate([f"id > 0; DROP TABLE {db}.canary", "SLEEP(30) = 0 OR id > 0",
                             f"id IN (SELECT id FROM {db}.canary)", "id > 0 -- x"]):
        _produce(kafka_bootstrap, topic, name, {"type": "execute-snapshot", "data": {
            "data-collections": [f"{db}.t"], "type": "incremental",
            "additional-conditions": [{"data-collection": f"{db}.t", "filter": bad}]}})
    _produce(kafka_bootstrap, topic, "another-pipeline", {"type": "execute-snapshot", "data": {
        "data-collections": [f"{db}.t"], "type": "incremental"}})
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, key=name.encode(), value=None)  # a tombstone (offset 5)
    assert producer.flush(30) == 0
    _produce(kafka_bootstrap, topic, name, {"type": "log", "data": {"message": "signal at {}"}})  # offset 6
    with caplog.at_level(logging.ERROR, logger="changelake.connectors.mysql_cdc.source"), \
            caplog.at_level(logging.INFO, logger="changelake.connectors.mysql_cdc.snapshot"):
        run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)
    refused = [r.getMessage() for r in caplog.records if "additional-conditions filter" in r.getMessage()]
    assert len(refused) == 4, refused
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("offset 4" in m and "'another-pipeline'" in m and repr(name) in m for m in infos), infos
    assert any("offset 5" in m and "tombstone" in m for m in infos), infos
    assert any(m.startswith("signal 'kafka:6': signal at {") and '"file"' in m for m in infos), infos
    assert "'kafka:0'" in refused[0] and f"{db}.t" in refused[0] and "2 statements" in refused[0]
    assert "SLEEP" in refused[1] and "subquery" in refused[2] and "comment" in refused[3]
    assert _reads(_records(kafka_bootstrap, f"{db}.t")) == Counter()  # nothing was snapshotted
    with pymysql.connect(**mysql_params, database=db) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM canary")  # still there
        assert cur.fetchone() == (0,)

    stop = threading.Event()

    def writes() -> None:  # changes that do not move a row in or out of the filter
        conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
        i = 0
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    i += 1
                    cur.execute("UPDATE t SET m = m + 1 WHERE id = %s", (1 + (i * 7919) % n,))
                    stop.wait(0.005)
        finally:
            conn.close()

    writer = threading.Thread(target=writes, daemon=True)
    writer.start()
    try:
        _produce(kafka_bootstrap, topic, name, {"type": "execute-snapshot", "data": {
            "data-collections": [f"{db}.t"], "type": "incremental",
            "additional-conditions": [{"data-collection": f"{db}.t", "filter": f"id > {n - 5000} OR n = 7"}]}})
        kills = 0
        for _ in range(3):  # kill -9 on a committed batch of the signalled snapshot
            kills += _run_child(raw, lambda b: b["phase"] == "snapshot")
        assert kills >= 2
    finally:
        stop.set()
        writer.join(timeout=10)
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)  # the signal is not replayed

    reads = _reads(_records(kafka_bootstrap, f"{db}.t"))
    expected = {i for i in range(1, n + 1) if i > n - 5000 or i % 10 == 7}
    assert set(reads) == expected  # only the matching rows
    assert set(reads.values()) == {1}  # each exactly once across the kill -9s and the later runs


@pytest.mark.parametrize("lake", ["iceberg"])
def test_signal_table_snapshot_with_a_filter_stopped_from_kafka(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap, pipeline_pair, lake
):
    """The other way round: the signal table starts a filtered snapshot (with the incremental
    snapshot option on, which a signalled snapshot does not use), a Kafka ``stop-snapshot`` naming
    no table stops it; streaming goes on and later runs do not resume it."""
    db = database_factory()
    n = 50_000
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, n INT)", f"INSERT INTO t SELECT seq, seq % 10 FROM seq_1_to_{n}",
               SIGNAL_TABLE)
    p1, _ = pipeline_pair(db, ["t"])
    topic = f"{p1.name}-signal"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    raw = _source(p1, mysql_params, db, **{"tables": f"{db}.t", "signal.data.collection": f"{db}.sig",
                                           "signal.enabled.channels": "kafka,source",
                                           "signal.kafka.bootstrap.servers": kafka_bootstrap,
                                           "scan.incremental.snapshot.enabled": "true",
                                           "scan.incremental.snapshot.chunk.size": "20"})
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)  # latest-offset: no snapshot
    mysql_exec(db, "INSERT INTO sig VALUES ('snap-1', 'execute-snapshot', "
                   f"'{{\"data-collections\": [\"{db}.t\"], \"additional-conditions\": "
                   f"[{{\"data-collection\": \"{db}.t\", \"filter\": \"n = 3\"}}]}}')")
    phases: list[str] = []

    def on_batch(batch: dict) -> None:
        phase = (batch["position"] or {}).get("phase")
        if phase == "snapshot" and "snapshot" not in phases:
            _produce(kafka_bootstrap, topic, p1.name, {"type": "stop-snapshot", "data": {"type": "incremental"}})
        phases.append(phase)

    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True, batch_size=100, on_batch=on_batch)
    assert "snapshot" in phases
    mysql_exec(db, "INSERT INTO t VALUES (0, 3)")
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)  # streams; nothing is snapshotted again

    records = _records(kafka_bootstrap, f"{db}.t")
    reads = _reads(records)
    matching = [i for i in range(1, n + 1) if i % 10 == 3]
    assert 0 < len(reads) < len(matching)  # stopped part-way
    assert sorted(reads) == matching[:len(reads)] and set(reads.values()) == {1}  # filtered, in key order, once
    assert [(r["op"], r["after"]["id"]) for r in records if r["op"] != "r"] == [("c", 0)]
