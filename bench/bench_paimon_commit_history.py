"""What a Paimon commit, a checkpoint read and a full read cost as the table's history grows,
for the bucket modes side by side, in one run.

pypaimon 2.1 never compacts, and the Paimon sink opens a writer per commit (one Paimon commit per
Pipeline 2 batch, plus one of the checkpoint table ``changelake.pipeline_checkpoints``). Each
commit adds level-0 files, and what a commit and a read have to look at grows with them:

* ``fixed`` (the sink's default since 2026-12-06: ``bucket`` = 1 up to 2M rows,
  :func:`~changelake.connectors.paimon.options.default_bucket_count`);
* ``dynamic`` (Paimon's own default for a primary-key table, ``bucket = -1``, the sink's before:
  its writer also loads and rewrites the key -> bucket hash index on every commit);
* ``fixed-8`` (``bucket = 8``: eight files per commit of random keys).

Each mode gets its own warehouse: a ``--table-rows``-row table (loaded in one commit, not
timed), then ``--commits`` commits of ``--rows`` random-key upserts, each followed by a
checkpoint write, as Pipeline 2 commits a batch. At each ``--at`` depth it prints the median time
of the last ``--window`` table commits and checkpoint writes, one ``read_checkpoint`` (what a
restart reads first) and one full read of the table (what a key-state check reads), and each
mode against ``fixed``. Run from the repository root::

    .venv/bin/python bench/bench_paimon_commit_history.py [--commits 400] [--at 10 --at 100 --at 400]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.collector import young_generation
from changelake.connectors.paimon import PaimonSink, PaimonSinkOptions

SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("name", parse_data_type("STRING")),
                    ("qty", parse_data_type("INT"))], ["id"])
TABLE = TableId("bench", "orders")
MODES = {"fixed": {}, "dynamic": {"table.properties.bucket": "-1"}, "fixed-8": {"table.properties.bucket": "8"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=400, help="table commits after the load (default 400)")
    parser.add_argument("--rows", type=int, default=20, help="random-key upserts per commit (default 20)")
    parser.add_argument("--table-rows", type=int, default=10_000, help="rows loaded first (default 10,000)")
    parser.add_argument("--at", type=int, action="append", default=None, help="history depths to report (repeatable)")
    parser.add_argument("--window", type=int, default=5, help="commits per median (default 5)")
    parser.add_argument("--mode", action="append", choices=sorted(MODES), default=None, help="bucket modes (default all)")
    args = parser.parse_args()
    depths = sorted({d for d in (args.at or [10, 100, 200]) if d <= args.commits} | {args.commits})
    modes = args.mode or list(MODES)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {args.table_rows:,}-row table, "
          f"{args.commits} commits of {args.rows} random-key upserts, each with a checkpoint write")
    results: dict[str, dict[int, tuple[float, float, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="changelake-bench-paimon-") as tmp:
        for mode in modes:
            options = PaimonSinkOptions.filesystem(Path(tmp) / mode, **MODES[mode])
            rng = random.Random(6)
            results[mode] = {}
            with PaimonSink(options) as sink, young_generation():
                sink.write(TABLE, [ChangelogRow.insert({"id": k, "name": "n", "qty": 0}) for k in range(args.table_rows)],
                           SCHEMA, {"t/0": 1})
                sink.write_checkpoint("bench", {"t/0": 1})
                commits: list[float] = []
                checkpoints: list[float] = []
                for n in range(1, args.commits + 1):
                    rows = [ChangelogRow(RowKind.UPDATE_AFTER, {"id": rng.randrange(args.table_rows), "name": "u", "qty": n})
                            for _ in range(args.rows)]
                    start = time.perf_counter()
                    sink.write(TABLE, rows, SCHEMA, {"t/0": n + 1})
                    commits.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    sink.write_checkpoint("bench", {"t/0": n + 1})
                    checkpoints.append(time.perf_counter() - start)
                    if n in depths:
                        start = time.perf_counter()
                        assert sink.read_checkpoint("bench") == {"t/0": n + 1}
                        restart = time.perf_counter() - start
                        start = time.perf_counter()
                        assert sink.read_table(TABLE).num_rows == args.table_rows
                        read = time.perf_counter() - start
                        results[mode][n] = (statistics.median(commits[-args.window:]),
                                            statistics.median(checkpoints[-args.window:]), restart, read)
                        print(f"  {mode:8} after {n:5} commits: commit {results[mode][n][0] * 1000:7.0f} ms, "
                              f"checkpoint write {results[mode][n][1] * 1000:6.0f} ms, read_checkpoint "
                              f"{restart * 1000:6.0f} ms, full read {read * 1000:7.0f} ms", flush=True)
    print()
    print(f"{'mode':9} {'commits':>7} {'commit ms':>10} {'ckpt write ms':>14} {'read_checkpoint ms':>19} "
          f"{'full read ms':>13}  against fixed (commit / ckpt write / read_checkpoint / full read)")
    for mode in modes:
        for n in depths:
            c, w, r, f = results[mode][n]
            base = results.get("fixed", {}).get(n)
            against = " / ".join(f"{a / b:.2f}x" for a, b in zip((c, w, r, f), base)) if base else ""
            print(f"{mode:9} {n:7} {c * 1000:10.0f} {w * 1000:14.0f} {r * 1000:19.0f} {f * 1000:13.0f}  {against}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
