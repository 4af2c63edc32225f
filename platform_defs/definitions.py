"""The code location: a short merge of per-area Definitions (STYLE.md, Dagster 1-2).

Loading touches no network: pipeline YAMLs are read for their structure only; connections open
when a run starts.
"""

from __future__ import annotations

import dagster as dg

from platform_defs import jobs, maintenance
from resources import definitions as resources

defs = dg.Definitions.merge(jobs.defs(), maintenance.defs(), resources.defs())
