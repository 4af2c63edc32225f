"""The sensors and schedules of every pipeline file (no network access at load).

Per pipeline: ``<job>_relaunch_if_dead``; MySQL -> Kafka: ``<job>_every_5_minutes`` (bounded);
Kafka -> lake: ``<job>_lake_on_kafka_lag`` and ``<job>_lake_checks_after_commits``; MySQL ->
lake: ``<job>_lake_checks_after_commits``; and ``lake_freshness_every_5_minutes`` when any lake
table has a freshness check; ``queued_runs_name_their_blocker`` (a queued run names the run it waits for). Jobs are referenced by name (``platform_defs.jobs`` defines them).
"""

from __future__ import annotations

import dagster as dg

from changelake.pipeline.files import load_pipelines
from changelake.pipeline.lake_tables import from_mysql, is_lake
from assets.keys import job_name, lake_checks_of
from sensors.queue import make_queue_sensor
from sensors.pipelines import (
    make_bounded_schedule, make_checks_after_commits_sensor, make_freshness_schedule, make_lag_sensor, make_relaunch_sensor,
)

__all__ = ["FRESHNESS_JOB", "defs"]

#: the asset job evaluating every lake table's freshness check (defined in platform_defs.jobs)
FRESHNESS_JOB = "lake_freshness_checks"


def defs() -> dg.Definitions:
    sensors: list[dg.SensorDefinition] = []
    schedules: list[dg.ScheduleDefinition] = []
    freshness = False
    for path, structure in load_pipelines():
        name = job_name(structure)
        sensors.append(make_relaunch_sensor(name, f"run_{name}", structure.name))
        if is_lake(structure):
            if not from_mysql(structure):
                sensors.append(make_lag_sensor(path, structure))
                freshness = True
            sensors.append(make_checks_after_commits_sensor(structure, lake_checks_of(structure)))
        else:
            schedules.append(make_bounded_schedule(name, f"run_{name}"))
    if freshness:
        schedules.append(make_freshness_schedule(FRESHNESS_JOB))
    sensors.append(make_queue_sensor())
    return dg.Definitions(sensors=sensors, schedules=schedules)
