"""Sensors and schedules around the pipeline jobs.

* ``<job>_relaunch_if_dead``: keeps one unbounded run of a pipeline job alive; if none is queued or
  running it requests one (it resumes from the stored position). Pair it with run monitoring /
  ``dagster/max_runtime`` as Dagster's docs advise.
* ``<job>_on_kafka_lag``: launches the bounded lake materialization when the Kafka topics of a
  Kafka -> Iceberg pipeline hold records the lake has not absorbed.
* ``<job>_every_5_minutes``: a bounded ("until caught up") run of a pipeline job.
"""


import dagster as dg

__all__ = ["make_relaunch_sensor", "make_lag_sensor", "make_bounded_schedule"]

_ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def make_relaunch_sensor(job: dg.JobDefinition, op_name: str) -> dg.SensorDefinition:
    """A sensor that requests an unbounded run of ``job`` whenever none is active."""

    @dg.sensor(name=f"{job.name}_relaunch_if_dead", job=job, minimum_interval_seconds=30,
               default_status=dg.DefaultSensorStatus.STOPPED)
    def relaunch(context: dg.SensorEvaluationContext):
        active = context.instance.get_run_records(
            dg.RunsFilter(job_name=job.name, statuses=_ACTIVE), limit=1
        )
        if active:
            return dg.SkipReason(f"{job.name} is running (run {active[0].dagster_run.run_id})")
        return dg.RunRequest(run_config={"ops": {op_name: {"config": {"until_caught_up": False}}}})

    return relaunch


def make_lag_sensor(asset_job, pipeline_path) -> dg.SensorDefinition:
    """Launch ``asset_job`` when Kafka holds records past the pipeline's lake checkpoint."""

    @dg.sensor(name=f"{asset_job.name}_on_kafka_lag", job=asset_job, minimum_interval_seconds=30,
               default_status=dg.DefaultSensorStatus.STOPPED)
    def on_lag(context: dg.SensorEvaluationContext):
        import os

        from changelake.pipeline.definition import load_pipeline
        from changelake.pipeline.runner import kafka_lag

        active = context.instance.get_run_records(dg.RunsFilter(job_name=asset_job.name, statuses=_ACTIVE), limit=1)
        if active:
            return dg.SkipReason("a lake materialization is already running")
        defn = load_pipeline(pipeline_path, env=dict(os.environ))
        positions = kafka_lag(defn, timeout_s=10.0)
        total = sum(max(0, end - done) for done, end in positions.values())
        if total <= 0:
            return dg.SkipReason("no Kafka lag")
        # One run per set of end offsets: the same backlog is never launched twice.
        ends = sorted((tp, end) for tp, (_, end) in positions.items())
        return dg.RunRequest(run_key=f"{defn.name}:{ends}", tags={"changelake/lag": str(total)})

    return on_lag


def make_bounded_schedule(job: dg.JobDefinition, op_name: str, cron: str = "*/5 * * * *") -> dg.ScheduleDefinition:
    """A schedule running ``job`` bounded: it stops once caught up."""
    return dg.ScheduleDefinition(
        name=f"{job.name}_every_5_minutes",
        job=job,
        cron_schedule=cron,
        run_config={"ops": {op_name: {"config": {"until_caught_up": True}}}},
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )
