"""What an Iceberg commit costs as the table's snapshot history grows, with and without the
sink's cached transaction metadata, in one run.

pyiceberg 0.12's ``Transaction.table_metadata`` replays the staged updates and deep-copies the
whole table metadata (snapshot list included) on every read, and a commit reads it about 60
times (iceberg-python #2673): a commit's cost follows the table's history, not its rows.
:class:`~changelake.connectors.iceberg.writer.OffsetsCheckedTransaction` computes it once per
staged state. This bench writes ``--commits`` small upsert commits (``--rows`` rows each, keys
changing, as a live stream at ``commit.interval`` does) to two tables side by side, one commit
to each in turn: ``cached`` (the sink as it is) and ``pyiceberg`` (the same sink with pyiceberg's
own property put back), with the collector's young-generation threshold raised as the runner
loop raises it for a run (:func:`changelake.collector.young_generation`). At each ``--at`` depth it prints the median commit time of the last
``--window`` commits of each arm and their ratio. Two snapshots per commit (the copy-on-write
overwrite and the append); ``history.expire.max-snapshot-age-ms`` is 5 days by default, so a
table committed every 10 s holds about 17,000 of them before it may expire any.

    .venv/bin/python bench/bench_iceberg_commit_history.py [--commits 600] [--at 10 --at 100 --at 300 --at 600]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pyiceberg.table import Transaction

from changelake.changelog.row import ChangelogRow
from changelake.collector import young_generation
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions
from changelake.connectors.iceberg import writer as iceberg_writer

SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("name", parse_data_type("STRING"))], ["id"])


class _PyicebergMetadataTransaction(iceberg_writer.OffsetsCheckedTransaction):
    """The sink's transaction with pyiceberg's own ``table_metadata`` (computed on every read)."""

    table_metadata = Transaction.table_metadata  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=600, help="commits per table (default 600)")
    parser.add_argument("--rows", type=int, default=20, help="changed rows per commit (default 20)")
    parser.add_argument("--at", type=int, action="append", default=None,
                        help="commit counts to report at (default 10, 100, 300, 600)")
    parser.add_argument("--window", type=int, default=5, help="commits per reported median (default 5)")
    args = parser.parse_args()
    marks = sorted(args.at or [10, 100, 300, 600])
    tmp = Path(tempfile.mkdtemp(prefix="bench-commit-history-"))
    sink = IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{tmp}/catalog.db", f"file://{tmp}/warehouse"))
    original = iceberg_writer.OffsetsCheckedTransaction
    arms = {"cached": (TableId("bench", "cached"), original),
            "pyiceberg": (TableId("bench", "pyiceberg"), _PyicebergMetadataTransaction)}
    times: dict[str, list[float]] = {name: [] for name in arms}
    print(f"{args.commits} commits of {args.rows} changed rows per table, the two tables in turn")
    print(f"{'commits':>8} {'snapshots':>9} {'cached ms':>10} {'pyiceberg ms':>13} {'pyiceberg / cached':>19}")
    with sink, young_generation():
        for i in range(1, args.commits + 1):
            rows = [ChangelogRow(RowKind.UPDATE_AFTER, {"id": k, "name": f"v{i}"})
                    for k in range(i % 500, i % 500 + args.rows)]
            for name, (table_id, transaction) in arms.items():
                iceberg_writer.OffsetsCheckedTransaction = transaction  # type: ignore[misc]
                try:
                    started = time.perf_counter()
                    sink.write(table_id, rows, SCHEMA, {f"{name}/0": i})
                    times[name].append(time.perf_counter() - started)
                finally:
                    iceberg_writer.OffsetsCheckedTransaction = original  # type: ignore[misc]
            if i in marks:
                table = sink.load_table(arms["cached"][0])
                snapshots = len(table.metadata.snapshots) if table is not None else 0
                cached, plain = (statistics.median(times[n][-args.window:]) * 1000 for n in ("cached", "pyiceberg"))
                print(f"{i:>8} {snapshots:>9} {cached:>10.1f} {plain:>13.1f} {plain / cached:>18.2f}x", flush=True)


if __name__ == "__main__":
    main()
