"""Sensors and schedules around the pipelines.

* ``<job>_relaunch_if_dead``: brings back the long-running run of a pipeline when it *died* (it
  failed, or its run worker vanished — its heartbeat in the instance stopped, or the process it
  names is gone, :mod:`sensors.liveness`); a run a person terminated stays stopped, and a run that
  finished is left alone. The new run resumes from the stored position.
* ``<pipeline>_lake_on_kafka_lag``: materializes the lake tables whose topics hold records the lake
  has not absorbed (only those tables), unless a run of that pipeline is active.
* ``<job>_every_5_minutes``: a bounded ("until caught up") run of Pipeline 1 (MySQL -> Kafka).
* ``lake_freshness_every_5_minutes``: evaluates the lake tables' freshness checks.
* ``<pipeline>_lake_checks_after_commits``: runs the checks of the lake tables that the
  long-running op of a Kafka -> Iceberg pipeline committed to (asset runs evaluate their own).
"""


import json
from pathlib import Path

import dagster as dg

from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.lake_tables import lake_tables
from assets.keys import PIPELINE_TAG, job_name, lake_key_path
from changelake.pipeline.progress import lag_by_topic
from resources.binding import bind
from resources.lake import LakeCatalogResource
from resources.kafka import KafkaResource
from sensors.liveness import worker_gone

__all__ = [
    "make_relaunch_sensor", "make_lag_sensor", "make_bounded_schedule", "make_freshness_schedule",
    "make_checks_after_commits_sensor",
    "RELAUNCH_ATTEMPT_TAG", "RELAUNCHED_FROM_TAG", "MAX_RELAUNCHES",
]

_ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
RELAUNCHED_FROM_TAG = "changelake/relaunched_from"
RELAUNCH_ATTEMPT_TAG = "changelake/relaunch_attempt"
#: consecutive relaunches of a failing pipeline before the sensor gives up (a person looks)
MAX_RELAUNCHES = 5


def _unbounded(run: dg.DagsterRun, op_name: str) -> bool:
    config = ((run.run_config or {}).get("ops") or {}).get(op_name, {}).get("config") or {}
    return not config.get("until_caught_up") and config.get("max_duration_s") is None


def make_relaunch_sensor(
    job: dg.JobDefinition | str, op_name: str, pipeline: str | None = None
) -> dg.SensorDefinition:
    """A sensor that relaunches the unbounded run of ``job`` (a job or its name) when it died —
    never one a person stopped. ``pipeline``: the pipeline it drives (default: the job's
    ``changelake/pipeline`` tag, else its name)."""
    if isinstance(job, str):
        name, pipeline = job, pipeline or job
    else:
        name, pipeline = job.name, pipeline or job.tags.get(PIPELINE_TAG) or job.name

    @dg.sensor(
        name=f"{name}_relaunch_if_dead",
        job_name=name,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description=(
            f"Relaunches the long-running run of {name} when it died (failed, or its worker was killed); "
            "a run terminated by a person is not relaunched. The new run resumes from the stored position."
        ),
    )
    def relaunch(context: dg.SensorEvaluationContext):
        records = context.instance.get_run_records(dg.RunsFilter(job_name=name), limit=1)
        if not records:
            return dg.SkipReason(f"no run of {name} yet: launch one; this sensor only brings back a run that died")
        record = records[0]
        run = record.dagster_run
        if run.status in _ACTIVE:
            why = worker_gone(run, record, pipeline)
            if why is None:
                return dg.SkipReason(f"{name} is running (run {run.run_id})")
            context.instance.report_run_failed(run, f"run {run.run_id} of {name} died: {why}")
            context.log.info(f"marked run {run.run_id} failed: {why}")
        elif run.status in (dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.CANCELING):
            return dg.SkipReason(f"the last run {run.run_id} was stopped by a person: not relaunched")
        elif run.status == dg.DagsterRunStatus.SUCCESS:
            return dg.SkipReason(f"the last run {run.run_id} finished: nothing died")
        if not _unbounded(run, op_name):
            return dg.SkipReason(f"the last run {run.run_id} was a bounded run: not relaunched")
        attempt = int(run.tags.get(RELAUNCH_ATTEMPT_TAG, "0")) + 1
        if attempt > MAX_RELAUNCHES:
            return dg.SkipReason(f"{name} died {MAX_RELAUNCHES} times in a row (last run {run.run_id}): look at its logs")
        return dg.RunRequest(
            run_key=f"relaunch-{run.run_id}",
            run_config={"ops": {op_name: {"config": {"until_caught_up": False}}}},
            tags={RELAUNCHED_FROM_TAG: run.run_id, RELAUNCH_ATTEMPT_TAG: str(attempt)},
        )

    return relaunch


def make_lag_sensor(pipeline_path: Path, structure: PipelineDefinition) -> dg.SensorDefinition:
    """Materialize the lake tables of the Kafka -> lake pipeline ``structure`` (file
    ``pipeline_path``) whose topics hold records past the lake checkpoint. Its connections come
    from the ``kafka`` and ``lake`` resources."""
    pipeline = structure.name
    name = f"{job_name(structure)}_lake_on_kafka_lag"
    keys = [dg.AssetKey(lake_key_path(structure, t)) for t in lake_tables(structure)]

    @dg.sensor(
        name=name,
        asset_selection=dg.AssetSelection.assets(*keys),
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description=(
            f"Materializes the lake tables of pipeline {pipeline} whose Kafka topics hold records the lake has not "
            "absorbed (only those tables); skips while a run of that pipeline is active."
        ),
    )
    def on_lag(context: dg.SensorEvaluationContext, kafka: KafkaResource, lake: LakeCatalogResource):
        active = context.instance.get_run_records(
            dg.RunsFilter(tags={PIPELINE_TAG: pipeline}, statuses=_ACTIVE), limit=1
        )
        if active:
            return dg.SkipReason(f"pipeline {pipeline} is running (run {active[0].dagster_run.run_id})")
        defn = bind(pipeline_path, kafka=kafka, lake=lake)
        positions = kafka.lag(defn, timeout_s=10.0)
        lag = lag_by_topic(positions)
        behind = sorted(t for t, n in lag.items() if n > 0)
        if not behind:
            return dg.SkipReason("no Kafka lag")
        # One run per set of end offsets: the same backlog is never launched twice.
        ends = sorted((tp, end) for tp, (_, end) in positions.items())
        return dg.RunRequest(
            run_key=f"{defn.name}:{ends}",
            asset_selection=[dg.AssetKey(lake_key_path(structure, t)) for t in behind],
            tags={PIPELINE_TAG: pipeline, "changelake/lag": str(sum(lag.values()))},
        )

    return on_lag


def make_bounded_schedule(job: str, op_name: str, cron: str = "*/5 * * * *") -> dg.ScheduleDefinition:
    """A schedule running the job named ``job`` bounded: it stops once caught up."""
    return dg.ScheduleDefinition(
        name=f"{job}_every_5_minutes",
        job_name=job,
        cron_schedule=cron,
        run_config={"ops": {op_name: {"config": {"until_caught_up": True}}}},
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"A bounded run of {job} every 5 minutes (until caught up); queued behind a running one.",
    )


def make_freshness_schedule(job: str, cron: str = "*/5 * * * *") -> dg.ScheduleDefinition:
    """A schedule running the job named ``job`` that evaluates the lake tables' freshness checks."""
    return dg.ScheduleDefinition(
        name="lake_freshness_every_5_minutes",
        job_name=job,
        cron_schedule=cron,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description="Evaluates every lake table's freshness check (red when the lake falls behind Kafka).",
    )


def make_checks_after_commits_sensor(structure: PipelineDefinition, check_names: tuple[str, ...]) -> dg.SensorDefinition:
    """Run the checks of the lake tables that the long-running op of pipeline ``structure`` (job
    ``<name>``) materialized since the last tick (at most one check run per tick; asset runs
    evaluate their own checks)."""
    keys = sorted((dg.AssetKey(lake_key_path(structure, t)) for t in lake_tables(structure)), key=lambda k: k.to_user_string())
    continuous_job = job_name(structure)

    @dg.sensor(
        name=f"{continuous_job}_lake_checks_after_commits",
        asset_selection=dg.AssetSelection.checks_for_assets(*keys),
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Runs the checks of the lake tables that the long-running job {continuous_job} committed to since the "
            "last tick (materializations from asset runs come with their own checks)."
        ),
    )
    def checks_after_commits(context: dg.SensorEvaluationContext):
        cursor: dict[str, int] = json.loads(context.cursor) if context.cursor else {}
        due: list[dg.AssetKey] = []
        for key in keys:
            records = context.instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=1).records
            if not records or records[0].storage_id <= cursor.get(key.to_user_string(), 0):
                continue
            cursor[key.to_user_string()] = records[0].storage_id
            run = context.instance.get_run_by_id(records[0].run_id) if records[0].run_id else None
            if run is not None and run.job_name == continuous_job:
                due.append(key)
        context.update_cursor(json.dumps(cursor, sort_keys=True))
        if not due:
            return dg.SkipReason(f"no new commits by {continuous_job}")
        return dg.RunRequest(
            run_key=f"checks:{json.dumps(cursor, sort_keys=True)}",
            asset_selection=[],
            asset_check_keys=[dg.AssetCheckKey(k, name) for k in due for name in check_names],
        )

    return checks_after_commits
