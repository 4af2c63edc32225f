"""A real instance with the daemon (``changelake dev``): ``kill -9`` of a pipeline's run worker ->
the relaunch sensor sees the process named by the run's tags gone, marks the run failed and starts a new one
-> it resumes with nothing lost and nothing twice. A run a person terminates stays stopped."""

from __future__ import annotations

import json
import os
import signal
import time

import pymysql
import pytest

from changelake.services import free_port
from dagster_dev import DagsterDev, service_env, write_pipelines

pytestmark = pytest.mark.integration

LAUNCH = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } } }"""
START_SENSOR = """mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename
  ... on PythonError { message } } }"""


def _ops_by_id(bootstrap: str, topic: str) -> dict[int, list[str]]:
    """Committed Debezium ops per primary key on ``topic`` (read_committed, from the beginning)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{time.time()}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "log_level": 3})
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        except KafkaException:  # the topic does not exist yet
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
                doc = json.loads(m.value())
                payload = doc.get("payload", doc)
                row = payload.get("after") or payload.get("before")
                ops.setdefault(int(row["id"]), []).append(payload["op"])
        return ops
    finally:
        consumer.close()


def _next_tick(server: DagsterDev, sensor: str, after: float, timeout_s: float = 150.0) -> dict:
    """The first finished tick of ``sensor`` that started after ``after`` (seconds since the epoch),
    waiting for the daemon's next evaluation (``minimum_interval_seconds``: 30)."""
    query = """query($s: SensorSelector!, $after: Float) { sensorOrError(sensorSelector: $s) { ... on Sensor {
      sensorState { ticks(afterTimestamp: $after, limit: 10) { timestamp status skipReason runIds } } } } }"""
    selector = {"repositoryLocationName": "changelake", "repositoryName": "__repository__", "sensorName": sensor}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ticks = server.graphql(query, {"s": selector, "after": after})["sensorOrError"]["sensorState"]["ticks"]
        done = sorted((t for t in ticks if t["timestamp"] > after and t["status"] != "STARTED"),
                      key=lambda t: t["timestamp"])
        if done:
            return done[0]
        time.sleep(1)
    raise AssertionError(f"sensor {sensor} did not tick within {timeout_s} s")


def _insert(mysql_params, db, ids):
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        for i in ids:
            cur.execute("INSERT INTO a VALUES (%s, %s)", (i, f"n{i}"))
    conn.close()


def test_kill_9_of_a_run_worker_is_relaunched_and_resumes_exactly_once(tmp_path, mysql_params, kafka_bootstrap,
                                                                       database_factory):
    db = database_factory()
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("CREATE TABLE b (id INT PRIMARY KEY, n INT)")
    conn.close()
    _insert(mysql_params, db, range(1, 11))
    write_pipelines(tmp_path / "pipelines", db, "7600-7610")
    env = service_env(tmp_path, mysql_params, kafka_bootstrap, tmp_path / "pipelines")
    server = DagsterDev(env, free_port(), tmp_path / "dagster-dev.log")
    job, op = f"p1_{db}", f"run_p1_{db}"
    try:
        server.wait_ready()
        launched = server.graphql(LAUNCH, {"p": {
            "selector": {"repositoryLocationName": "changelake", "repositoryName": "__repository__", "jobName": job},
            "runConfigData": {"ops": {op: {"config": {"until_caught_up": False}}}}}})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        first = launched["run"]["runId"]
        server.wait_status(first, {"STARTED"}, timeout_s=120)
        started = server.graphql(START_SENSOR, {"s": {"repositoryLocationName": "changelake",
                                                      "repositoryName": "__repository__",
                                                      "sensorName": f"{job}_relaunch_if_dead"}})["startSensor"]
        assert started["__typename"] == "Sensor", started
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_ops_by_id(kafka_bootstrap, f"{db}.a")) < 10:
            time.sleep(1)
        _insert(mysql_params, db, range(11, 21))
        time.sleep(3)

        tags = next({t["key"]: t["value"] for t in r["tags"]} for r in server.runs(job) if r["runId"] == first)
        assert tags.get("changelake/heartbeat"), tags  # the op beats into the instance
        os.kill(int(tags["changelake/pid"]), signal.SIGKILL)  # the run worker dies mid-stream
        _insert(mysql_params, db, range(21, 31))  # changes while nobody captures

        # The sensor marks the dead run failed and starts a new one (within about a minute).
        deadline = time.monotonic() + 150
        second = None
        while time.monotonic() < deadline and second is None:
            for run in server.runs(job):
                tags = {t["key"]: t["value"] for t in run["tags"]}
                if tags.get("changelake/relaunched_from") == first:
                    second = run["runId"]
            time.sleep(2)
        assert second, f"no relaunch; first run is {server.run_status(first)}"
        assert server.run_status(first) == "FAILURE"
        server.wait_status(second, {"STARTED"}, timeout_s=120)
        _insert(mysql_params, db, range(31, 41))

        deadline = time.monotonic() + 90
        ops = {}
        while time.monotonic() < deadline:
            ops = _ops_by_id(kafka_bootstrap, f"{db}.a")
            if len(ops) >= 40:
                break
            time.sleep(2)
        assert sorted(ops) == list(range(1, 41))  # nothing lost
        assert all(len(v) == 1 for v in ops.values()), {k: v for k, v in ops.items() if len(v) != 1}  # nothing twice

        # Stop means stop: terminated by a person, not relaunched at the sensor's next ticks.
        server.graphql("mutation($id: String!) { terminateRun(runId: $id) { __typename } }", {"id": second})
        assert server.wait_status(second, {"SUCCESS", "CANCELED", "FAILURE"}, timeout_s=60) in {"SUCCESS", "CANCELED"}
        stopped_at = time.time()
        tick = _next_tick(server, f"{job}_relaunch_if_dead", after=stopped_at)  # evaluated once the run had stopped
        assert tick["status"] == "SKIPPED" and not tick["runIds"], tick
        assert [r["runId"] for r in server.runs(job)][:1] == [second]
    finally:
        server.stop()
