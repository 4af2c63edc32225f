"""Iceberg update commits on tables of growing size: what a commit rewrites, per change (no Kafka).

For each ``--table-rows`` size (default 100k and 1M; add ``--table-rows 10000000`` for 10M) a
table is built through :class:`~changelake.connectors.iceberg.IcebergSink`'s columnar commit
(Arrow :class:`~changelake.changelog.change_batch.ChangeBatch` items, as Pipeline 2's columnar
lane hands them over) in commits of ``--load-rows`` (default 100,000 = ``commit.max-rows``, as a
snapshot read through Pipeline 2 is committed), so the table has the layout the sink gives it:
bucketed by key by default (``bucket[N](id)``, N from the first commit's rows and the topic
partitions), files sorted by key. Then ``--updates`` random-key updates over the whole table are
committed in commits of ``--commit-rows`` changes each (repeatable; default 10,000 and 100,000:
the shipped commit policy makes commits of ``commit.max-rows`` = 100,000 while a backlog is read,
and of what ``commit.interval`` = 10 s collects on a live stream, 10,000 at 1,000 changes/s).

Printed per size and commit size: the buckets, data files, update rows/s, seconds per commit
(p50 and max), rows rewritten per change (per commit: min / median / max; and in total), and
the rate of each size against the first size's (the issue's goal: 1M rows at >= 0.8x the 100k
rate). The load average goes beside each figure (the machine is shared). Run from the
repository root::

    .venv/bin/python bench/bench_iceberg_update_cost.py [--table-rows 100000 --table-rows 1000000 ...] \\
        [--updates 50000] [--commit-rows 10000 ...] [--no-buckets]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from changelake.changelog.change_batch import ChangeBatch  # noqa: E402
from changelake.changelog.schema import Schema, TableId  # noqa: E402
from changelake.changelog.types import parse_data_type  # noqa: E402
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions  # noqa: E402

SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("c", parse_data_type("STRING")),
                    ("n", parse_data_type("INT"))], ["id"])
TABLE = TableId("bench", "t")
TOPIC = "bench.t"


def _batch(ids: pa.Array, kind: str, n: int, first_offset: int) -> ChangeBatch:
    """A change batch of ``kind`` rows for keys ``ids`` (column ``c`` derived from the key, ``n``)."""
    rows = pa.table({"id": ids, "c": pc.cast(pc.bit_wise_and(ids, 1023), pa.string()),
                     "n": pa.array([n] * len(ids), pa.int32())})
    count = len(ids)
    offsets = pa.array(range(first_offset, first_offset + count), pa.int64())
    return ChangeBatch(TABLE, SCHEMA, rows, pa.array([kind] * count, pa.string()), offsets, TOPIC, 0, count,
                       first_offset + count - 1, lambda: [], {"c" if kind == "+I" else "u": count})


def _layout(sink: IcebergSink) -> tuple[str, int]:
    table = sink.load_table(TABLE)
    assert table is not None
    files = sum(1 for _ in table.scan().plan_files())
    return str(table.spec().fields[0].transform) if table.spec().fields else "unpartitioned", files


def _summed(sink: IcebergSink, since_ms: int, key: str) -> int:
    """Snapshot-summary property ``key`` summed over the snapshots committed at or after ``since_ms``."""
    table = sink.load_table(TABLE)
    assert table is not None
    return sum(int((s.summary or {}).get(key, 0) or 0) for s in table.metadata.snapshots if s.timestamp_ms >= since_ms)


def updates(sink: IcebergSink, table_rows: int, count: int, commit_rows: int, offset: int, seed: int) -> dict[str, Any]:
    """Commit ``count`` random-key updates in commits of ``commit_rows``; the figures of the commits."""
    rng = random.Random(seed)
    per_commit: list[float] = []
    seconds: list[float] = []
    rewritten = changed = 0
    load0 = os.getloadavg()[0]
    since_ms = int(time.time() * 1000)
    cpu0 = time.process_time()
    start = time.perf_counter()
    for done in range(0, count, commit_rows):
        n = min(commit_rows, count - done)
        ids = pa.array([rng.randrange(table_rows) for _ in range(n)], pa.int64())
        t0 = time.perf_counter()
        result = sink.write(TABLE, [_batch(ids, "+U", 1, offset)], SCHEMA, {f"{TOPIC}/0": offset + n})
        seconds.append(time.perf_counter() - t0)
        offset += n
        rewritten += result.rows_rewritten
        changed += result.rows_upserted + result.keys_deleted
        per_commit.append(result.rows_rewritten / max(1, result.rows_upserted + result.keys_deleted))
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    # the snapshot summaries say the same (changelake.rows-rewritten / rows-changed per commit)
    summary = (_summed(sink, since_ms, "changelake.rows-rewritten"), _summed(sink, since_ms, "changelake.rows-changed"))
    return {"rate": count / elapsed, "commits": len(seconds), "p50_s": statistics.median(seconds),
            "max_s": max(seconds), "rewritten": per_commit, "total_rewritten": rewritten / max(changed, 1),
            "summary_agrees": summary == (rewritten, changed), "cpu_us": cpu * 1e6 / count, "offset": offset,
            "load": f"{load0:.1f} -> {os.getloadavg()[0]:.1f}"}


def run(buckets: bool, table_rows: int, count: int, commit_sizes: list[int], load_rows: int) -> list[dict[str, Any]]:
    """Build the table, then commit the updates once per commit size (on the same table, in turn)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="changelake-bench-update-") as d:
        sink = IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{d}/c.db", f"file://{d}/wh",
                                                  **{"bucket-by-key": str(buckets).lower()}))
        with sink:
            start = time.perf_counter()
            for s in range(0, table_rows, load_rows):
                ids = pa.array(range(s, min(s + load_rows, table_rows)), pa.int64())
                sink.write(TABLE, [_batch(ids, "+I", 0, s)], SCHEMA, {f"{TOPIC}/0": s + len(ids)})
            load_rate = table_rows / (time.perf_counter() - start)
            offset = table_rows
            for i, commit_rows in enumerate(commit_sizes):
                spec, files = _layout(sink)
                r = updates(sink, table_rows, count, commit_rows, offset, seed=i + 1)
                offset = r["offset"]
                out.append({**r, "spec": spec, "files": files, "files_after": _layout(sink)[1], "load_rate": load_rate,
                            "commit_rows": commit_rows})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table-rows", type=int, action="append", default=None,
                        help="table size (repeat; default 100000 and 1000000)")
    parser.add_argument("--updates", type=int, default=50_000, help="random-key updates per size and commit size")
    parser.add_argument("--commit-rows", type=int, action="append", default=None,
                        help="changes per update commit (repeat; default 10000 and 100000)")
    parser.add_argument("--load-rows", type=int, default=100_000, help="rows per commit while building the table")
    parser.add_argument("--no-buckets", action="store_true", help="unpartitioned tables (bucket-by-key: false)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    sizes = args.table_rows or [100_000, 1_000_000]
    commit_sizes = args.commit_rows or [10_000, 100_000]
    print(f"{os.cpu_count()} CPUs, load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())} at the start; "
          f"{args.updates:,} random-key updates per table size and commit size, the commit sizes in turn on one table",
          flush=True)
    first: dict[int, float] = {}
    for size in sizes:
        for r in run(not args.no_buckets, size, args.updates, commit_sizes, args.load_rows):
            base = first.setdefault(r["commit_rows"], r["rate"])
            per = r["rewritten"]
            print(f"{size:>11,} rows ({r['spec']}, {r['files']} files -> {r['files_after']}), "
                  f"{r['commits']} commits of {r['commit_rows']:,}: updates {r['rate']:8,.0f}/s "
                  f"({r['rate'] / base:.2f}x the {sizes[0]:,}-row rate), commit p50 {r['p50_s']:.2f} s "
                  f"max {r['max_s']:.2f} s, rewritten/change per commit min {min(per):.2f} median "
                  f"{statistics.median(per):.2f} max {max(per):.2f}, total {r['total_rewritten']:.2f} "
                  f"(snapshot summaries agree: {r['summary_agrees']}), CPU {r['cpu_us']:.0f} us/change; "
                  f"built at {r['load_rate']:,.0f} rows/s; load {r['load']}", flush=True)


if __name__ == "__main__":
    main()
