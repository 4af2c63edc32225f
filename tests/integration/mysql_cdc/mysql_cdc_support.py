"""Helpers of the MySQL CDC integration tests (real MariaDB from the session fixtures).

Imported as a top-level module (pytest puts this folder on sys.path)."""

from __future__ import annotations

import time
from typing import Any

import pymysql
from changelake.changelog.event import DataChangeEvent
from changelake.connectors.mysql_cdc import MySqlSource, validate_options
from changelake.connectors.mysql_cdc.options import MySqlSourceOptions
from changelake.formats.json_values import dumps, to_json_value


def run_sql(params: dict, database: str | None, *statements: str) -> None:
    """Run statements in ONE session (so SET time_zone / sql_mode apply to the next ones)."""
    conn = pymysql.connect(
        host=params["host"], port=params["port"], user=params["user"], password=params["password"],
        database=database, autocommit=True, charset="utf8mb4",
    )
    try:
        with conn.cursor() as cur:
            for stmt in statements:
                cur.execute(stmt)
    finally:
        conn.close()


def source_options(params: dict, database: str, tables: str = "t", **extra: str) -> MySqlSourceOptions:
    """Validated options of a source reading ``database.tables`` (``extra``: more raw options)."""
    opts = {
        "hostname": params["host"], "port": str(params["port"]), "username": params["user"],
        "password": params["password"], "tables": f"{database}.{tables}", "server-id": "5400-5499",
        "heartbeat.interval": "1s",
    }
    opts.update(extra)
    return validate_options(opts)


def drain(source: MySqlSource, timeout_s: float = 60.0, max_events: int = 1000) -> list[DataChangeEvent]:
    """Poll until the source is caught up with the binlog end (or finished its snapshot)."""
    events: list[DataChangeEvent] = []
    deadline = time.monotonic() + timeout_s
    while True:
        events += source.poll(max_events, 0.3)
        if source.caught_up():
            events += source.poll(max_events, 0.1)
            return events
        assert time.monotonic() < deadline, f"source not caught up after {timeout_s}s ({len(events)} events)"


def json_row(event_row: dict[str, Any] | None, event: DataChangeEvent) -> str | None:
    """A row as compact JSON, each value written by the formats' JSON value codec."""
    if event_row is None:
        return None
    assert event.schema is not None
    return dumps({k: to_json_value(v, event.schema.column(k).type, k) for k, v in event_row.items()}).decode()
