"""Pipeline 2 with ``pipeline.parallelism: 2``: two worker processes in one Kafka consumer group;
one is killed with SIGKILL mid-stream, the group rebalances, and the lake still equals MySQL
(nothing lost, nothing applied twice)."""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import replace

import pytest

from changelake.changelog import TableId
from changelake.connectors.lake.errors import LakeSinkError
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.scale_out import run_workers
from changelake.pipeline.verify import verify_lake_table

pytestmark = pytest.mark.integration


def test_two_workers_one_killed_with_sigkill_keep_the_lake_exact(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    tables = ["a", "b", "c"]
    for t in tables:
        mysql_exec(db, f"CREATE TABLE {t} (id INT PRIMARY KEY, n INT)", f"INSERT INTO {t} SELECT seq, 0 FROM seq_1_to_4000")
    p1, p2 = pipeline_pair(db, tables)
    p2 = replace(
        p2, pipeline={**p2.pipeline, "parallelism": "2"}, sink={**p2.sink, "commit.interval": "300ms", "commit.max-rows": "500"}
    )
    run_pipeline(p1, until_caught_up=True)

    batches: list[dict] = []
    workers: list = []
    first_batch = threading.Event()
    stop = threading.Event()
    result: dict = {}

    def on_batch(batch: dict) -> None:
        batches.append(batch)
        first_batch.set()

    def run() -> None:
        try:
            result["stats"] = run_workers(p2, stop=stop, batch_size=200, on_batch=on_batch, on_start=workers.extend)
        except BaseException as exc:  # surfaced below
            result["error"] = exc

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        assert first_batch.wait(120), "no worker committed a batch"
        # The first worker to commit owns partitions and is mid-stream (it may hold uncommitted polls).
        victim = next(w for w in workers if w.pid == batches[0]["pid"])
        os.kill(victim.pid, signal.SIGKILL)
        # More changes while the group rebalances (the dead member times out, a replacement joins).
        for t in tables:
            mysql_exec(db, f"UPDATE {t} SET n = n + 1 WHERE id % 3 = 0", f"DELETE FROM {t} WHERE id % 7 = 0")
        run_pipeline(p1, until_caught_up=True)
        deadline = time.monotonic() + 180
        pending = set(tables)
        while pending and time.monotonic() < deadline:
            for t in sorted(pending):
                try:
                    if verify_lake_table(p2, TableId(db, t), mysql=mysql_params, recheck_after_s=0).passed:
                        pending.discard(t)
                except LakeSinkError:  # not created yet
                    pass
            time.sleep(1)
    finally:
        stop.set()
        runner.join(120)
    assert "error" not in result, result
    assert victim.exitcode == -signal.SIGKILL
    # Both workers committed (round-robin assignment spreads the table topics over them).
    assert len({b["worker"] for b in batches}) == 2
    assert not pending, f"lake tables {sorted(pending)} did not converge to MySQL"
    for t in tables:
        check = verify_lake_table(p2, TableId(db, t), mysql=mysql_params)
        assert check.passed, check.metadata()
        assert check.metadata()["rows_lake"] == 4000 - 4000 // 7
    # A single-process run afterwards finds nothing left to apply.
    again = run_pipeline(replace(p2, pipeline={**p2.pipeline, "parallelism": "1"}), until_caught_up=True)
    assert sum(again.tables.values()) == 0, again
