"""What the page-views output must be, read independently of the job: the input topic as Arrow,
PV/UV recomputed from it by DuckDB, and the upsert topic's final state read back."""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

import pyarrow as pa

from changelake.changelog import RowKind
from changelake.connectors.errors import ConnectorError
from changelake.connectors.metrics import SourceMetrics
from changelake.pageviews.query import PAGEVIEWS_SCHEMA, PER_REGION_SCHEMA, pageviews_sink_options, pageviews_source_options

__all__ = ["read_pageviews_table", "recompute_pv_uv", "read_upsert_topic_final_state"]


def read_pageviews_table(bootstrap: str, topic: str, timeout_s: float = 60.0) -> pa.Table:
    """The whole ``pageviews`` topic (earliest to the end offsets at call time) as an Arrow table
    with columns user_id int64, page_id int64, viewtime timestamp[ms], user_region string.

    Raises ConnectorError if the end is not reached within ``timeout_s`` seconds.
    """
    from changelake.connectors.kafka_table import create_source

    opts = pageviews_source_options(
        bootstrap, topic, **{"scan.startup.mode": "earliest-offset", "scan.bounded.mode": "latest-offset"}
    )
    cols: dict[str, list[Any]] = {c: [] for c in PAGEVIEWS_SCHEMA.names}
    deadline = time.monotonic() + timeout_s
    with create_source(opts, PAGEVIEWS_SCHEMA, table_name="pageviews") as src:
        while not src.finished:
            if time.monotonic() > deadline:
                raise ConnectorError(f"topic {topic!r} not read to its end within {timeout_s} s")
            for r in src.poll(0.5, 5000):
                for c in cols:
                    cols[c].append(r.values.get(c))
    return pa.table(
        {
            "user_id": pa.array(cols["user_id"], pa.int64()),
            "page_id": pa.array(cols["page_id"], pa.int64()),
            "viewtime": pa.array(cols["viewtime"], pa.timestamp("ms")),
            "user_region": pa.array(cols["user_region"], pa.string()),
        }
    )


def recompute_pv_uv(events: pa.Table | Iterable[Mapping[str, Any]]) -> dict[str | None, tuple[int, int]]:
    """PV and UV per region recomputed from scratch with DuckDB (SQL GROUP BY over Arrow).

    Args:
        events: an Arrow table (e.g. :func:`read_pageviews_table`) or event dicts.

    Returns:
        ``{user_region: (pv, uv)}``.
    """
    import duckdb

    if not isinstance(events, pa.Table):
        rows = list(events)
        events = pa.table(
            {
                "user_id": pa.array([e.get("user_id") for e in rows], pa.int64()),
                "user_region": pa.array([e.get("user_region") for e in rows], pa.string()),
            }
        )
    con = duckdb.connect()
    try:
        con.register("pageviews", events)
        res = con.execute(
            "SELECT user_region, COUNT(*) AS pv, COUNT(DISTINCT user_id) AS uv FROM pageviews GROUP BY user_region"
        ).fetchall()
    finally:
        con.close()
    return {r[0]: (int(r[1]), int(r[2])) for r in res}


def read_upsert_topic_final_state(
    bootstrap: str,
    topic: str,
    *,
    fmt: str = "avro",
    timeout_s: float = 60.0,
    metrics: SourceMetrics | None = None,
) -> dict[str | None, tuple[int, int]]:
    """The final ``pageviews_per_region`` table, read (read_committed) through the upsert-kafka
    source from the earliest offset to the current end: ``{user_region: (pv, uv)}``.

    ``metrics``, if given, receives the source's metrics (numRecordsIn, numBytesIn, ...).
    Raises ConnectorError if the end is not reached within ``timeout_s`` seconds.
    """
    from changelake.connectors.upsert_kafka.factory import create_source

    opts = pageviews_sink_options(bootstrap, topic, fmt=fmt, **{"scan.bounded.mode": "latest-offset"})
    opts.pop("sink.delivery-guarantee")
    state: dict[str | None, tuple[int, int]] = {}
    deadline = time.monotonic() + timeout_s
    with create_source(opts, PER_REGION_SCHEMA, metrics=metrics) as src:
        while not src.is_bounded_end_reached():
            if time.monotonic() > deadline:
                raise ConnectorError(f"upsert topic {topic!r} not read to its end within {timeout_s} s")
            for r in src.poll(0.5, 5000):
                region = r.values["user_region"]
                if r.kind is RowKind.DELETE:
                    state.pop(region, None)
                elif r.kind is not RowKind.UPDATE_BEFORE:
                    state[region] = (r.values["pv"], r.values["uv"])
    return state
