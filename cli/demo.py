"""``changelake demo``: the main job, end to end on the local services.

1. MySQL input: the seed's ``kafka_test`` tables (a few thousand rows) and a sysbench OLTP run.
2. Pipeline 1 (MySQL -> Kafka, Debezium-JSON, topic per table) as a Dagster job, bounded.
3. Pipeline 2 (Kafka -> the lake) as Dagster assets, with the DuckDB key-state checks. The lake is
   Iceberg, or Apache Paimon with ``--lake paimon`` / ``LAKE=paimon`` (``LAKE=paimon make demo``).
4. The seed's update (customer 4's phone 2222 -> 1234) and the Debezium-JSON message it produced.
5. The page-views PV/UV aggregation into an upsert-kafka table, with its check.
6. A per-table summary; the exit code is non-zero if any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

__all__ = ["register", "run"]

REPO_ROOT = Path(__file__).resolve().parents[1]
PIPELINE_1 = REPO_ROOT / "pipelines" / "mysql-to-kafka.yaml"
PIPELINE_2 = REPO_ROOT / "pipelines" / "kafka-to-iceberg.yaml"
#: Pipeline 2 per lake (``--lake`` / ``$LAKE``); a non-default one replaces kafka-to-iceberg.yaml
#: in the pipelines folder the Dagster definitions are built from.
LAKE_PIPELINES = {"iceberg": PIPELINE_2, "paimon": REPO_ROOT / "pipelines" / "examples" / "kafka-to-paimon.yaml"}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run the main job end to end on the local services")
    p.add_argument("--customers", type=int, default=3000)
    p.add_argument("--products", type=int, default=1000)
    p.add_argument("--sysbench-events", type=int, default=3000)
    p.add_argument("--pageviews", type=int, default=5000)
    p.add_argument("--lake", choices=sorted(LAKE_PIPELINES), default=os.environ.get("LAKE", "iceberg") or "iceberg",
                   help="the lake of Pipeline 2 (default: $LAKE, else iceberg)")
    p.set_defaults(func=run)


def _mysql_params() -> dict:
    return {
        "host": os.environ["MYSQL_HOST"],
        "port": int(os.environ["MYSQL_PORT"]),
        "user": os.environ["MYSQL_USER"],
        "password": os.environ["MYSQL_PASSWORD"],
    }


def _check_mysql(params: dict) -> None:
    """Connect once, so a wrong setting is one line naming where the value came from.

    Raises:
        ChangelakeError: the server refused the connection or cannot be reached (never shows the password).
    """
    import pymysql

    from changelake.demo.seed import connect
    from changelake.errors import ChangelakeError

    try:
        connect(params).close()
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else "?"
        raise ChangelakeError(
            f"cannot connect to MySQL at {params['host']}:{params['port']} as {params['user']!r} (MySQL error {code}). "
            "MYSQL_HOST/PORT/USER/PASSWORD set in your shell win over the local services' values: after "
            "'make clean' or a new 'services up', unset them or run eval \"$(changelake services env)\" again"
        ) from None


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def _use_lake(lake: str) -> str:
    """Point the Dagster definitions at a pipelines folder whose Pipeline 2 writes ``lake``;
    returns the name of that pipeline."""
    import shutil

    from changelake.pipeline.files import load_structure, pipeline_files

    pipeline_2 = LAKE_PIPELINES[lake]
    if pipeline_2.resolve() != PIPELINE_2.resolve():  # not the default Pipeline 2: swap it in
        from changelake.state_dir import default_state_dir

        folder = default_state_dir() / "demo-pipelines" / lake
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for path in pipeline_files():
            if path.resolve() != PIPELINE_2.resolve():
                shutil.copy(path, folder / path.name)
        shutil.copy(pipeline_2, folder / pipeline_2.name)
        os.environ["CHANGELAKE_PIPELINES_DIR"] = str(folder)
    os.environ["LAKE"] = lake  # the code location's lake catalog resource (resources/definitions.py)
    return load_structure(pipeline_2).name


def _materialize_lake(defs) -> dict[str, dict]:
    """Materialize the lake tables (tables with nothing new are skipped), then evaluate every lake
    check as ``changelake check`` does; returns the check results per table."""
    import dagster as dg

    from cli.check import run_checks
    from cli.pipeline import QUIET_LOG_LEVEL

    # The lake tables (one asset each), as the lag sensor or the UI materializes them.
    lake = dg.define_asset_job("demo_lake_tables", selection=dg.AssetSelection.groups("lake").without_checks())
    job = dg.Definitions.merge(defs, dg.Definitions(jobs=[lake])).resolve_job_def("demo_lake_tables")
    result = job.execute_in_process(
        instance=dg.DagsterInstance.get(),
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": QUIET_LOG_LEVEL}}}},
    )
    if not result.success:
        from cli._dagster import failure_messages

        raise RuntimeError("; ".join(failure_messages(result)) or "the lake materialization failed")
    _, rows = run_checks()
    checks: dict[str, dict] = {}
    for row in rows:
        entry = checks.setdefault(row["table"], {"passed": True})
        if row["check"] == "key_state_matches_mysql":
            entry.update(row["metadata"])
        elif row["check"] == "no_duplicate_primary_keys":
            entry["duplicate_keys"] = row["metadata"].get("duplicate_keys")
        if row["severity"] == "ERROR":  # a stale-lake warning does not fail the demo
            entry["passed"] = entry["passed"] and row["passed"]
    return checks


def _print_seed_message(bootstrap: str) -> dict | None:
    """Find and print the last Debezium-JSON message of customer 4 on kafka_test.customers."""
    from confluent_kafka import Consumer, TopicPartition

    from changelake.connectors.kafka_common import watermarks, with_logger

    consumer = Consumer(with_logger(
        {"bootstrap.servers": bootstrap, "group.id": "changelake-demo-reader", "enable.auto.commit": False,
         "isolation.level": "read_committed"}
    ))
    found = None
    try:
        topic = "kafka_test.customers"
        for partition, (low, high) in watermarks(consumer, topic).items():
            consumer.assign([TopicPartition(topic, partition, low)])
            pos = low
            while pos < high:
                msgs = consumer.consume(1000, timeout=2)
                if not msgs:
                    break
                for m in msgs:
                    pos = m.offset() + 1
                    if m.error() or m.value() is None:
                        continue
                    key = json.loads(m.key()) if m.key() else {}
                    if key.get("id") == 4:
                        doc = json.loads(m.value())
                        payload = doc.get("payload", doc)
                        if payload.get("op") == "u":
                            found = payload
    finally:
        consumer.close()
    if found is not None:
        print(json.dumps(found, indent=2, ensure_ascii=False))
    else:
        print("(no update message for customer 4 found)")
    return found


def run(args: argparse.Namespace) -> int:
    import warnings

    from cli.pipeline import run_pipeline_job
    from changelake.demo.seed import load_kafka_test, run_sysbench, update_seed_customer

    warnings.filterwarnings("ignore", module="dagster")
    params = _mysql_params()
    _check_mysql(params)
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]

    _step("1. MySQL input: kafka_test (seed tables) and sysbench oltp_write_only on sbtest")
    counts = load_kafka_test(params, customers=args.customers, products=args.products)
    print(f"kafka_test rows: {counts}")
    print(f"sysbench: {run_sysbench(params, events=args.sysbench_events)}")

    _step("2. Pipeline 1: MySQL -> Kafka, Dagster job, until caught up (snapshot, then binlog)")
    result = run_pipeline_job(PIPELINE_1, until_caught_up=True)
    if not result.success:
        return _fail(result)
    _print_outputs(result)

    _step("3. More OLTP writes (binlog path) and the seed's update: UPDATE customers SET phone_number='1234' WHERE id=4")
    print(f"sysbench: {run_sysbench(params, events=args.sysbench_events)}")
    update_seed_customer(params)
    result = run_pipeline_job(PIPELINE_1, until_caught_up=True)
    if not result.success:
        return _fail(result)
    _print_outputs(result)
    print("The Debezium-JSON message of the update on topic kafka_test.customers (payload):")
    message = _print_seed_message(bootstrap)

    _use_lake(args.lake)
    from platform_defs.definitions import defs

    _step(f"4. Pipeline 2: Kafka -> {args.lake.capitalize()} as Dagster assets, then the DuckDB key-state checks")
    checks = _materialize_lake(defs)
    _print_checks(checks)

    from cli.pageviews_demo import run_pageviews_demo

    _step("5. Page views: PV and UV per region -> upsert-kafka (retract changelog into upsert sink)")
    pv_ok = run_pageviews_demo(bootstrap, events=args.pageviews)

    _step("Summary")
    ok = _print_summary(checks) and pv_ok and message is not None
    print(f"{'pageviews_per_region (PV/UV vs DuckDB)':56s}  {'PASS' if pv_ok else 'FAIL'}")
    print(f"{'seed update message on kafka_test.customers':56s}  {'PASS' if message is not None else 'FAIL'}")
    print("\nRESULT:", "all checks passed" if ok else "FAILED")
    return 0 if ok else 1


def _print_outputs(result) -> None:
    for event in result.all_events:
        if event.event_type_value == "STEP_OUTPUT" and event.step_output_data:
            md = {k: v.value for k, v in event.step_output_data.metadata.items()}
            print(f"events={md.get('events')} batches={md.get('batches')} tables={md.get('tables')}")


def _print_checks(checks: dict[str, dict]) -> None:
    for table, c in sorted(checks.items()):
        print(
            f"  {table:28s} {'PASS' if c['passed'] else 'FAIL'}  mysql={c.get('rows_source')} "
            f"lake={c.get('rows_lake')} mismatches={c.get('mismatches')} duplicate_keys={c.get('duplicate_keys')}"
        )


def _print_summary(checks: dict[str, dict]) -> bool:
    print(f"{'table':28s} {'rows in MySQL':>14s} {'rows in lake':>13s} {'mismatches':>11s}  check")
    for table, c in sorted(checks.items()):
        print(
            f"{table:28s} {str(c.get('rows_source')):>14s} {str(c.get('rows_lake')):>13s} "
            f"{str(c.get('mismatches')):>11s}  {'PASS' if c['passed'] else 'FAIL'}"
        )
    return bool(checks) and all(c["passed"] for c in checks.values())


def _fail(result) -> int:
    from cli._dagster import failure_messages

    for line in failure_messages(result) or ["the run failed"]:
        print(f"error: {line}", file=sys.stderr)
    return 1
