"""Iceberg update commits: unpartitioned against bucketed by key, in one run (no Kafka).

For a table of ``--table-rows`` rows (inserted in commits of ``--batch``), then ``--updates``
random-key updates over the whole table in commits of ``--batch`` rows, prints per layout the
insert and update rows/s of :class:`~changelake.connectors.iceberg.IcebergSink` and the rows the
copy-on-write rewrote per changed key (``WriteResult.rows_rewritten``). Run from the repository
root::

    .venv/bin/python bench/bench_iceberg_update_cost.py [--table-rows 100000] [--updates 50000] [--batch 10000 ...]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from changelake.changelog.row import ChangelogRow  # noqa: E402
from changelake.changelog.rowkind import RowKind  # noqa: E402
from changelake.changelog.schema import Schema, TableId  # noqa: E402
from changelake.changelog.types import parse_data_type  # noqa: E402
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions  # noqa: E402

SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("c", parse_data_type("STRING")),
                    ("n", parse_data_type("INT"))], ["id"])
TABLE = TableId("bench", "t")


def run(buckets: bool, table_rows: int, updates: int, batch: int) -> tuple[float, float, float]:
    """(insert rows/s, update rows/s, rows rewritten per changed key)."""
    with tempfile.TemporaryDirectory() as d:
        sink = IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{d}/c.db", f"file://{d}/wh",
                                                  **{"bucket-by-key": str(buckets).lower()}))
        with sink:
            start = time.perf_counter()
            for s in range(0, table_rows, batch):
                rows = [ChangelogRow(RowKind.INSERT, {"id": k, "c": f"c{k % 977}", "n": 0})
                        for k in range(s, min(s + batch, table_rows))]
                sink.write(TABLE, rows, SCHEMA, {"x/0": s + len(rows)})
            inserts = table_rows / (time.perf_counter() - start)
            rng = random.Random(1)
            offset, rewritten, changed = table_rows, 0, 0
            start = time.perf_counter()
            for _ in range(0, updates, batch):
                rows = [ChangelogRow(RowKind.UPDATE_AFTER, {"id": rng.randrange(table_rows), "c": "u", "n": 1})
                        for _ in range(batch)]
                offset += batch
                result = sink.write(TABLE, rows, SCHEMA, {"x/0": offset})
                rewritten += result.rows_rewritten
                changed += result.rows_upserted
            rate = updates / (time.perf_counter() - start)
    return inserts, rate, rewritten / max(changed, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table-rows", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=50_000)
    parser.add_argument("--batch", type=int, action="append", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    for batch in args.batch or [10_000, 50_000]:
        for buckets in (False, True):
            inserts, updates, rewritten = run(buckets, args.table_rows, args.updates, batch)
            layout = "bucketed by key" if buckets else "unpartitioned"
            print(f"{args.table_rows:,} rows, commits of {batch:,}, {layout:15s}: inserts {inserts:9,.0f}/s  "
                  f"updates {updates:9,.0f}/s  rewritten/change {rewritten:5.2f}", flush=True)


if __name__ == "__main__":
    main()
