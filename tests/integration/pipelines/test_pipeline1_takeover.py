"""Pipeline 1 high availability by fencing, as Debezium and Flink CDC: one binlog reader per server.

Two ``changelake pipeline run`` processes of the same MySQL -> Kafka pipeline, each with its own
state folder (as on two machines). The second one takes over while the first is capturing:
its ``init_transactions`` fences the first (whose open transaction is aborted), then it reads the
last committed position and resumes there. A read_committed consumer sees every change exactly
once: no duplicate, no gap.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pymysql
import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def _ops_by_id(bootstrap: str, topic: str) -> dict[int, list[str]]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "log_level": 3})
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        except KafkaException:
            return {}
        consumer.assign([TopicPartition(topic, 0, low)])
        ops: dict[int, list[str]] = {}
        deadline = time.monotonic() + 30
        pos = low
        while pos < high - 1 and time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=1):
                pos = max(pos, m.offset())
                if m.error() or m.value() is None:
                    continue
                payload = json.loads(m.value())
                row = payload.get("after") or payload.get("before")
                ops.setdefault(int(row["id"]), []).append(payload["op"])
        return ops
    finally:
        consumer.close()


def _insert(mysql_params: dict, db: str, ids: range) -> None:
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        for i in ids:
            cur.execute("INSERT INTO a VALUES (%s, %s)", (i, f"n{i}"))
            time.sleep(0.02)  # a steady trickle: the takeover lands between transactions
    conn.close()


def _start(path: Path, home: Path, bootstrap: str) -> tuple[subprocess.Popen, Path]:
    home.mkdir(parents=True)
    env = {**os.environ, "CHANGELAKE_STATE_DIR": str(home), "DAGSTER_HOME": str(home / "dagster"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
           # the code location's lake resources read the environment; this pipeline writes no lake
           "ICEBERG_CATALOG_URI": f"sqlite:///{home / 'unused.db'}", "ICEBERG_WAREHOUSE": f"file://{home / 'unused'}"}
    log = home / "run.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "pipeline", "run", str(path)], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def _wait_until_running(dagster_home: Path, proc: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    """Until the run of ``proc`` (in its own Dagster instance) has its first heartbeat: its op runs."""
    import dagster as dg

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:  # the process creates its instance meanwhile (its storage may be mid-migration)
            with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
                records = instance.get_run_records(limit=1)
                if records and records[0].dagster_run.tags.get("changelake/heartbeat"):
                    return
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.5)
    raise AssertionError(f"the standby's run did not start: {log.read_text()[-3000:]}")


def _wait_for(bootstrap: str, topic: str, count: int, timeout_s: float = 120) -> dict[int, list[str]]:
    deadline = time.monotonic() + timeout_s
    ops: dict[int, list[str]] = {}
    while time.monotonic() < deadline:
        ops = _ops_by_id(bootstrap, topic)
        if len(ops) >= count:
            return ops
        time.sleep(1)
    return ops


def test_a_standby_takes_over_by_fencing_with_no_duplicate_and_no_gap(tmp_path, mysql_params, kafka_bootstrap,
                                                                      database_factory, monkeypatch):
    for key, value in (("MYSQL_HOST", mysql_params["host"]), ("MYSQL_PORT", str(mysql_params["port"])),
                       ("MYSQL_USER", mysql_params["user"]), ("MYSQL_PASSWORD", mysql_params["password"])):
        monkeypatch.setenv(key, value)
    db = database_factory()
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20))")
    conn.close()
    _insert(mysql_params, db, range(1, 11))
    path = tmp_path / "p1.yaml"
    path.write_text(yaml.safe_dump({
        "pipeline": {"name": f"ha-{db}"},
        "source": {"type": "mysql", "hostname": mysql_params["host"], "port": str(mysql_params["port"]),
                   "username": mysql_params["user"], "password": mysql_params["password"], "tables": f"{db}.\\.*",
                   "server-id": "7900-7910"},
        "sink": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap,
                 "sink.delivery-guarantee": "exactly-once"},
    }))
    topic = f"{db}.a"
    active, active_log = _start(path, tmp_path / "machine-a", kafka_bootstrap)
    standby = None
    try:
        assert len(_wait_for(kafka_bootstrap, topic, 10)) == 10, active_log.read_text()[-3000:]
        _insert(mysql_params, db, range(11, 31))  # while A captures
        standby, standby_log = _start(path, tmp_path / "machine-b", kafka_bootstrap)  # the standby takes over
        _wait_until_running(tmp_path / "machine-b" / "dagster", standby, standby_log)
        time.sleep(5)  # B's init_transactions has fenced A; A notices at its next transaction
        _insert(mysql_params, db, range(31, 71))  # both read these from the binlog; only B can commit them
        active.wait(120)  # fenced: the old reader stops
        _insert(mysql_params, db, range(71, 81))  # only B captures now
        ops = _wait_for(kafka_bootstrap, topic, 80)
        assert standby.poll() is None, standby_log.read_text()[-3000:]
    finally:
        for proc in (active, standby):
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
    assert active.returncode != 0, active_log.read_text()[-2000:]  # A failed: fenced
    assert "fenced" in active_log.read_text().lower(), active_log.read_text()[-2000:]
    assert sorted(ops) == list(range(1, 81)), active_log.read_text()[-2000:]  # no gap
    expected = {i: ["r"] if i <= 10 else ["c"] for i in range(1, 81)}  # snapshot rows, then binlog inserts
    assert ops == expected, {k: v for k, v in ops.items() if v != expected.get(k)}  # no duplicate
    assert standby.returncode == 0, standby_log.read_text()[-3000:]
