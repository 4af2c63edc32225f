"""Benchmark: upsert N changelog rows over K keys into an Iceberg table (SqlCatalog, local files).

Prints rows/s for :class:`IcebergSink` (compact + delete(In) + append in one transaction) with a
single and a composite key, and for pyiceberg's own ``Table.upsert`` on the same compacted
batches (single key only; see the comment in ``main``) for comparison. Not part of the test run.

    .venv/bin/python bench/bench_iceberg_write.py --rows 200000 --keys 50000 --batch 20000
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import warnings
from pathlib import Path

import pyarrow as pa

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions
from changelake.connectors.iceberg.compaction import compact

SINGLE = Schema.of(
    [("id", parse_data_type("BIGINT NOT NULL")), ("name", parse_data_type("STRING")), ("qty", parse_data_type("INT"))],
    ["id"],
)
COMPOSITE = Schema.of(
    [
        ("region", parse_data_type("VARCHAR(8) NOT NULL")),
        ("id", parse_data_type("BIGINT NOT NULL")),
        ("name", parse_data_type("STRING")),
        ("qty", parse_data_type("INT")),
    ],
    ["region", "id"],
)
REGIONS = ["eu", "us", "ap", "sa"]


def changelog(n: int, keys: int, composite: bool, seed: int = 7) -> list[ChangelogRow]:
    rng = random.Random(seed)
    seen: set[int] = set()
    rows = []
    for i in range(n):
        k = rng.randrange(keys)
        values = {"id": k // len(REGIONS) if composite else k, "name": f"n{i}", "qty": i % 1000}
        if composite:
            values = {"region": REGIONS[k % len(REGIONS)], **values}
        rows.append(ChangelogRow(RowKind.UPDATE_AFTER if k in seen else RowKind.INSERT, values))
        seen.add(k)
    return rows


def run_sink(rows: list[ChangelogRow], schema: Schema, batch: int, root: Path) -> float:
    options = IcebergSinkOptions.sql(f"sqlite:///{root}/c.db", f"file://{root}/wh")
    table = TableId("bench", "t")
    start = time.perf_counter()
    with IcebergSink(options) as sink:
        for i in range(0, len(rows), batch):
            sink.write(table, rows[i : i + batch], schema, {"bench/0": i + batch})
    return time.perf_counter() - start


def run_pyiceberg_upsert(rows: list[ChangelogRow], schema: Schema, batch: int, root: Path) -> float:
    options = IcebergSinkOptions.sql(f"sqlite:///{root}/c.db", f"file://{root}/wh")
    table_id = TableId("bench", "t")
    with IcebergSink(options) as sink:
        table = sink.ensure_table(table_id, schema)
        arrow_schema = table.schema().as_arrow()
        start = time.perf_counter()
        for i in range(0, len(rows), batch):
            compacted = compact(rows[i : i + batch], schema.primary_key, table="bench.t")
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
    parser.add_argument("--skip-upsert", action="store_true", help="skip pyiceberg's Table.upsert comparison")
    args = parser.parse_args()
    print(f"N={args.rows} rows over K={args.keys} keys, {args.batch} rows per commit")
    for label, schema in (("single key (BIGINT)", SINGLE), ("composite key (VARCHAR, BIGINT)", COMPOSITE)):
        rows = changelog(args.rows, args.keys, schema is COMPOSITE)
        with tempfile.TemporaryDirectory() as tmp:
            secs = run_sink(rows, schema, args.batch, Path(tmp))
        print(f"IcebergSink.write     {label:32s} {args.rows / secs:10,.0f} rows/s ({secs:.2f} s)")
        # pyiceberg's upsert builds Or(And(EqualTo...)) per composite key: with thousands of keys
        # per commit it takes minutes or overflows the stack, so it is compared on the single key only.
        if not args.skip_upsert and schema is SINGLE:
            with tempfile.TemporaryDirectory() as tmp:
                secs = run_pyiceberg_upsert(rows, schema, args.batch, Path(tmp))
            print(f"pyiceberg Table.upsert {label:32s} {args.rows / secs:10,.0f} rows/s ({secs:.2f} s)")


if __name__ == "__main__":
    main()
