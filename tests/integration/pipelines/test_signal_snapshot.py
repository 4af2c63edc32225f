"""Debezium's ``execute-snapshot`` signal (``signal.data.collection``) on real MariaDB -> Kafka ->
Iceberg, with writes going on: the table is snapshotted again at the signal's binlog point, exactly
once across ``kill -9``s of Pipeline 1 during that snapshot, and the lake equals MariaDB after."""

from __future__ import annotations

import json
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
from confluent_kafka import Consumer, TopicPartition

from changelake.changelog import TableId
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import verify_lake_table

pytestmark = pytest.mark.integration

CHILD = textwrap.dedent(
    """
    import json, sys
    from changelake.pipeline.definition import parse_pipeline
    from changelake.pipeline.runner import run_pipeline
    defn = parse_pipeline(json.loads(sys.argv[1]), env={})
    run_pipeline(defn, until_caught_up=True, batch_size=200,
                 on_batch=lambda b: print("batch", (b["position"] or {}).get("phase"), flush=True))
    """
)


def _snapshot_reads(bootstrap: str, topic: str) -> Counter:
    """Committed ``r`` records per key id of ``topic``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"sig-{random.random()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    reads: Counter = Counter()
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
                doc = json.loads(m.value())
                if doc["op"] == "r":
                    reads[doc["after"]["id"]] += 1
            if eof:
                break
    finally:
        consumer.close()
    return reads


@pytest.mark.parametrize("lake", ["iceberg"])
def test_execute_snapshot_signal_exactly_once_across_kill_9_with_writes_going_on(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap, pipeline_pair, lake
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, n INT)", "INSERT INTO t SELECT seq, 0 FROM seq_1_to_3000",
               "CREATE TABLE sig (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048))")
    p1, p2 = pipeline_pair(db, ["t"])
    raw = {"pipeline": p1.pipeline, "sink": p1.sink,
           "source": {**p1.source, "tables": f"{db}.t", "signal.data.collection": f"{db}.sig"}}
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)  # initial snapshot: one r per row

    stop = threading.Event()

    def writes() -> None:  # ids 1..1500 change all along; 2001..3000 are never touched
        conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
        i = 0
        try:
            with conn.cursor() as cur:
                while not stop.is_set():
                    i += 1
                    cur.execute("UPDATE t SET n = n + 1 WHERE id = %s", (1 + i % 1000,))
                    if i % 5 == 0:
                        cur.execute("DELETE FROM t WHERE id = %s", (1000 + i // 5,))
                    if i % 7 == 0:
                        cur.execute("INSERT INTO t VALUES (%s, 1)", (10_000 + i,))
                    stop.wait(0.005)
        finally:
            conn.close()

    writer = threading.Thread(target=writes, daemon=True)
    writer.start()
    try:
        mysql_exec(db, "INSERT INTO sig VALUES ('ad-hoc-1', 'execute-snapshot', "
                       f"'{{\"data-collections\": [\"{db}.t\"], \"type\": \"incremental\"}}')")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        kills = 0
        for _ in range(3):  # kill -9 on a committed batch of the signalled snapshot
            child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(raw)], stdout=subprocess.PIPE,
                                     text=True, env=env)
            assert child.stdout is not None
            # (with writes going on the child never catches up: it is always killed)
            for n, line in enumerate(child.stdout):
                if line.startswith("batch snapshot") or n >= 40:
                    child.send_signal(signal.SIGKILL)
                    kills += line.startswith("batch snapshot")
                    break
            child.wait(timeout=60)
        assert kills >= 1
        run_pipeline(parse_pipeline(raw, env={}), max_duration_s=3.0, batch_size=200)  # still writing
    finally:
        stop.set()
        writer.join(timeout=10)
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)

    reads = _snapshot_reads(kafka_bootstrap, f"{db}.t")
    stable = range(2001, 3001)
    assert all(reads[i] == 2 for i in stable), Counter(reads[i] for i in stable)  # initial + signal, once each
    assert max(reads.values()) == 2
    run_pipeline(p2, until_caught_up=True)
    result = verify_lake_table(p2, TableId(db, "t"), mysql=mysql_params)
    assert result.passed, result.metadata()
