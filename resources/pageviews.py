"""Where the page-views example lives on Kafka (topic names and the aggregation's local state)."""

import os

import dagster as dg
from pydantic import Field

__all__ = ["PageviewsTopics"]


class PageviewsTopics(dg.ConfigurableResource):
    """The page-views example's topics: raw events in, PV/UV per region out (upsert-kafka, Avro)."""

    source_topic: str = Field(default="pageviews", description="Raw page-view events (JSON).")
    sink_topic: str = Field(default="pageviews_per_region", description="Upsert-kafka table of PV/UV per region.")
    key_value_format: str = Field(default="avro", description="key.format and value.format of the sink table.")
    state_dir: str = Field(
        default_factory=lambda: os.path.join(os.environ.get("CHANGELAKE_STATE_DIR", ".state"), "pageviews-state"),
        description="Folder of the aggregation's local state snapshot (rebuilt from Kafka if missing).",
    )
