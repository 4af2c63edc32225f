"""The jobs of the code location (no network access at load).

Per pipeline file: one job with one long-running op (``run_<name>``) that runs the pipeline
(:mod:`platform_defs.pipelines`). Plus ``lake_freshness_checks`` (every lake table's freshness
check) and ``pageviews_per_region_job``. Every job runs in the run worker's process (in-process
executor: no subprocess start-up).
"""

from __future__ import annotations

import dagster as dg

from assets.keys import lake_asset_key
from assets.pageviews import PAGEVIEWS_GROUP
from changelake.pipeline.files import load_pipelines
from changelake.pipeline.lake_tables import is_lake, lake_tables
from assets.keys import FRESHNESS_CHECK, lake_checks_of
from platform_defs.pipelines import build_pipeline_job
from sensors.definitions import FRESHNESS_JOB

__all__ = ["defs"]


def defs() -> dg.Definitions:
    jobs: list = []
    freshness_checks: list[dg.AssetCheckKey] = []
    for path, structure in load_pipelines():
        jobs.append(build_pipeline_job(path))
        if is_lake(structure) and FRESHNESS_CHECK in lake_checks_of(structure):
            freshness_checks += [dg.AssetCheckKey(lake_asset_key(structure, t), FRESHNESS_CHECK) for t in lake_tables(structure)]
    if freshness_checks:
        jobs.append(dg.define_asset_job(
            FRESHNESS_JOB, selection=dg.AssetSelection.checks(*freshness_checks),
            description="Evaluates the freshness check of every lake table.",
        ))
    jobs.append(dg.define_asset_job("pageviews_per_region_job", selection=dg.AssetSelection.groups(PAGEVIEWS_GROUP)))
    return dg.Definitions(jobs=jobs, executor=dg.in_process_executor)
