"""Sensors and schedules around the pipelines.

* ``<job>_relaunch_if_dead``: brings back the long-running run of a pipeline when it *died* (it
  failed, or its run worker vanished — the pipeline's lock tells); a run a person terminated stays
  stopped, and a run that finished is left alone. The new run resumes from the stored position.
* ``<pipeline>_lake_on_kafka_lag``: materializes the lake tables whose topics hold records the lake
  has not absorbed (only those tables), unless a run of that pipeline is active.
* ``<job>_every_5_minutes``: a bounded ("until caught up") run of Pipeline 1 (MySQL -> Kafka).
* ``lake_freshness_every_5_minutes``: evaluates the lake tables' freshness checks.
* ``<pipeline>_lake_checks_after_commits``: runs the checks of the lake tables that the
  long-running op of a Kafka -> Iceberg pipeline committed to (asset runs evaluate their own).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg

from platform_defs.keys import PIPELINE_TAG
from platform_defs.running import worker_gone

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
#: a started run whose lock was never taken is presumed dead after this long


def _unbounded(run: dg.DagsterRun, op_name: str) -> bool:
    config = ((run.run_config or {}).get("ops") or {}).get(op_name, {}).get("config") or {}
    return not config.get("until_caught_up") and config.get("max_duration_s") is None


def make_relaunch_sensor(job: dg.JobDefinition, op_name: str, pipeline: str | None = None) -> dg.SensorDefinition:
    """A sensor that relaunches the unbounded run of ``job`` when it died — never one a person stopped."""
    pipeline = pipeline or job.tags.get(PIPELINE_TAG) or job.name

    @dg.sensor(
        name=f"{job.name}_relaunch_if_dead",
        job=job,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description=(
            f"Relaunches the long-running run of {job.name} when it died (failed, or its worker was killed); "
            "a run terminated by a person is not relaunched. The new run resumes from the stored position."
        ),
    )
    def relaunch(context: dg.SensorEvaluationContext):
        records = context.instance.get_run_records(dg.RunsFilter(job_name=job.name), limit=1)
        if not records:
            return dg.SkipReason(f"no run of {job.name} yet: launch one; this sensor only brings back a run that died")
        record = records[0]
        run = record.dagster_run
        if run.status in _ACTIVE:
            why = worker_gone(run, record, pipeline)
            if why is None:
                return dg.SkipReason(f"{job.name} is running (run {run.run_id})")
            context.instance.report_run_failed(run, f"run {run.run_id} of {job.name} died: {why}")
            context.log.info(f"marked run {run.run_id} failed: {why}")
        elif run.status in (dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.CANCELING):
            return dg.SkipReason(f"the last run {run.run_id} was stopped by a person: not relaunched")
        elif run.status == dg.DagsterRunStatus.SUCCESS:
            return dg.SkipReason(f"the last run {run.run_id} finished: nothing died")
        if not _unbounded(run, op_name):
            return dg.SkipReason(f"the last run {run.run_id} was a bounded run: not relaunched")
        attempt = int(run.tags.get(RELAUNCH_ATTEMPT_TAG, "0")) + 1
        if attempt > MAX_RELAUNCHES:
            return dg.SkipReason(f"{job.name} died {MAX_RELAUNCHES} times in a row (last run {run.run_id}): look at its logs")
        return dg.RunRequest(
            run_key=f"relaunch-{run.run_id}",
            run_config={"ops": {op_name: {"config": {"until_caught_up": False}}}},
            tags={RELAUNCHED_FROM_TAG: run.run_id, RELAUNCH_ATTEMPT_TAG: str(attempt)},
        )

    return relaunch


def make_lag_sensor(lake_assets: dg.AssetsDefinition, pipeline_path: Path, pipeline: str) -> dg.SensorDefinition:
    """Materialize the lake tables of ``pipeline`` whose topics hold records past the lake checkpoint."""
    name = f"{lake_assets.node_def.name}_on_kafka_lag"

    @dg.sensor(
        name=name,
        asset_selection=dg.AssetSelection.assets(lake_assets),
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description=(
            f"Materializes the lake tables of pipeline {pipeline} whose Kafka topics hold records the lake has not "
            "absorbed (only those tables); skips while a run of that pipeline is active."
        ),
    )
    def on_lag(context: dg.SensorEvaluationContext):
        import os

        from changelake.pipeline.definition import load_pipeline
        from changelake.pipeline.runner import kafka_lag
        from platform_defs.keys import lake_asset_key

        active = context.instance.get_run_records(
            dg.RunsFilter(tags={PIPELINE_TAG: pipeline}, statuses=_ACTIVE), limit=1
        )
        if active:
            return dg.SkipReason(f"pipeline {pipeline} is running (run {active[0].dagster_run.run_id})")
        defn = load_pipeline(pipeline_path, env=dict(os.environ))
        positions = kafka_lag(defn, timeout_s=10.0)
        lag: dict[str, int] = {}
        for tp, (done, end) in positions.items():
            topic = tp.rpartition("/")[0]
            lag[topic] = lag.get(topic, 0) + max(0, end - done)
        behind = sorted(t for t, n in lag.items() if n > 0)
        if not behind:
            return dg.SkipReason("no Kafka lag")
        # One run per set of end offsets: the same backlog is never launched twice.
        ends = sorted((tp, end) for tp, (_, end) in positions.items())
        return dg.RunRequest(
            run_key=f"{defn.name}:{ends}",
            asset_selection=[lake_asset_key(t) for t in behind],
            tags={PIPELINE_TAG: pipeline, "changelake/lag": str(sum(lag.values()))},
        )

    return on_lag


def make_bounded_schedule(job: dg.JobDefinition, op_name: str, cron: str = "*/5 * * * *") -> dg.ScheduleDefinition:
    """A schedule running ``job`` bounded: it stops once caught up."""
    return dg.ScheduleDefinition(
        name=f"{job.name}_every_5_minutes",
        job=job,
        cron_schedule=cron,
        run_config={"ops": {op_name: {"config": {"until_caught_up": True}}}},
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"A bounded run of {job.name} every 5 minutes (until caught up); queued behind a running one.",
    )


def make_freshness_schedule(job: dg.UnresolvedAssetJobDefinition, cron: str = "*/5 * * * *") -> dg.ScheduleDefinition:
    """A schedule evaluating the lake tables' freshness checks."""
    return dg.ScheduleDefinition(
        name="lake_freshness_every_5_minutes",
        job=job,
        cron_schedule=cron,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description="Evaluates every lake table's freshness check (red when the lake falls behind Kafka).",
    )


def make_checks_after_commits_sensor(
    lake_assets: dg.AssetsDefinition, continuous_job: str, check_names: tuple[str, ...]
) -> dg.SensorDefinition:
    """Run the checks of the lake tables that the long-running op ``continuous_job`` materialized
    since the last tick (at most one check run per tick; asset runs evaluate their own checks)."""
    keys = sorted(lake_assets.keys, key=lambda k: k.to_user_string())

    @dg.sensor(
        name=f"{lake_assets.node_def.name}_checks_after_commits",
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
