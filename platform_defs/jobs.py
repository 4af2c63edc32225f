"""Jobs, lineage, lake assets, checks, sensors and schedules built from the pipeline YAML files.

Per pipeline file: one job with one long-running op (``<name>``), its relaunch sensor; for
MySQL -> Kafka a bounded schedule; for Kafka -> Iceberg one asset per lake table (subsettable),
its checks and the lag sensor that materializes the tables that fell behind. Every job runs its
op(s) in the run worker's process (in-process executor: no subprocess start-up).
"""

from __future__ import annotations

import dagster as dg

from assets import examples, pageviews
from assets.checks import FRESHNESS_CHECK, LAKE_CHECKS, build_key_state_checks
from assets.lake import build_lake_assets, build_lineage_specs, lake_tables
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.lake import LAKE_SINK_TYPES
from platform_defs.keys import job_name, lake_asset_key
from platform_defs.pipelines import build_pipeline_job, load_structure, pipeline_files
from sensors.pipelines import (
    make_bounded_schedule, make_checks_after_commits_sensor, make_freshness_schedule, make_lag_sensor, make_relaunch_sensor,
)

__all__ = ["defs"]


def defs() -> dg.Definitions:
    """The Definitions of every pipeline file (no network access)."""
    jobs, assets, checks, sensors, schedules = [], [], [], [], []
    seen: dict[str, object] = {}
    structures = []
    freshness_checks: list[dg.AssetCheckKey] = []
    for path in pipeline_files():
        structure = load_structure(path)
        if job_name(structure) in seen:
            raise OptionValidationError(
                f"pipeline files {seen[job_name(structure)]} and {path} both define pipeline.name "
                f"'{structure.name}'; names must be unique (they identify stored positions and jobs)",
                option="pipeline.name",
            )
        seen[job_name(structure)] = path
        structures.append(structure)
        job = build_pipeline_job(path)
        op_name = f"run_{job_name(structure)}"
        jobs.append(job)
        sensors.append(make_relaunch_sensor(job, op_name, structure.name))
        if structure.sink_type in LAKE_SINK_TYPES:
            lake = build_lake_assets(path, structure)
            assets.append(lake)
            checks.extend(build_key_state_checks(path, structure))
            sensors.append(make_lag_sensor(lake, path, structure.name))
            sensors.append(make_checks_after_commits_sensor(lake, job.name, LAKE_CHECKS))
            freshness_checks += [dg.AssetCheckKey(lake_asset_key(str(t)), FRESHNESS_CHECK) for t in lake_tables(structure)]
        else:
            schedules.append(make_bounded_schedule(job, op_name))
    assets.extend(build_lineage_specs(structures))
    assets.extend(examples.assets(assets))
    if freshness_checks:
        freshness_job = dg.define_asset_job(
            "lake_freshness_checks", selection=dg.AssetSelection.checks(*freshness_checks),
            description="Evaluates the freshness check of every lake table.",
        )
        jobs.append(freshness_job)
        schedules.append(make_freshness_schedule(freshness_job))
    assets.extend(pageviews.assets())
    checks.extend(pageviews.checks())
    jobs.append(dg.define_asset_job("pageviews_per_region_job", selection=dg.AssetSelection.groups(pageviews.PAGEVIEWS_GROUP)))
    return dg.Definitions(
        assets=assets, asset_checks=checks, jobs=jobs, sensors=sensors, schedules=schedules,
        executor=dg.in_process_executor,
    )
