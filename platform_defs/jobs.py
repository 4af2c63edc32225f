"""Jobs, lake assets, checks, sensors and schedules built from the pipeline YAML files."""

from __future__ import annotations

import dagster as dg

from assets import pageviews
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.lake import LAKE_SINK_TYPES
from assets.checks import build_key_state_checks
from assets.lake import build_lake_assets
from platform_defs.pipelines import build_pipeline_job, job_name, load_structure, pipeline_files
from sensors.pipelines import make_bounded_schedule, make_lag_sensor, make_relaunch_sensor


def defs() -> dg.Definitions:
    jobs, assets, checks, sensors, schedules = [], [], [], [], []
    seen: dict[str, object] = {}
    for path in pipeline_files():
        structure = load_structure(path)
        if job_name(structure) in seen:
            raise OptionValidationError(
                f"pipeline files {seen[job_name(structure)]} and {path} both define pipeline.name "
                f"'{structure.name}'; names must be unique (they identify stored positions and jobs)",
                option="pipeline.name",
            )
        seen[job_name(structure)] = path
        job = build_pipeline_job(path)
        op_name = f"run_{job_name(structure)}"
        jobs.append(job)
        sensors.append(make_relaunch_sensor(job, op_name))
        schedules.append(make_bounded_schedule(job, op_name))
        if structure.sink_type in LAKE_SINK_TYPES:
            lake = build_lake_assets(path, structure)
            assets.append(lake)
            checks.append(build_key_state_checks(path, structure))
            lake_job = dg.define_asset_job(
                f"{job_name(structure)}_materialize", selection=dg.AssetSelection.assets(lake)
            )
            jobs.append(lake_job)
            sensors.append(make_lag_sensor(lake_job, path))
    assets.extend(pageviews.assets())
    checks.extend(pageviews.checks())
    jobs.append(dg.define_asset_job("pageviews_per_region_job", selection=dg.AssetSelection.groups(pageviews.PAGEVIEWS_GROUP)))
    return dg.Definitions(assets=assets, asset_checks=checks, jobs=jobs, sensors=sensors, schedules=schedules)
