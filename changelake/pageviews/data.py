"""Seeded page-view events, and writing them to a topic through the ``kafka`` connector."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any, Iterable, Mapping, Sequence

from changelake.changelog import ChangelogRow, RowKind
from changelake.pageviews.query import PAGEVIEWS_SCHEMA, REGIONS, pageviews_source_options

__all__ = ["generate_pageviews", "produce_pageviews"]


def generate_pageviews(
    n: int,
    seed: int = 0,
    *,
    regions: Sequence[str] = REGIONS,
    users: int | None = None,
    start: dt.datetime = dt.datetime(2024, 1, 1, 8, 0, 0),
) -> list[dict[str, Any]]:
    """``n`` page-view events, deterministic for a ``seed``.

    Each event is ``{"user_id": int, "page_id": int, "viewtime": naive datetime (ms precision),
    "user_region": str}``. There are ``users`` users (default ``max(10, n // 10)``, so users
    repeat); each user lives in one region; viewtime grows by 0-999 ms per event.
    """
    rnd = random.Random(seed)
    users = users or max(10, n // 10)
    home = {u: regions[rnd.randrange(len(regions))] for u in range(1, users + 1)}
    t = start
    out = []
    for _ in range(n):
        u = rnd.randint(1, users)
        t += dt.timedelta(milliseconds=rnd.randrange(1000))
        out.append({"user_id": u, "page_id": rnd.randint(1, 50), "viewtime": t, "user_region": home[u]})
    return out


def produce_pageviews(bootstrap: str, topic: str, events: Iterable[Mapping[str, Any]], **properties: str) -> int:
    """Write events as json records (no key) through the ``kafka`` connector; returns the count.

    Raises SinkFlushError if a record is not acknowledged.
    """
    from changelake.connectors.kafka_table import create_sink

    opts = pageviews_source_options(bootstrap, topic, **{f"properties.{k}": v for k, v in properties.items()})
    sink = create_sink(opts, PAGEVIEWS_SCHEMA, table_name="pageviews")
    n = 0
    with sink:
        for e in events:
            sink.write(ChangelogRow(RowKind.INSERT, dict(e)))
            n += 1
        sink.flush()
    return n
