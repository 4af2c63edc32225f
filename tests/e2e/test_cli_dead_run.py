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

from changelake.commands.pipeline import active_run_of
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
