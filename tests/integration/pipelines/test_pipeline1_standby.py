"""Pipeline 1 high availability with a standby that waits, as Debezium's and Flink CDC's.

Two ``changelake pipeline run`` processes of one MySQL -> Kafka pipeline, each with its own state
folder (as on two machines); shared are only MySQL, Kafka and the Dagster instance. The second
runs with ``--standby``: it waits while the active run lives (it reads nothing: the active is not
fenced while changes flow), and takes over when the active dies — at once after ``kill -9`` (its
process is gone), or after the heartbeat timeout when the active is only paused (``SIGSTOP``). The
standby's ``init_transactions`` fences the old reader: a paused active that comes back (``SIGCONT``)
fails without writing. A read_committed consumer sees every change exactly once.
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
#: short beats, so the paused active is judged dead within seconds (defaults: 5 s / 45 s).
BEAT_ENV = {"CHANGELAKE_HEARTBEAT_INTERVAL_S": "1", "CHANGELAKE_HEARTBEAT_TIMEOUT_S": "8"}


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


def _wait_for(bootstrap: str, topic: str, count: int, timeout_s: float = 120) -> dict[int, list[str]]:
    deadline = time.monotonic() + timeout_s
    ops: dict[int, list[str]] = {}
    while time.monotonic() < deadline:
        ops = _ops_by_id(bootstrap, topic)
        if len(ops) >= count:
            return ops
        time.sleep(1)
    return ops


def _start(path: Path, home: Path, dagster_home: Path, bootstrap: str, *args: str) -> tuple[subprocess.Popen, Path]:
    home.mkdir(parents=True)
    env = {**os.environ, **BEAT_ENV, "CHANGELAKE_STATE_DIR": str(home), "DAGSTER_HOME": str(dagster_home),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
           "ICEBERG_CATALOG_URI": f"sqlite:///{home / 'unused.db'}", "ICEBERG_WAREHOUSE": f"file://{home / 'unused'}"}
    log = home / "run.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "pipeline", "run", str(path), *args],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def _role_of(dagster_home: Path, pid: int) -> str | None:
    """The ``changelake/role`` tag of the run executed by process ``pid`` in the shared instance."""
    import dagster as dg

    from platform_defs.standby import ROLE_TAG
    from sensors.liveness import PID_TAG

    try:
        with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
            for record in instance.get_run_records(dg.RunsFilter(tags={PID_TAG: str(pid)})):
                return record.dagster_run.tags.get(ROLE_TAG)
    except Exception:  # noqa: BLE001 - the instance may be mid-migration while a process creates it
        return None
    return None


def _wait_role(dagster_home: Path, proc: subprocess.Popen, log: Path, role: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        if _role_of(dagster_home, proc.pid) == role:
            return
        time.sleep(0.5)
    raise AssertionError(f"the run did not become {role}: {log.read_text()[-3000:]}")


def _pipeline(tmp_path: Path, mysql_params: dict, kafka_bootstrap: str, database_factory, monkeypatch) -> tuple[Path, str]:
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
        "pipeline": {"name": f"sb-{db}"},
        "source": {"type": "mysql", "hostname": mysql_params["host"], "port": str(mysql_params["port"]),
                   "username": mysql_params["user"], "password": mysql_params["password"], "tables": f"{db}.\\.*",
                   "server-id": "7920-7930"},
        "sink": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap,
                 "sink.delivery-guarantee": "exactly-once"},
    }))
    return path, db


def _stop(*procs: subprocess.Popen | None) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _exactly_once(ops: dict[int, list[str]], last: int) -> None:
    assert sorted(ops) == list(range(1, last + 1))  # no gap
    expected = {i: ["r"] if i <= 10 else ["c"] for i in range(1, last + 1)}  # snapshot rows, then binlog inserts
    assert ops == expected, {k: v for k, v in ops.items() if v != expected.get(k)}  # no duplicate


def _standby_waits(path, tmp_path, mysql_params, db, kafka_bootstrap):
    """Start the active, then the standby; changes flow while both live. Returns both."""
    shared = tmp_path / "dagster"  # the shared Dagster instance (PostgreSQL storage across machines)
    topic = f"{db}.a"
    active, active_log = _start(path, tmp_path / "machine-a", shared, kafka_bootstrap)
    assert len(_wait_for(kafka_bootstrap, topic, 10)) == 10, active_log.read_text()[-3000:]
    standby, standby_log = _start(path, tmp_path / "machine-b", shared, kafka_bootstrap, "--standby")
    _wait_role(shared, standby, standby_log, "standby")
    _insert(mysql_params, db, range(11, 31))  # while both live: only the active reads them
    assert len(_wait_for(kafka_bootstrap, topic, 30)) == 30, active_log.read_text()[-3000:]
    time.sleep(4)  # several beats and polls of the standby
    # the standby read nothing: its init_transactions would have fenced the active, which still runs
    assert active.poll() is None, active_log.read_text()[-3000:]
    assert _role_of(shared, standby.pid) == "standby", standby_log.read_text()[-3000:]
    assert "waiting while run" in standby_log.read_text(), standby_log.read_text()[-3000:]
    return (active, active_log), (standby, standby_log), shared


def test_standby_waits_then_takes_over_after_kill_9(tmp_path, mysql_params, kafka_bootstrap, database_factory,
                                                    monkeypatch):
    path, db = _pipeline(tmp_path, mysql_params, kafka_bootstrap, database_factory, monkeypatch)
    active = standby = None
    try:
        (active, active_log), (standby, standby_log), shared = _standby_waits(
            path, tmp_path, mysql_params, db, kafka_bootstrap)
        os.kill(active.pid, signal.SIGKILL)
        active.wait(30)
        _insert(mysql_params, db, range(31, 61))
        _wait_role(shared, standby, standby_log, "active")
        _insert(mysql_params, db, range(61, 71))
        ops = _wait_for(kafka_bootstrap, f"{db}.a", 70)
        assert standby.poll() is None, standby_log.read_text()[-3000:]
    finally:
        _stop(active, standby)
    assert active.returncode == -signal.SIGKILL
    _exactly_once(ops, 70)
    assert standby.returncode == 0, standby_log.read_text()[-3000:]


def test_a_paused_active_is_replaced_and_fenced_when_it_resumes(tmp_path, mysql_params, kafka_bootstrap,
                                                                 database_factory, monkeypatch):
    path, db = _pipeline(tmp_path, mysql_params, kafka_bootstrap, database_factory, monkeypatch)
    active = standby = None
    topic = f"{db}.a"
    try:
        (active, active_log), (standby, standby_log), shared = _standby_waits(
            path, tmp_path, mysql_params, db, kafka_bootstrap)
        os.kill(active.pid, signal.SIGSTOP)  # a zombie: its process lives, its heartbeat stops
        _insert(mysql_params, db, range(31, 51))
        _wait_role(shared, standby, standby_log, "active")  # after the heartbeat timeout
        assert len(_wait_for(kafka_bootstrap, topic, 50)) == 50, standby_log.read_text()[-3000:]
        os.kill(active.pid, signal.SIGCONT)
        _insert(mysql_params, db, range(51, 61))  # the old reader reads these too, and tries to commit them
        active.wait(120)  # fenced: it stops
        _insert(mysql_params, db, range(61, 71))
        ops = _wait_for(kafka_bootstrap, topic, 70)
        assert standby.poll() is None, standby_log.read_text()[-3000:]
    finally:
        _stop(active, standby)
    assert active.returncode not in (0, None), active_log.read_text()[-2000:]
    assert "fenced" in active_log.read_text().lower(), active_log.read_text()[-2000:]
    _exactly_once(ops, 70)  # the resumed zombie wrote nothing
    assert standby.returncode == 0, standby_log.read_text()[-3000:]
