"""Trial 4 (a newcomer breaking the platform): lake maintenance (``changelake lake maintain``:
compaction, snapshot expiry, orphan removal) run again and again *while* both pipelines run
continuously and MySQL keeps writing (the README: "Safe beside a running pipeline: a step that
loses a commit race changes nothing"). Neither pipeline may fail, and once caught up the lake must
equal MySQL without duplicate keys."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace

import pymysql
import pytest

from changelake.changelog import TableId
from changelake.connectors.iceberg.maintenance import MaintenanceError, MaintenanceOptions
from changelake.pipeline.maintenance import maintain_pipeline_lake
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration

#: Expire everything but the current snapshot, compact from two small files; the orphan window
#: stays the default (3 days), as the README's command runs it.
AGGRESSIVE = MaintenanceOptions(max_snapshot_age_ms=0, min_snapshots_to_keep=1, min_input_files=2)


@pytest.mark.parametrize("lake", ["iceberg"])  # maintenance is Iceberg's
@pytest.mark.parametrize("sink_extra", [{}, {"partition.key": "{db}.t:bucket[4](id)"}], ids=["unpartitioned", "bucketed"])
def test_maintenance_beside_running_pipelines_keeps_the_lake_exact(database_factory, mysql_exec, mysql_params,
                                                                   pipeline_pair, sink_extra):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))",
               "INSERT INTO t SELECT seq, 0, 'x' FROM seq_1_to_2000")
    p1, p2 = pipeline_pair(db, ["t"])
    p2 = replace(p2, sink={**p2.sink, "commit.max-rows": "100", **{k: v.format(db=db) for k, v in sink_extra.items()}})
    t = TableId(db, "t")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)

    stop = threading.Event()
    errors: list[BaseException] = []

    def guarded(fn) -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    def writer() -> None:
        rng, next_id = random.Random(4), 10_000
        conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
        with conn.cursor() as cur:
            while not stop.is_set():
                k, op = rng.randint(1, 2000), rng.random()
                if op < 0.55:
                    cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (k,))
                elif op < 0.7:
                    cur.execute("DELETE FROM t WHERE id = %s", (k,))
                elif op < 0.85:
                    next_id += 1
                    cur.execute("INSERT INTO t VALUES (%s, 1, 'new')", (next_id,))
                else:
                    next_id += 1
                    cur.execute("UPDATE t SET id = %s WHERE id = %s", (next_id, k))
                time.sleep(0.002)
        conn.close()

    threads = [threading.Thread(target=guarded, args=(fn,), daemon=True) for fn in (
        writer,
        lambda: run_pipeline(p1, stop=stop, batch_size=200),
        lambda: run_pipeline(p2, stop=stop, batch_size=200),
    )]
    for th in threads:
        th.start()
    lost_races = rounds = expired = compacted = 0
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and not errors:
        try:
            for r in maintain_pipeline_lake(p2, AGGRESSIVE):
                expired += r.snapshots_expired
                compacted += r.files_compacted
        except MaintenanceError:
            lost_races += 1  # documented: a step that loses a commit race changes nothing
        rounds += 1
        time.sleep(0.5)
    stop.set()
    for th in threads:
        th.join(120)
    assert not errors, errors
    assert rounds >= 3, rounds
    assert expired > 0, (rounds, lost_races)  # maintenance did work beside the running commits
    print(f"maintenance rounds={rounds} lost_races={lost_races} snapshots_expired={expired} files_compacted={compacted}")

    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    maintain_pipeline_lake(p2, AGGRESSIVE)  # and once more on a quiet lake
    ids = [r["id"] for r in read_lake_table(p2, t).to_pylist()]
    assert len(ids) == len(set(ids)), "a duplicate key in the lake"
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, (result.metadata(), rounds, lost_races)
