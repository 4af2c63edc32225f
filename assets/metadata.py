"""The one vocabulary of asset metadata keys: every materialization, check result and asset
definition of the code location names its metadata with these constants, and the CLI and tests
read them by the same names.

Lake-table materializations (``changelake.pipeline.progress``): ``rows_inserted``,
``rows_updated``, ``rows_deleted``, ``offsets``, ``snapshot_id``, ``commits``, ``lag``,
``pipeline``. Topic materializations: ``records``, ``offsets``, ``position``, ``pipeline``.
Check results: the comparison's counts plus ``samples`` (a Markdown table of differing keys,
MySQL value beside lake value) and ``next_step`` (what to do when the check failed).
Lake-asset definitions: ``changelake/lake`` (the sink type, ``iceberg`` or ``paimon``) and
``changelake/table`` (the sink table ``db.table``), so a reader of the asset (an IO manager) knows
the table without parsing the key.
"""

from __future__ import annotations

__all__ = [
    "ROWS_INSERTED", "ROWS_UPDATED", "ROWS_DELETED", "OFFSETS", "SNAPSHOT_ID", "COMMITS", "LAG", "PIPELINE",
    "RECORDS", "POSITION", "SAMPLES", "NEXT_STEP", "ERROR", "LAKE_KIND", "LAKE_TABLE", "PROGRESS",
    "LAKE_MATERIALIZATION", "TOPIC_MATERIALIZATION", "CHECK_EXPLANATION",
    "EVENTS_PRODUCED", "TOPIC", "EVENTS_READ", "EVENTS_REPLAYED", "CHANGELOG_ROWS_OUT", "RECORDS_WRITTEN",
    "TRANSACTIONS", "REGIONS", "EVENTS_PER_S", "INPUT_OFFSETS", "EVENTS", "DIFFERING_REGIONS", "PV_UV",
    "SINK_METRIC_PREFIX", "SOURCE_METRIC_PREFIX",
]

ROWS_INSERTED = "rows_inserted"
ROWS_UPDATED = "rows_updated"
ROWS_DELETED = "rows_deleted"
OFFSETS = "offsets"
SNAPSHOT_ID = "snapshot_id"
COMMITS = "commits"
LAG = "lag"
PIPELINE = "pipeline"
RECORDS = "records"
POSITION = "position"
#: check results: a Markdown table of sample differing keys (MySQL value vs lake value)
SAMPLES = "samples"
#: check results: what to do next when the check failed
NEXT_STEP = "next_step"
#: check results: the error that kept the check from running (``ErrorClass: message``)
ERROR = "error"
#: lake-asset definition metadata: the lake (sink type) and the sink table ``db.table``
LAKE_KIND = "changelake/lake"
LAKE_TABLE = "changelake/table"
#: run metadata of a long run: the last progress line
PROGRESS = "progress"

#: every key a lake-table materialization carries (``truncated``/``lag`` only when they apply)
LAKE_MATERIALIZATION = (ROWS_INSERTED, ROWS_UPDATED, ROWS_DELETED, OFFSETS, SNAPSHOT_ID, COMMITS, LAG, PIPELINE,
                        "truncated")
#: every key a topic materialization carries
TOPIC_MATERIALIZATION = (RECORDS, OFFSETS, POSITION, PIPELINE)
#: the keys a failed check adds to its metadata
CHECK_EXPLANATION = (SAMPLES, NEXT_STEP)

# -- the page-views assets and their check -------------------------------------------------------
#: ``pageviews``: events written and the topic
EVENTS_PRODUCED = "events_produced"
TOPIC = "topic"
#: ``pageviews_per_region``: what the aggregation run did (:class:`changelake.pageviews.PageviewsStats`)
EVENTS_READ = "events_read"
EVENTS_REPLAYED = "events_replayed"
CHANGELOG_ROWS_OUT = "changelog_rows_out"
RECORDS_WRITTEN = "records_written"
TRANSACTIONS = "transactions"
REGIONS = "regions"
EVENTS_PER_S = "events_per_s"
INPUT_OFFSETS = "input_offsets"
#: ``pv_uv_match_duckdb_recomputation``: the recomputed events, the regions that differ, PV/UV read back
EVENTS = "events"
DIFFERING_REGIONS = "differing_regions"
PV_UV = "pv_uv"
#: prefixes of a connector's metrics (``sink.numRecordsOut``, ``source.numRecordsIn``)
SINK_METRIC_PREFIX = "sink."
SOURCE_METRIC_PREFIX = "source."
