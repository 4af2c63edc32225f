"""``changelake changelog``: print an upsert-kafka topic as a changelog, one row per line.

The output is what Flink's SQL client prints in changelog result mode (``+I[us-east, 3, 2]``,
``+U[us-east, 4, 2]``, ``-D[us-east, 4, 2]``). The table comes from a DDL file or from flags::

    changelake changelog --ddl pageviews_per_region.sql
    changelake changelog --schema 'user_region STRING, pv BIGINT, uv BIGINT' --primary-key user_region \\
        --option topic=pageviews_per_region --option key.format=json --option value.format=json

``properties.bootstrap.servers`` defaults to ``$KAFKA_BOOTSTRAP_SERVERS`` and ``connector`` to
``upsert-kafka``. Without ``--follow`` the command stops at the end offsets seen at start
(``scan.bounded.mode = latest-offset`` unless the table sets a bounded mode); with ``--follow`` it
keeps reading until interrupted. ``--retract`` also prints ``-U`` rows.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import IO, Iterator

from changelake.connectors.upsert_kafka.ddl import TableDeclaration, parse_create_table
from changelake.errors import ChangelakeError

__all__ = ["register", "run", "build_declaration", "changelog_lines"]


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the ``changelog`` sub-command to the CLI's sub-parsers."""
    p = subparsers.add_parser("changelog", help="print an upsert-kafka topic as a changelog (+I/-U/+U/-D)")
    p.add_argument("--ddl", type=Path, help="file with one CREATE TABLE ... WITH ('connector' = 'upsert-kafka', ...)")
    p.add_argument("--schema", help="columns, e.g. 'user_region STRING, pv BIGINT, uv BIGINT'")
    p.add_argument("--primary-key", help="primary-key columns in key order, e.g. 'a,b'")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a WITH option (repeatable)")
    p.add_argument("--follow", action="store_true", help="keep reading new records (default: stop at the current end)")
    p.add_argument("--retract", action="store_true", help="also print -U(previous row) before each +U")
    p.add_argument("--poll-timeout", type=float, default=1.0, metavar="S", help="poll wait in seconds (default 1)")
    p.set_defaults(func=run)


def build_declaration(args: argparse.Namespace) -> TableDeclaration:
    """The table declared by ``--ddl`` or ``--schema``/``--primary-key``, with ``--option`` values
    overriding the DDL's, and the defaults of the module docstring applied.

    Raises OptionValidationError for a malformed ``--option`` or a missing schema.
    """
    from changelake.connectors.errors import OptionValidationError

    if args.ddl is not None:
        decl = parse_create_table(Path(args.ddl).read_text())
    elif args.schema:
        pk = f", PRIMARY KEY ({args.primary_key}) NOT ENFORCED" if args.primary_key else ""
        decl = parse_create_table(f"CREATE TABLE changelog_table ({args.schema}{pk}) WITH ('connector' = 'upsert-kafka')")
    else:
        raise OptionValidationError("give the table with --ddl FILE or --schema '...' --primary-key ...")
    options = dict(decl.options)
    for item in args.option:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise OptionValidationError(f"--option expects KEY=VALUE, got {item!r}", option=key or None)
        options[key.strip()] = value.strip()
    options.setdefault("connector", "upsert-kafka")
    if "properties.bootstrap.servers" not in options and os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        options["properties.bootstrap.servers"] = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    if not args.follow:
        options.setdefault("scan.bounded.mode", "latest-offset")
    if args.retract and options["connector"] == "upsert-kafka":
        options["scan.changelog-mode"] = "retract"
    return TableDeclaration(decl.name, decl.schema, options)


def changelog_lines(decl: TableDeclaration, *, poll_timeout_s: float = 1.0) -> Iterator[str]:
    """Read the table's topic through the upsert-kafka source and yield one line per changelog
    row (``+I[...]``), until the bounded end (or forever when unbounded)."""
    if decl.options.get("connector") == "kafka":
        # Flink's plain kafka connector: a changelog format (debezium-json, canal-json,
        # maxwell-json) reads a CDC topic as +I/-U/+U/-D.
        from changelake.connectors.kafka_table import create_source as create_kafka_source

        options = dict(decl.options)
        options.setdefault("scan.startup.mode", "earliest-offset")
        kafka_source = create_kafka_source(options, decl.schema, table_name=decl.name)
        kafka_source.open()
        try:
            while not kafka_source.finished:
                for row in kafka_source.poll(poll_timeout_s):
                    yield str(row)
        finally:
            kafka_source.close()
        return
    from changelake.connectors.upsert_kafka.factory import create_source

    source = create_source(decl)
    with source:
        while not source.is_bounded_end_reached():
            for row in source.poll(poll_timeout_s):
                yield str(row)


def run(args: argparse.Namespace, out: IO[str] | None = None) -> int:
    """Run the command; returns the exit code (0 ok, 1 on a changelake error, printed to stderr)."""
    out = out or sys.stdout
    try:
        decl = build_declaration(args)
        for line in changelog_lines(decl, poll_timeout_s=args.poll_timeout):
            print(line, file=out, flush=True)
    except KeyboardInterrupt:
        return 0
    except ChangelakeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
