"""A queued run names the run it waits for, as ``changelake pipeline run`` does on the command
line: the sensor ``queued_runs_name_their_blocker`` tags each queued run of a pipeline with
``changelake/waiting_for`` (the active run of the same pipeline, by id and status) and writes the
same sentence once into the queued run's log, so the run page says why it has not started."""

from __future__ import annotations

import dagster as dg

from assets.keys import PIPELINE_TAG

__all__ = ["WAITING_FOR_TAG", "QUEUE_SENSOR", "blocking_message", "make_queue_sensor"]

#: run tag set on a queued run: the run of the same pipeline it waits for
WAITING_FOR_TAG = "changelake/waiting_for"
QUEUE_SENSOR = "queued_runs_name_their_blocker"

_ACTIVE = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING,
           dg.DagsterRunStatus.NOT_STARTED]


def blocking_message(pipeline: str, blocker: dg.DagsterRun) -> str:
    """The sentence the CLI prints for a second launch, for the queue."""
    return (f"queued: pipeline '{pipeline}' is already running: run {blocker.run_id} ({blocker.status.value}); "
            "this run starts when it ends (one run per pipeline; terminate it to start this one now)")


def name_blockers(instance: dg.DagsterInstance) -> list[str]:
    """Tag (and log into) every queued pipeline run with the run blocking it; returns the queued
    run ids newly tagged."""
    tagged = []
    queued = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]), limit=100)
    for run in queued:
        pipeline = run.tags.get(PIPELINE_TAG)
        if not pipeline:
            continue
        active = [r for r in instance.get_runs(dg.RunsFilter(tags={PIPELINE_TAG: pipeline}, statuses=_ACTIVE), limit=5)
                  if r.run_id != run.run_id]
        if not active:
            continue
        blocker = active[0]
        value = f"{blocker.run_id} ({blocker.status.value})"
        if run.tags.get(WAITING_FOR_TAG, "").startswith(blocker.run_id):
            continue
        instance.add_run_tags(run.run_id, {WAITING_FOR_TAG: value})
        instance.report_engine_event(blocking_message(pipeline, blocker), dagster_run=run)
        tagged.append(run.run_id)
    return tagged


def make_queue_sensor() -> dg.SensorDefinition:
    @dg.sensor(
        name=QUEUE_SENSOR,
        minimum_interval_seconds=5,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "Names, on each queued pipeline run, the run of the same pipeline it waits for (tag "
            f"{WAITING_FOR_TAG} and a line in its log), as `changelake pipeline run` does."
        ),
    )
    def queued_runs_name_their_blocker(context: dg.SensorEvaluationContext):
        tagged = name_blockers(context.instance)
        return dg.SkipReason(f"named the blocking run of {len(tagged)} queued run(s)" if tagged else "no queued run waits")

    return queued_runs_name_their_blocker
