"""``changelake pipeline run`` after a crash: a run whose worker died does not block the next one."""

from __future__ import annotations

import uuid
from pathlib import Path

import dagster as dg
import pytest

from changelake.commands.pipeline import active_run_of
from changelake.pipeline.lock import PipelineLock
from assets.keys import PIPELINE_TAG
from changelake.pipeline.files import load_structure

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


def _started_run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus) -> dg.DagsterRun:
    name = load_structure(PIPELINE_FILE).name
    run = dg.DagsterRun(job_name="mysql_to_kafka", run_id=str(uuid.uuid4()), status=status, tags={PIPELINE_TAG: name})
    return instance.add_run(run)


@pytest.mark.parametrize(
    ("status", "after"),
    [(dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.FAILURE), (dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.CANCELED)],
)
def test_a_run_whose_worker_died_is_marked_and_does_not_block(instance, tmp_path, capsys, status, after):
    run = _started_run(instance, status)
    name = load_structure(PIPELINE_FILE).name
    with PipelineLock(tmp_path / "state", name, run.run_id):
        assert "is already running: run " + run.run_id in (active_run_of(PIPELINE_FILE) or "")
    # the worker is gone (its lock is free, the file still names it): the next run may start
    assert active_run_of(PIPELINE_FILE) is None
    assert instance.get_run_by_id(run.run_id).status == after
    assert f"run {run.run_id} of pipeline '{name}' died" in capsys.readouterr().err


def test_a_run_that_has_not_taken_the_lock_yet_still_blocks(instance):
    run = _started_run(instance, dg.DagsterRunStatus.STARTED)  # just started: within the lock grace
    assert run.run_id in (active_run_of(PIPELINE_FILE) or "")
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
