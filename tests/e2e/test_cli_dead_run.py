"""``changelake pipeline run`` after a crash: a run whose worker died does not block the next one."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest

from cli.pipeline import active_run_of
from assets.keys import PIPELINE_TAG
from changelake.pipeline.files import load_structure
from sensors.liveness import HEARTBEAT_TIMEOUT_S, HOST_TAG, PID_TAG, heartbeat_tags

PIPELINE_FILE = Path(__file__).resolve().parents[2] / "pipelines" / "mysql-to-kafka.yaml"


@pytest.fixture
def instance(tmp_path, monkeypatch):
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as inst:
        yield inst


def _started_run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus, tags: dict | None = None) -> dg.DagsterRun:
    name = load_structure(PIPELINE_FILE).name
    run = dg.DagsterRun(job_name="mysql_to_kafka", run_id=str(uuid.uuid4()), status=status,
                        tags={PIPELINE_TAG: name, **(tags or {})})
    return instance.add_run(run)


@pytest.mark.parametrize(
    ("status", "after"),
    [(dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.FAILURE), (dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.CANCELED),
     (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.FAILURE)],
)
def test_a_run_whose_worker_died_is_marked_and_does_not_block(instance, tmp_path, capsys, status, after):
    """Its process is gone (kill -9 at any moment, start-up included): the next run starts at once."""
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    run = _started_run(instance, status, {HOST_TAG: socket.gethostname(), PID_TAG: str(worker.pid)})
    name = load_structure(PIPELINE_FILE).name
    try:
        assert "is already running: run " + run.run_id in (active_run_of(PIPELINE_FILE) or "")
    finally:
        worker.kill()
        worker.wait()
    assert active_run_of(PIPELINE_FILE) is None
    assert instance.get_run_by_id(run.run_id).status == after
    assert f"run {run.run_id} of pipeline '{name}' died" in capsys.readouterr().err


def test_a_run_that_has_not_beaten_yet_still_blocks(instance):
    run = _started_run(instance, dg.DagsterRunStatus.STARTED)  # just started elsewhere: within the heartbeat timeout
    assert run.run_id in (active_run_of(PIPELINE_FILE) or "")
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED


def test_a_run_whose_heartbeat_stopped_does_not_block(instance):
    run = _started_run(instance, dg.DagsterRunStatus.STARTED,
                       {**heartbeat_tags(time.time() - HEARTBEAT_TIMEOUT_S - 1), HOST_TAG: "elsewhere", PID_TAG: "1"})
    assert active_run_of(PIPELINE_FILE) is None
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE


def test_restart_at_once_after_kill_9_during_start_up(tmp_path):
    """A real ``changelake pipeline run``, killed with SIGKILL as soon as its run exists (start-up:
    no op has run, nothing has beaten), is followed at once by a second one that is not refused."""
    import os
    import signal

    import yaml

    from changelake.services import free_port

    root = Path(__file__).resolve().parents[2]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({
        "pipeline": {"name": "restart-at-once"},
        "source": {"type": "kafka", "properties.bootstrap.servers": f"127.0.0.1:{free_port()}", "topic": "t",
                   "value.format": "debezium-json"},
        "transform": [{"source-table": "\\.*.\\.*", "projection": "\\*", "primary-keys": "id"}],
        "sink": {"type": "iceberg", "catalog.properties.uri": "${ICEBERG_CATALOG_URI}",
                 "catalog.properties.warehouse": "${ICEBERG_WAREHOUSE}"},
    }))
    home = tmp_path / "state" / "dagster"
    env = {**os.environ, "CHANGELAKE_STATE_DIR": str(tmp_path / "state"), "DAGSTER_HOME": str(home),
           "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": "1",
           "MYSQL_USER": "u", "MYSQL_PASSWORD": "p", "ICEBERG_CATALOG_URI": f"sqlite:///{tmp_path}/c.db",
           "ICEBERG_WAREHOUSE": f"file://{tmp_path}/wh"}
    command = [sys.executable, "-m", "cli", "pipeline", "run", str(path), "--max-duration", "30"]
    first = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        run = None
        while time.monotonic() < deadline and run is None and first.poll() is None:
            try:  # the command creates its instance meanwhile (its storage may be mid-migration)
                with dg.DagsterInstance.from_config(str(home)) as inst:
                    records = inst.get_run_records(limit=1)
                    run = records[0].dagster_run if records else None
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.05)
        assert run is not None, "the first command created no run"
        os.kill(first.pid, signal.SIGKILL)  # during start-up
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    second = subprocess.run(command[:-2] + ["--max-duration", "1"], cwd=root, env=env, capture_output=True, text=True,
                            timeout=300)
    assert "already running" not in second.stderr, second.stderr
    assert f"marked run {run.run_id}" in second.stderr, second.stderr
