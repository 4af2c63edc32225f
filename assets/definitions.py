"""The assets and asset checks of the code location (no network access at load).

Per Kafka -> lake or MySQL -> lake pipeline file: one definition holding its lake tables
(``lake/<pipeline>/<db>/<table>``) and their checks; the lineage upstream of them (``kafka/...``,
``mysql/...``); the example asset built on the lake; the page-views example.
"""

from __future__ import annotations

import dagster as dg

from assets import examples, pageviews
from assets.checks import build_key_state_checks
from assets.lake import build_lake_assets, build_lineage_specs
from changelake.pipeline.files import load_pipelines
from changelake.pipeline.lake_tables import is_lake

__all__ = ["defs"]


def defs() -> dg.Definitions:
    pipelines = load_pipelines()
    assets: list = []
    checks: list = []
    for path, structure in pipelines:
        if is_lake(structure):
            assets.append(build_lake_assets(path, structure))
            checks.extend(build_key_state_checks(path, structure))
    assets.extend(build_lineage_specs([s for _, s in pipelines]))
    assets.extend(examples.assets(assets))
    assets.extend(pageviews.assets())
    checks.extend(pageviews.checks())
    return dg.Definitions(assets=assets, asset_checks=checks)
