"""Pipeline 1 with ``scan.incremental.snapshot.enabled``, killed with SIGKILL in the middle of the
chunked snapshot (twice, with writes on the table in between and during it), then restarted: a
read_committed consumer sees every row snapshotted once, and the changelog on Kafka folded by key
equals the MySQL table."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pymysql
import pytest
from confluent_kafka import Consumer, TopicPartition

from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline

pytestmark = pytest.mark.integration

CHILD = textwrap.dedent(
    """
    import json, sys
    from changelake.pipeline.definition import parse_pipeline
    from changelake.pipeline.runner import run_pipeline
    defn = parse_pipeline(json.loads(sys.argv[1]), env={})
    run_pipeline(defn, until_caught_up=True, batch_size=300,
                 on_batch=lambda b: print("batch", b["position"].get("phase"), flush=True))
    """
)


def _records(bootstrap: str, topic: str) -> list[dict]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"inc-{random.random()}", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    out: list[dict] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        done = False
        while not done:
            msgs = consumer.consume(1000, timeout=5)
            if not msgs:
                break
            for m in msgs:
                if m.error():
                    done = True
                    continue
                if m.value() is not None:
                    doc = json.loads(m.value())
                    out.append(doc.get("payload", doc))
    finally:
        consumer.close()
    return out


def _mysql_rows(mysql_params: dict, db: str) -> dict[int, int]:
    conn = pymysql.connect(host=mysql_params["host"], port=mysql_params["port"], user=mysql_params["user"],
                           password=mysql_params["password"], database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, v FROM t")
            return {int(i): int(v) for i, v in cur.fetchall()}
    finally:
        conn.close()


def test_sigkill_mid_incremental_snapshot_then_restart_is_exact(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, pad CHAR(200))",
               "INSERT INTO t SELECT seq, 0, 'x' FROM seq_1_to_6000")
    base = random.randint(7000, 7900)
    raw = {
        "pipeline": {"name": f"inc-{db}-p1"},
        "source": {
            "type": "mysql", "hostname": mysql_params["host"], "port": mysql_params["port"],
            "username": mysql_params["user"], "password": mysql_params["password"],
            "tables": f"{db}.\\.*", "server-id": f"{base}-{base + 2}",
            "scan.incremental.snapshot.enabled": "true", "scan.incremental.snapshot.chunk.size": "500",
        },
        "sink": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap, "sink.delivery-guarantee": "exactly-once"},
    }
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for round_ in range(2):  # kill twice, each time after at least one committed snapshot batch
        child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(raw)], stdout=subprocess.PIPE, text=True, env=env)
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("batch snapshot"), line
        # writes while the snapshot runs (they land in chunks still to read, already read, or in back-fills)
        mysql_exec(db, f"UPDATE t SET v = v + 1 WHERE id % {5 + round_} = 0", f"DELETE FROM t WHERE id % {41 + round_} = 0",
                   f"INSERT INTO t SELECT 10000 * {round_ + 1} + seq, 7, 'n' FROM seq_1_to_100",
                   f"UPDATE t SET id = id + 50000 WHERE id % {97 + round_} = 0")
        time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    mysql_exec(db, "UPDATE t SET v = v + 100 WHERE id % 11 = 0")
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True, batch_size=300)

    records = _records(kafka_bootstrap, f"{db}.t")
    reads = [r["after"]["id"] for r in records if r["op"] == "r"]
    assert len(reads) == len(set(reads)), "a row snapshotted twice"
    state: dict[int, int] = {}
    for r in records:  # fold by key; an exact changelog never inserts a present key or changes an absent one
        if r.get("before") is not None:
            assert r["before"]["id"] in state, r
            del state[r["before"]["id"]]
        if r.get("after") is not None:
            assert r["after"]["id"] not in state, r
            state[r["after"]["id"]] = r["after"]["v"]
    assert state == _mysql_rows(mysql_params, db)


def test_incremental_snapshot_straight_to_the_lake_resumes_from_the_lake_checkpoint(
    database_factory, mysql_exec, mysql_params, direct_pipeline
):
    """The chunk marks travel in the lake's checkpoint property (no Kafka) and survive a stop
    in the middle of the snapshot."""
    from changelake.changelog import TableId
    from changelake.pipeline.verify import verify_lake_table

    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, pad CHAR(20))",
               "INSERT INTO t SELECT seq, 0, 'x' FROM seq_1_to_3000")
    base = direct_pipeline(db)
    raw = {"pipeline": base.pipeline, "sink": base.sink,
           "source": {**base.source, "scan.incremental.snapshot.enabled": "true",
                      "scan.incremental.snapshot.chunk.size": "400", "server-id": f"{base.source['server-id']}-{int(base.source['server-id']) + 1}"}}
    defn = parse_pipeline(raw, env={})
    first = run_pipeline(defn, max_duration_s=0.01, batch_size=500)  # stops after the first batch
    assert 0 < sum(first.tables.values()) < 3000
    mysql_exec(db, "UPDATE t SET v = 1 WHERE id % 4 = 0", "DELETE FROM t WHERE id % 9 = 0",
               "INSERT INTO t SELECT 5000 + seq, 2, 'n' FROM seq_1_to_20")
    run_pipeline(defn, until_caught_up=True, batch_size=500)
    assert verify_lake_table(defn, TableId(db, "t"), mysql=mysql_params).passed
