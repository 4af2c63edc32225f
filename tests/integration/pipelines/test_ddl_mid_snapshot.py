"""TRUNCATE, DROP and ALTER in the middle of both snapshot modes, end to end (issue 17): Pipeline 1
writes ``hash-by-key`` to a 3-partition topic, Pipeline 2 reads it with two workers (Iceberg; one
for Paimon, which takes one writer) and the lake equals MySQL afterwards.

Pipeline 1's run of a case (the snapshot with the DDL in its middle, then caught up) is the same
for either lake: the case's Iceberg test runs it and its Paimon test reads the same topic
(:func:`snapshot_with_ddl`)."""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import replace

import pytest

from changelake.changelog import TableId
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table
from lake_blocks import lake_sink, pipeline_1, pipeline_2, run_sql
from test_ddl_and_transactions import HASH3, run_workers

pytestmark = pytest.mark.integration

INCREMENTAL = {"scan.incremental.snapshot.enabled": "true", "scan.incremental.snapshot.chunk.size": "200"}


@pytest.fixture(scope="module")
def snapshot_with_ddl(mysql_params, kafka_bootstrap):
    """``snapshot_with_ddl(create, ddl, snapshot) -> db``: in a fresh database ``db``, ``create``,
    then Pipeline 1's snapshot (``snapshot`` options) with ``ddl`` run from its first commit on
    (:func:`_p1_with_ddl_mid_snapshot`), then Pipeline 1 caught up; run once per case for the
    module, so the case's test on the other lake finds the topic ready (a Pipeline 1 failure is
    raised again there). The databases are dropped at the module's end."""
    done: dict[str, tuple[str, BaseException | None]] = {}

    def get(create: list[str], ddl: list[str], snapshot: dict) -> str:
        key = json.dumps([create, ddl, snapshot])
        if key not in done:
            db = f"db_{uuid.uuid4().hex[:12]}"
            done[key] = (db, None)
            run_sql(mysql_params, None, f"CREATE DATABASE `{db}`")
            try:
                run_sql(mysql_params, db, *create)
                p1 = pipeline_1(mysql_params, kafka_bootstrap, db, p1_extra=HASH3)
                _p1_with_ddl_mid_snapshot(p1, db, ddl, lambda db, *sql: run_sql(mysql_params, db, *sql), snapshot)
            except BaseException as exc:
                done[key] = (db, exc)
                raise
        db, error = done[key]
        if error is not None:
            raise AssertionError(f"Pipeline 1 of this case failed in the other lake's test: {error!r}") from error
        return db

    yield get
    for db, _ in done.values():
        run_sql(mysql_params, None, f"DROP DATABASE IF EXISTS `{db}`")


@pytest.mark.parametrize("snapshot", [{}, INCREMENTAL], ids=["lock-free", "incremental"])
@pytest.mark.parametrize("ddl", [
    ["TRUNCATE TABLE t", "INSERT INTO t VALUES (100001, 1), (2500, 2), (7, 7)"],
    ["ALTER TABLE t ADD COLUMN w INT", "INSERT INTO t VALUES (100003, 3, 30)", "UPDATE t SET v = v + 1 WHERE id <= 10"],
    ["DROP TABLE t", "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (7, 70), (2600, 26)"],
    # MySQL fills the new column in the existing rows: chunks read before the ALTER lack it, so the
    # table is read again right after the statement (in the incremental mode: during the binlog join)
    ["ALTER TABLE t ADD COLUMN d INT NOT NULL DEFAULT 7", "INSERT INTO t VALUES (100004, 4, 8)",
     "UPDATE t SET v = v + 1 WHERE id <= 10"],
    ["ALTER TABLE t RENAME COLUMN v TO w", "INSERT INTO t VALUES (100005, 5)", "UPDATE t SET w = w + 1 WHERE id <= 10"],
], ids=["truncate", "alter", "drop", "fill", "rename"])
def test_ddl_in_the_middle_of_a_snapshot_on_hash_by_key_with_two_workers(snapshot_with_ddl, mysql_params,
                                                                         kafka_bootstrap, tmp_path, lake, snapshot, ddl):
    db = snapshot_with_ddl(["CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)",
                            "INSERT INTO t SELECT seq, seq FROM seq_1_to_3000", "CREATE TABLE other (id INT PRIMARY KEY)"],
                           ddl, snapshot)
    p2 = pipeline_2(kafka_bootstrap, lake_sink(lake, tmp_path), db, ["t"], name=f"it-{db}-{lake}")
    _ingest(p2)
    t = TableId(db, "t")
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, str(result.metadata())
    lake_rows = read_lake_table(p2, t).to_pylist()
    assert sorted(r["id"] for r in lake_rows) == sorted(mysql_ids(mysql_params, db))
    if "ADD COLUMN d" in ddl[0]:  # the filled value in every old row, typed
        assert {r["d"] for r in lake_rows if r["id"] <= 3000} == {7}
    if "RENAME" in ddl[0]:  # the old rows' values under the new name
        assert all(r["w"] == r["id"] + (1 if r["id"] <= 10 else 0) for r in lake_rows if r["id"] <= 3000)


def _p1_with_ddl_mid_snapshot(p1, db: str, ddl: list[str], mysql_exec, snapshot: dict) -> None:
    """Pipeline 1's snapshot of ``db.t`` with ``ddl`` run in a thread from its first commit on,
    then Pipeline 1 caught up."""
    p1 = replace(p1, source={**p1.source, "scan.snapshot.fetch.size": "100", **snapshot})
    errors: list[BaseException] = []
    started: list[threading.Thread] = []

    def run_ddl() -> None:
        try:
            mysql_exec(db, *ddl)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def on_batch(batch: dict) -> None:
        # the first commit of the snapshot: the DDL runs while the rest of it is read (a thread:
        # the lock-free snapshot's transaction holds the table's metadata lock until it ends)
        if not started and (batch.get("position") or {}).get("phase") == "snapshot":
            started.append(threading.Thread(target=run_ddl, daemon=True))
            started[0].start()

    run_pipeline(p1, until_caught_up=True, batch_size=200, on_batch=on_batch)
    assert started, "the DDL did not start during the snapshot"
    started[0].join(120)
    assert not errors, errors
    run_pipeline(p1, until_caught_up=True)


def _ingest(p2) -> None:
    """Pipeline 2 caught up: two workers for Iceberg, one run for Paimon (one writer)."""
    if p2.sink_type == "iceberg":
        run_workers(replace(p2, pipeline={**p2.pipeline, "parallelism": "2"}), 2)
    else:
        run_pipeline(p2, until_caught_up=True)


@pytest.mark.parametrize("ddl, columns", [
    (["ALTER TABLE t ADD COLUMN w INT", "INSERT INTO t VALUES (100003, 3, 'x', 30)", "UPDATE t SET w = 1 WHERE id <= 10"],
     {"id": "int64", "v": "int32", "s": "string", "w": "int32"}),
    (["ALTER TABLE t DROP COLUMN s", "INSERT INTO t VALUES (100003, 3)", "UPDATE t SET v = v + 1 WHERE id <= 10"],
     {"id": "int64", "v": "int32"}),
    (["ALTER TABLE t MODIFY v BIGINT", "INSERT INTO t VALUES (100003, 30000000000, 'x')",
      "UPDATE t SET v = v + 1 WHERE id <= 10"],
     {"id": "int64", "v": "int64", "s": "string"}),
    (["ALTER TABLE t ADD COLUMN d INT NOT NULL DEFAULT 7", "INSERT INTO t VALUES (100003, 3, 'x', 8)"],
     {"id": "int64", "v": "int32", "s": "string", "d": "int32"}),
], ids=["add", "drop", "widen", "fill"])
def test_evolve_with_ddl_in_the_middle_of_an_incremental_snapshot(snapshot_with_ddl, mysql_params, kafka_bootstrap,
                                                                  tmp_path, lake, ddl, columns):
    """``schema.change.behavior: evolve``: chunks read after the ALTER carry the new definition while
    the binlog events replayed before it carry the old one; the lake ends equal to MySQL with the
    new definition's typed columns (a dropped column gone)."""
    db = snapshot_with_ddl(["CREATE TABLE t (id BIGINT PRIMARY KEY, v INT, s VARCHAR(10))",
                            "INSERT INTO t SELECT seq, seq, CONCAT('s', seq) FROM seq_1_to_3000"], ddl, INCREMENTAL)
    p2 = pipeline_2(kafka_bootstrap, lake_sink(lake, tmp_path), db, ["t"], name=f"it-{db}-{lake}")
    p2 = replace(p2, pipeline={**p2.pipeline, "schema.change.behavior": "evolve"})
    _ingest(p2)
    t = TableId(db, "t")
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, str(result.metadata())
    table = read_lake_table(p2, t)
    got = {f.name: _kind(f.type) for f in table.schema}
    if "DROP COLUMN s" in ddl[0] and "s" in got:
        # rows of the old definition written after the lake dropped s (another worker or partition
        # behind) add it back; it is then kept, never dropped on their evidence (a drop would lose
        # the values newer rows wrote): NULL in every row changed after the drop
        assert got.pop("s") == "string"
        assert all(r["s"] is None for r in table.to_pylist() if r["id"] > 3000 or r["id"] <= 10)
    assert got == columns
    assert sorted(r["id"] for r in table.to_pylist()) == sorted(mysql_ids(mysql_params, db))


def _kind(arrow_type) -> str:
    """``int32`` / ``int64`` / ``string`` (either lake's string flavour) / the type's name."""
    import pyarrow as pa

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    return str(arrow_type)


def mysql_ids(params: dict, db: str) -> list[int]:
    import pymysql

    conn = pymysql.connect(host=params["host"], port=params["port"], user=params["user"], password=params["password"],
                           database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM t")
            return [int(r[0]) for r in cur.fetchall()]
    finally:
        conn.close()
