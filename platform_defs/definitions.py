"""The code location: a short merge of per-area Definitions (STYLE.md, Dagster 1-2).

Loading touches no network: pipeline YAMLs are read for their structure only; connections open
when a run starts.
"""

from __future__ import annotations

import dagster as dg

from assets import definitions as assets
from platform_defs import jobs, maintenance
from resources import definitions as resources
from sensors import definitions as sensors

__all__ = ["build_defs", "defs"]


def build_defs() -> dg.Definitions:
    """Every area's Definitions merged (read from the pipeline files at call time)."""
    return dg.Definitions.merge(assets.defs(), jobs.defs(), sensors.defs(), maintenance.defs(), resources.defs())


defs = build_defs()
