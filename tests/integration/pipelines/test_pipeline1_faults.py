"""Issue 10 end to end: Pipeline 1 (MySQL -> Kafka, exactly-once) under faults.

* MariaDB restarted under an unbounded run: the run reconnects and a read_committed consumer sees
  every row exactly once.
* A refused change (row image not FULL) fails the run with the named error; Kafka holds exactly
  the changes before it, never a d + c with NULLs.
* Kafka broker restarted under an unbounded run: the run either rides it out or fails with the
  cause; a relaunch then completes, and a read_committed consumer sees every row exactly once.

The servers restarted here are started by the tests themselves (the session's are shared)."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pymysql
import pytest
from confluent_kafka import Consumer, TopicPartition

from changelake.connectors.mysql_cdc.errors import RowImageError
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.services import KafkaService, MariaDBService, free_port

pytestmark = pytest.mark.integration


def _records(bootstrap: str, topic: str) -> list[dict]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"faults-{random.random()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, "enable.partition.eof": True})
    out: list[dict] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msgs = consumer.consume(1000, timeout=3)
            if not msgs:
                break
            if any(m.error() for m in msgs):
                out += [json.loads(m.value()) for m in msgs if not m.error()]
                break
            out += [json.loads(m.value()) for m in msgs]
    finally:
        consumer.close()
    return [r.get("payload", r) for r in out]


def _p1(params: dict, bootstrap: str, db: str, name: str):
    return parse_pipeline({
        "pipeline": {"name": name},
        "source": {"type": "mysql", "hostname": params["host"], "port": params["port"], "username": params["user"],
                   "password": params["password"], "tables": f"{db}.\\.*", "server-id": str(random.randint(8000, 8999)),
                   "heartbeat.interval": "1s", "connect.timeout": "60s"},
        "sink": {"type": "kafka", "properties.bootstrap.servers": bootstrap, "sink.delivery-guarantee": "exactly-once"},
    }, env={})


def _sql(params: dict, db: str | None, *statements: str) -> None:
    conn = pymysql.connect(**params, database=db, autocommit=True)
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)
    finally:
        conn.close()


class _Background:
    """run_pipeline unbounded in a thread; ``stop()`` returns its stats or re-raises its error."""

    def __init__(self, defn):
        self.stop_event, self.result, self.error = threading.Event(), None, None
        self.thread = threading.Thread(target=self._run, args=(defn,), daemon=True)
        self.thread.start()

    def _run(self, defn):
        try:
            self.result = run_pipeline(defn, stop=self.stop_event, max_duration_s=300)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def stop(self):
        self.stop_event.set()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        return self.result


def _wait_for(pred, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


@pytest.fixture
def own_mariadb(tmp_path: Path):
    if os.environ.get("CHANGELAKE_TEST_MYSQL_HOST"):
        pytest.skip("needs a local MariaDB it may restart")
    server = MariaDBService(home=tmp_path / "mariadb", port=free_port())
    server.start()
    try:
        yield server, {"host": "127.0.0.1", "port": server.port, "user": server.user, "password": server.password}
    finally:
        server.stop()


def test_mariadb_restart_under_an_unbounded_pipeline_1_loses_and_repeats_nothing(own_mariadb, kafka_bootstrap):
    server, params = own_mariadb
    _sql(params, None, "CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY)", "INSERT INTO r.t VALUES (1)")
    run = _Background(_p1(params, kafka_bootstrap, "r", f"faults-{random.randint(0, 10**9)}"))
    _wait_for(lambda: len(_records(kafka_bootstrap, "r.t")) >= 1 or run.error, 60, "snapshot row never reached Kafka")
    _sql(params, "r", "INSERT INTO t VALUES (2),(3)")
    _wait_for(lambda: len(_records(kafka_bootstrap, "r.t")) >= 3 or run.error, 60, "rows before the restart missing")
    server.stop()
    time.sleep(3)
    server.start()
    _sql(params, "r", "INSERT INTO t VALUES (4)", "UPDATE t SET id = 5 WHERE id = 4")
    _wait_for(lambda: len(_records(kafka_bootstrap, "r.t")) >= 6 or run.error, 90, "rows after the restart never arrived")
    run.stop()
    assert run.error is None
    records = _records(kafka_bootstrap, "r.t")
    assert [(r["op"], (r["before"] or {}).get("id"), (r["after"] or {}).get("id")) for r in records] == [
        ("r", None, 1), ("c", None, 2), ("c", None, 3), ("c", None, 4), ("d", 4, None), ("c", None, 5),
    ]


def test_row_image_refusal_fails_pipeline_1_and_kafka_holds_no_invented_change(mysql_params, kafka_bootstrap, database_factory):
    db = database_factory()
    _sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(8))", "INSERT INTO t VALUES (1,'a')")
    defn = _p1(mysql_params, kafka_bootstrap, db, f"faults-{db}")
    run_pipeline(defn, until_caught_up=True)
    _sql(mysql_params, db, "INSERT INTO t VALUES (2,'b')", "SET SESSION binlog_row_image=MINIMAL",
         "UPDATE t SET a='A1' WHERE id=1")
    with pytest.raises(RowImageError) as err:
        run_pipeline(defn, until_caught_up=True)
    assert "binlog_row_image" in str(err.value) and f"{db}.t" in str(err.value)
    with pytest.raises(RowImageError):  # a relaunch stops at the same event: the position never passed it
        run_pipeline(defn, until_caught_up=True)
    records = _records(kafka_bootstrap, f"{db}.t")
    assert [(r["op"], r["after"]) for r in records] == [("r", {"id": 1, "a": "a"}), ("c", {"id": 2, "a": "b"})]


def test_kafka_broker_restart_under_pipeline_1_then_relaunch_gives_every_row_once(tmp_path, mysql_params, database_factory):
    if os.environ.get("CHANGELAKE_TEST_KAFKA_BOOTSTRAP"):
        pytest.skip("needs a local Kafka it may restart")
    kafka = KafkaService(home=tmp_path / "kafka", port=free_port(), controller_port=free_port())
    kafka.start()
    try:
        db = database_factory()
        _sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
        defn = _p1(mysql_params, kafka.bootstrap_servers, db, f"faults-{db}")
        run = _Background(defn)
        _wait_for(lambda: len(_records(kafka.bootstrap_servers, f"{db}.t")) >= 1 or run.error, 90, "snapshot row missing")
        kafka.stop()
        _sql(mysql_params, db, "INSERT INTO t VALUES (2),(3)")
        time.sleep(3)
        kafka.start()
        _sql(mysql_params, db, "INSERT INTO t VALUES (4)")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not run.error and len(_records(kafka.bootstrap_servers, f"{db}.t")) < 4:
            time.sleep(1)
        run.stop()
        failed_with = run.error
        print(f"kafka restart: run {'failed: ' + repr(failed_with) if failed_with else 'rode it out'}")
        if failed_with is not None:  # failing is allowed, but with a cause, and a relaunch completes
            assert str(failed_with)
            run_pipeline(defn, until_caught_up=True)
        records = _records(kafka.bootstrap_servers, f"{db}.t")
        assert sorted((r["op"], r["after"]["id"]) for r in records) == [("c", 2), ("c", 3), ("c", 4), ("r", 1)]
        assert len(records) == 4
    finally:
        kafka.stop()
