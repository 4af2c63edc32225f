"""Fixtures of the MySQL CDC integration tests."""

from __future__ import annotations

from typing import Callable

import pytest

from changelake.changelog.event import DataChangeEvent
from changelake.connectors.mysql_cdc import MySqlSource
from mysql_cdc_support import drain, run_sql, source_options


@pytest.fixture
def capture(mysql_params, database_factory) -> Callable[..., tuple[list[DataChangeEvent], list[DataChangeEvent]]]:
    """``capture(setup, changes) -> (binlog_events, snapshot_events)``.

    Binlog path: ``setup`` statements, start the source (initial mode), run ``changes``, drain.
    Snapshot path: a second source in ``snapshot`` mode reading the same tables afterwards.
    """
    sources: list[MySqlSource] = []

    def run(setup: list[str], changes: list[str], tables: str = "t") -> tuple[list[DataChangeEvent], list[DataChangeEvent]]:
        db = database_factory()
        run_sql(mysql_params, db, *setup)
        src = MySqlSource(source_options(mysql_params, db, tables))
        sources.append(src)
        src.open()
        drain(src)  # empty snapshot, binlog reader started
        run_sql(mysql_params, db, *changes)
        binlog = drain(src)
        src.close()
        snap_src = MySqlSource(source_options(mysql_params, db, tables, **{"scan.startup.mode": "snapshot"}))
        sources.append(snap_src)
        snap_src.open()
        snapshot = drain(snap_src)
        snap_src.close()
        return binlog, snapshot

    yield run
    for s in sources:
        s.close()
