"""Every table found: a table created in MySQL while both pipelines run reaches the lake, typed,
and is listed for the Dagster layer from the local discovery file."""

from __future__ import annotations

import re
import threading
import time
from decimal import Decimal

import pytest

from changelake.changelog import TableId
from changelake.pipeline.discovery import discovered_tables
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table

pytestmark = pytest.mark.integration


def _rows(p2, table: TableId) -> list[dict]:
    try:
        return read_lake_table(p2, table).to_pylist()
    except Exception:  # not created yet (or the catalog is mid-commit)
        return []


def _wait_for(predicate, timeout_s: float, errors: list) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert not errors, errors
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError("timed out")


def test_a_table_created_while_both_pipelines_run_reaches_the_lake_with_no_yaml_edit(
    database_factory, mysql_exec, pipeline_pair, tmp_path, monkeypatch
):
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    db = database_factory()
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY, v INT)", "INSERT INTO a VALUES (1, 1)")
    p1, p2 = pipeline_pair(db, ["a"])  # P1: tables db.\.*
    del p2.source["topic"]
    p2.source["topic-pattern"] = re.escape(db) + r"\..*"
    p2.source["scan.topic-partition-discovery.interval"] = "1s"
    run_pipeline(p1, until_caught_up=True)  # topic db.a exists before Pipeline 2 starts

    stop, errors = threading.Event(), []
    applied: dict[str, int] = {}  # change events per lake table, from Pipeline 2's batches

    def on_batch(batch: dict) -> None:
        for table, count in batch.get("tables", {}).items():
            applied[table] = applied.get(table, 0) + count

    def run(defn):
        try:
            run_pipeline(defn, stop=stop, on_batch=on_batch if defn is p2 else None)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,), daemon=True) for p in (p1, p2)]
    for t in threads:
        t.start()
    try:
        _wait_for(lambda: applied.get(f"{db}.a") == 1, 60, errors)
        mysql_exec(db, "CREATE TABLE b (id INT PRIMARY KEY, price DECIMAL(8,3))",
                   "INSERT INTO b VALUES (1, 2.125), (2, NULL)")
        _wait_for(lambda: applied.get(f"{db}.b") == 2, 90, errors)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors
    rows = sorted(_rows(p2, TableId(db, "b")), key=lambda r: r["id"])
    assert rows[0]["price"] == Decimal("2.125") and rows[1]["price"] is None

    # The Dagster layer lists it from the discovery file written by the pipeline (no network).
    assert {TableId(db, "a"), TableId(db, "b")} <= set(discovered_tables(p2.name))
    from assets.lake import lake_tables

    assert TableId(db, "b") in lake_tables(p2)

    # Lag covers every topic the pattern matches (both new-table topics, each caught up).
    from changelake.pipeline.runner import kafka_lag

    lag = kafka_lag(p2)
    assert {key.rsplit("/", 1)[0] for key in lag} >= {f"{db}.a", f"{db}.b"}
    for key in (k for k in lag if k.startswith(f"{db}.")):
        done, end = lag[key]
        assert 0 <= end - done <= 1, (key, done, end)  # at most the transaction's commit marker
