"""``changelake check [--pipeline FILE]``: every lake check, headless, for CI.

Runs the asset checks of every lake table (key state vs MySQL, unique primary keys, freshness) of
each Kafka -> Iceberg pipeline (or of ``FILE`` only) in-process on the Dagster instance of
``$DAGSTER_HOME`` (the results appear in the UI too), prints one line per table and check, and
exits 1 if any check of severity ERROR failed (a failed WARN check is printed, not fatal).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from assets.metadata import ERROR, LAG, NEXT_STEP, SAMPLES

__all__ = ["register", "run", "run_checks"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("check", help="run every lake check headless; exit 1 on failure")
    p.add_argument("--pipeline", type=Path, default=None, metavar="FILE",
                   help="only the lake tables of this Kafka -> lake (Iceberg or Paimon) pipeline file")
    p.set_defaults(func=run)


def run_checks(pipeline: Path | None = None) -> tuple[bool, list[dict]]:
    """Evaluate the lake checks; returns (no ERROR check failed, one row per evaluation)."""
    import dagster as dg

    from assets.checks import build_key_state_checks
    from assets.keys import table_of_lake_key
    from assets.lake import build_lake_assets
    from cli.pipeline import QUIET_LOG_LEVEL
    from changelake.pipeline.files import lake_pipeline_files, load_structure
    from resources.definitions import defs as resource_defs

    from changelake.connectors.registry import lake_sink_types

    if pipeline is not None:
        structure = load_structure(pipeline.resolve())
        if structure.sink_type not in lake_sink_types():
            raise SystemExit(f"error: pipeline {pipeline} does not write to the lake (sink type {structure.sink_type})")
        pipelines = [(pipeline.resolve(), structure)]
    else:
        pipelines = lake_pipeline_files()
    assets, checks = [], []
    for path, structure in pipelines:
        assets.append(build_lake_assets(path, structure))
        checks.extend(build_key_state_checks(path, structure))
    if not checks:
        return True, []
    job = dg.define_asset_job("changelake_check", selection=dg.AssetSelection.all_asset_checks(),
                              executor_def=dg.in_process_executor)
    defs = dg.Definitions(assets=assets, asset_checks=checks, jobs=[job], resources=resource_defs().resources)
    result = defs.resolve_job_def("changelake_check").execute_in_process(
        instance=dg.DagsterInstance.get(), raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": QUIET_LOG_LEVEL}}}},
    )
    rows = []
    for e in result.get_asset_check_evaluations():
        md = {k: v.value for k, v in e.metadata.items()}
        rows.append({"table": table_of_lake_key(e.asset_key), "check": e.check_name, "passed": e.passed,
                     "severity": e.severity.value, "metadata": md})
    ok = result.success and all(r["passed"] or r["severity"] == "WARN" for r in rows)
    if not result.success:
        from cli._dagster import failure_messages

        from assets.checks import CHECKS_FAILED_MARK

        for line in failure_messages(result):
            if CHECKS_FAILED_MARK not in line:  # failed checks are printed by run(), with samples
                print(f"error: {line}", file=sys.stderr)
    return ok, rows


def _detail(row: dict) -> str:
    md = row["metadata"]
    if ERROR in md:
        return str(md[ERROR])
    if row["check"] == "key_state_matches_mysql":
        if md.get("mysql_table_exists") is False:  # dropped or renamed in MySQL: its key state is empty
            return (f"MySQL table {row['table']} no longer exists; lake={md.get('rows_lake')} "
                    f"extra_in_lake={md.get('extra_in_lake')}")
        return f"mysql={md.get('rows_source')} lake={md.get('rows_lake')} mismatches={md.get('mismatches')}"
    if row["check"] == "no_duplicate_primary_keys":
        return f"rows={md.get('rows')} duplicate_keys={md.get('duplicate_keys')}"
    behind = f" behind_mysql={md['behind_mysql']} (mysql {md.get('mysql_position')}, captured {md.get('captured_position')})" \
        if "behind_mysql" in md else ""
    return f"lag={md.get(LAG)} last_commit_age_s={md.get('last_commit_age_s')}{behind}"


def run(args: argparse.Namespace) -> int:
    if args.pipeline is not None and not args.pipeline.is_file():
        print(f"error: pipeline file {str(args.pipeline)!r} does not exist", file=sys.stderr)
        return 2
    ok, rows = run_checks(args.pipeline)
    print(f"{'table':28s} {'check':28s} {'result':6s}  detail")
    for row in sorted(rows, key=lambda r: (r["table"], r["check"])):
        result = "PASS" if row["passed"] else ("WARN" if row["severity"] == "WARN" else "FAIL")
        print(f"{row['table']:28s} {row['check']:28s} {result:6s}  {_detail(row)}")
    failed = [r for r in rows if not r["passed"] and r["severity"] != "WARN"]
    warned = [r for r in rows if not r["passed"] and r["severity"] == "WARN"]
    steps: dict[str, list[str]] = {}
    for row in sorted((r for r in rows if not r["passed"]), key=lambda r: (r["table"], r["check"])):
        md = row["metadata"]
        if md.get(SAMPLES):
            print(f"\n{row['table']} {row['check']}: sample differing keys")
            print("\n".join(f"  {line}" for line in str(md[SAMPLES]).splitlines()))
        if md.get(NEXT_STEP):
            steps.setdefault(str(md[NEXT_STEP]), []).append(row)
    for step, where in steps.items():
        bad = [r for r in where if r["severity"] != "WARN"]
        warns = [r for r in where if r["severity"] == "WARN"]
        first = (bad or warns)[0]
        counts = f"{len(bad)} failed check(s)" if bad else f"{len(warns)} warned check(s)"
        also = f"; {len(warns)} warned" if bad and warns else ""
        print(f"\nnext step ({counts}, e.g. {first['table']} {first['check']}{also}): {step}")
    # a WARN (a stale lake_is_fresh) neither passed nor fails the command: counted on its own
    passed = len(rows) - len(failed) - len(warned)
    print(f"\nlake checks passed: {passed}, failed: {len(failed)}, warned: {len(warned)}" if rows else "no lake checks")
    return 0 if ok else 1
