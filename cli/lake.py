"""``changelake lake maintain FILE.yaml``: table maintenance for a pipeline's lake.

Compacts small data files, expires snapshots and deletes unreferenced and orphan files in every
lake table of the pipeline's sink, when its sink type declares maintenance (``iceberg``, see
:mod:`changelake.connectors.iceberg.maintenance`; :mod:`changelake.pipeline.maintenance`).
Defaults come from each table's properties (``history.expire.max-snapshot-age-ms``,
``history.expire.min-snapshots-to-keep``, ``write.target-file-size-bytes``), as Iceberg's own actions.
Safe beside a running pipeline: a step that loses a commit race is reported and changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["register", "maintain"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("lake", help="lake table maintenance")
    sub = p.add_subparsers(dest="lake_command", required=True)
    m = sub.add_parser("maintain", help="compact, expire snapshots and remove orphan files of FILE.yaml's lake tables")
    m.add_argument("file", type=Path, help="a pipeline YAML whose sink declares maintenance (iceberg)")
    m.add_argument("--table", action="append", default=None, metavar="NS.TABLE", help="only this table (repeatable)")
    m.add_argument("--max-snapshot-age-ms", type=int, default=None, help="expire snapshots older than this (ms)")
    m.add_argument("--min-snapshots-to-keep", type=int, default=None, help="newest snapshots never expired")
    m.add_argument(
        "--orphan-older-than-ms", type=int, default=3 * 24 * 3600 * 1000, help="keep unreferenced files younger than this (ms)"
    )
    m.add_argument("--min-input-files", type=int, default=5, help="compact only with at least this many small files")
    m.set_defaults(func=maintain)


def maintain(args: argparse.Namespace) -> int:
    from changelake.connectors.lake.maintenance import MaintenanceOptions
    from changelake.pipeline.definition import load_pipeline
    from changelake.pipeline.maintenance import has_maintenance, maintain_pipeline_lake, maintenance_refusal

    if not args.file.is_file():
        print(f"error: pipeline file {str(args.file)!r} does not exist", file=sys.stderr)
        return 2
    definition = load_pipeline(args.file)
    if not has_maintenance(definition):
        print(f"error: {args.file}: {maintenance_refusal(definition)}", file=sys.stderr)
        return 2
    options = MaintenanceOptions(
        max_snapshot_age_ms=args.max_snapshot_age_ms,
        min_snapshots_to_keep=args.min_snapshots_to_keep,
        orphan_older_than_ms=args.orphan_older_than_ms,
        min_input_files=args.min_input_files,
    )
    tables = [(ns, name) for ns, name in (t.rsplit(".", 1) for t in args.table)] if args.table else None
    results = maintain_pipeline_lake(definition, options, tables=tables)
    for r in results:
        print(
            f"{r.table}: compacted {r.files_compacted} -> {r.files_written} files, expired {r.snapshots_expired} "
            f"snapshots, deleted {r.files_deleted} + {r.orphan_files_deleted} orphan files; "
            f"now {r.data_files} data files, {r.snapshots} snapshots"
        )
    if not results:
        print("no lake tables")
    return 0
