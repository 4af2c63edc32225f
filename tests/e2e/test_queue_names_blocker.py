"""A run queued behind another run of the same pipeline names it (tag and log line), as the CLI's
refusal does; other queued runs are left alone."""

from __future__ import annotations

import dagster as dg

from assets.keys import PIPELINE_TAG
from sensors.queue import WAITING_FOR_TAG, make_queue_sensor


@dg.op
def noop() -> None:
    pass


@dg.job
def some_job() -> None:
    noop()


def _text(entry) -> str:
    """What the run page shows for a log entry."""
    return (entry.dagster_event.message if entry.dagster_event else None) or entry.user_message


def _queued(instance: dg.DagsterInstance, tags: dict) -> dg.DagsterRun:
    """A run in the queue, as a launch from the UI stores it (with its code location's origin)."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    origin = RemoteJobOrigin(RemoteRepositoryOrigin(
        InProcessCodeLocationOrigin(LoadableTargetOrigin(python_file=__file__)), "__repository__"), "some_job")
    return instance.create_run_for_job(some_job, tags=tags, status=dg.DagsterRunStatus.QUEUED,
                                       remote_job_origin=origin)


def test_a_queued_run_names_the_run_it_waits_for():
    with dg.instance_for_test() as instance:
        running = instance.create_run_for_job(some_job, tags={PIPELINE_TAG: "p"}, status=dg.DagsterRunStatus.STARTED)
        queued = _queued(instance, {PIPELINE_TAG: "p"})
        other = _queued(instance, {PIPELINE_TAG: "q"})
        untagged = _queued(instance, {})
        sensor = make_queue_sensor()
        sensor(dg.build_sensor_context(instance=instance))
        tags = instance.get_run_by_id(queued.run_id).tags
        assert tags[WAITING_FOR_TAG] == f"{running.run_id} (STARTED)"
        logs = [_text(e) for e in instance.all_logs(queued.run_id)]
        assert any(f"pipeline 'p' is already running: run {running.run_id} (STARTED)" in m for m in logs), logs
        assert WAITING_FOR_TAG not in instance.get_run_by_id(other.run_id).tags  # nothing runs for q
        assert WAITING_FOR_TAG not in instance.get_run_by_id(untagged.run_id).tags
        # the next tick says it once only
        sensor(dg.build_sensor_context(instance=instance))
        logs = [_text(e) for e in instance.all_logs(queued.run_id) if "already running" in _text(e)]
        assert len(logs) == 1
