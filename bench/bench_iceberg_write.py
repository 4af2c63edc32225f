"""Benchmark of Pipeline 2's lake write: changelog rows into Iceberg and Paimon, side by side.

For each workload (N changelog rows over K keys, one commit per ``--batch`` rows) and each lake it
prints the sink's rows/s: :class:`IcebergSink` (compact + delete(In) + append in one transaction,
copy-on-write) and :class:`PaimonSink` (compact + rows with their Paimon row kind, merge-on-read).
Workloads:

* ``insert-only``: N new keys, every row ``+I``.
* ``update-heavy``: K keys inserted, then ``+U`` of random keys (N - K updates).
* ``delete-heavy``: random keys; a present key is deleted (``-D``) 60 % of the time, else
  updated; an absent key is inserted (about a third of the rows are deletes).

Each run ends with a check that the lake holds exactly the expected key set. ``--with-upsert``
adds pyiceberg's own ``Table.upsert`` on the update-heavy stream (single key) for comparison.
Not part of the test run.

    .venv/bin/python bench/bench_iceberg_write.py --rows 100000 --keys 20000 --batch 10000
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions
from changelake.connectors.iceberg import read_table as read_iceberg
from changelake.connectors.lake.compaction import compact
from changelake.connectors.paimon import PaimonSink, PaimonSinkOptions
from changelake.connectors.paimon import read_table as read_paimon

SCHEMA = Schema.of(
    [("id", parse_data_type("BIGINT NOT NULL")), ("name", parse_data_type("STRING")), ("qty", parse_data_type("INT"))],
    ["id"],
)
TABLE = TableId("bench", "t")


def _row(kind: RowKind, key: int, i: int) -> ChangelogRow:
    return ChangelogRow(kind, {"id": key, "name": f"n{i}", "qty": i % 1000})


def insert_only(n: int, keys: int, rng: random.Random) -> tuple[list[ChangelogRow], set[int]]:
    return [_row(RowKind.INSERT, i, i) for i in range(n)], set(range(n))


def update_heavy(n: int, keys: int, rng: random.Random) -> tuple[list[ChangelogRow], set[int]]:
    rows = [_row(RowKind.INSERT, k, k) for k in range(min(keys, n))]
    rows += [_row(RowKind.UPDATE_AFTER, rng.randrange(keys), i) for i in range(len(rows), n)]
    return rows, set(range(min(keys, n)))


def delete_heavy(n: int, keys: int, rng: random.Random) -> tuple[list[ChangelogRow], set[int]]:
    present: set[int] = set()
    rows = []
    for i in range(n):
        k = rng.randrange(keys)
        if k not in present:
            rows.append(_row(RowKind.INSERT, k, i))
            present.add(k)
        elif rng.random() < 0.6:
            rows.append(_row(RowKind.DELETE, k, i))
            present.discard(k)
        else:
            rows.append(_row(RowKind.UPDATE_AFTER, k, i))
    return rows, present


WORKLOADS: dict[str, Callable[[int, int, random.Random], tuple[list[ChangelogRow], set[int]]]] = {
    "insert-only": insert_only,
    "update-heavy": update_heavy,
    "delete-heavy": delete_heavy,
}


def run_lake(lake: str, rows: list[ChangelogRow], batch: int, root: Path, paimon_extra: dict[str, Any]) -> tuple[float, set[int]]:
    """Seconds to write ``rows`` in commits of ``batch`` rows, and the key set the lake then holds."""
    if lake == "iceberg":
        options: Any = IcebergSinkOptions.sql(f"sqlite:///{root}/c.db", f"file://{root}/wh")
        sink: Any = IcebergSink(options)
        reader: Any = read_iceberg
    else:
        options = PaimonSinkOptions.filesystem(root / "paimon", **paimon_extra)
        sink = PaimonSink(options)
        reader = read_paimon
    start = time.perf_counter()
    with sink:
        for i in range(0, len(rows), batch):
            sink.write(TABLE, rows[i : i + batch], SCHEMA, {"bench/0": i + batch})
    secs = time.perf_counter() - start
    return secs, set(reader(options, TABLE, ["id"]).column("id").to_pylist())


def run_pyiceberg_upsert(rows: list[ChangelogRow], batch: int, root: Path) -> float:
    options = IcebergSinkOptions.sql(f"sqlite:///{root}/c.db", f"file://{root}/wh")
    with IcebergSink(options) as sink:
        table = sink.ensure_table(TABLE, SCHEMA)
        arrow_schema = table.schema().as_arrow()
        start = time.perf_counter()
        for i in range(0, len(rows), batch):
            compacted = compact(rows[i : i + batch], SCHEMA.primary_key, table="bench.t")
            df = pa.Table.from_pylist([dict(v) for v in compacted.upserts.values()], schema=arrow_schema)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                table.upsert(df)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="changelog rows N (default 100000)")
    parser.add_argument("--keys", type=int, default=20_000, help="distinct keys K (default 20000)")
    parser.add_argument("--batch", type=int, default=10_000, help="rows per commit (default 10000)")
    parser.add_argument("--lakes", default="iceberg,paimon", help="lakes to run, comma-separated (default both)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="workloads, comma-separated (default all)")
    parser.add_argument("--paimon-bucket", default=None,
                        help="Paimon 'bucket' table property (default: the sink's, a fixed count from the first "
                             "write's rows; -1 = Paimon's dynamic buckets)")
    parser.add_argument("--paimon-deletion-vectors", action="store_true",
                        help="create the Paimon table with deletion-vectors.enabled (as the seed)")
    parser.add_argument("--with-upsert", action="store_true",
                        help="also time pyiceberg's Table.upsert on the update-heavy stream")
    args = parser.parse_args()
    lakes = [x for x in args.lakes.split(",") if x]
    paimon_extra: dict[str, Any] = {}
    if args.paimon_bucket is not None:
        paimon_extra["table.properties.bucket"] = args.paimon_bucket
    if args.paimon_deletion_vectors:
        paimon_extra["table.properties.deletion-vectors.enabled"] = "true"
    print(f"N={args.rows} rows over K={args.keys} keys, {args.batch} rows per commit; "
          f"{os.cpu_count()} CPUs, load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'workload':14s} {'changelog':>26s} " + " ".join(f"{lake + ' rows/s':>16s}" for lake in lakes))
    for name in [w for w in args.workloads.split(",") if w]:
        rows, expected = WORKLOADS[name](args.rows, args.keys, random.Random(7))
        kinds: dict[str, int] = {}
        for r in rows:
            kinds[r.kind.short_string] = kinds.get(r.kind.short_string, 0) + 1
        figures = []
        for lake in lakes:
            with tempfile.TemporaryDirectory() as tmp:
                secs, held = run_lake(lake, rows, args.batch, Path(tmp), paimon_extra)
            if held != expected:
                raise SystemExit(f"{lake} {name}: the lake holds {len(held)} keys, expected {len(expected)}")
            figures.append(f"{len(rows) / secs:10,.0f} ({secs:4.1f}s)")
        mix = " ".join(f"{k}{v}" for k, v in sorted(kinds.items()))
        print(f"{name:14s} {mix:>26s} " + " ".join(f"{f:>16s}" for f in figures), flush=True)
    if args.with_upsert:
        rows, _ = update_heavy(args.rows, args.keys, random.Random(7))
        with tempfile.TemporaryDirectory() as tmp:
            secs = run_pyiceberg_upsert(rows, args.batch, Path(tmp))
        print(f"pyiceberg Table.upsert, update-heavy: {args.rows / secs:,.0f} rows/s ({secs:.1f}s)")


if __name__ == "__main__":
    main()
