"""``changelake pipeline run FILE.yaml [--until-caught-up] [--max-duration S] [--worker [ID]]``.

As Flink CDC's ``flink-cdc.sh FILE.yaml``: runs the pipeline through the same Dagster job the UI
launches, on the Dagster instance of ``$DAGSTER_HOME`` (default ``$CHANGELAKE_STATE_DIR/dagster``): one
long-running op in-process, or, with ``pipeline.parallelism: N``, N worker ops under Dagster's
``multiprocess_executor``. Without ``--until-caught-up`` it runs until stopped (Ctrl-C). Exits
non-zero on failure.

``--worker [ID]`` runs ONE worker of a Kafka -> lake pipeline's consumer group, in-process, on
any machine with its own state folder (``$CHANGELAKE_STATE_DIR``): start as many as you like,
where you like; Kafka spreads the partitions over them and the lake's catalog serialises their
commits. ``ID`` (default: this host's name) is the worker's stable ``group.instance.id``: give a
replacement the id of the worker it replaces. Several workers of one pipeline are expected, so
no running run blocks it.

``--standby`` runs a standby of the pipeline (Pipeline 1 high availability, as Debezium's and Flink
CDC's: one binlog reader per server): on another machine, with its own state folder but the same
Dagster instance, Kafka and MySQL, its run waits while the pipeline's active run is alive (that
run's heartbeat in the instance; on the same host also its process), then takes over; its
``init_transactions`` fences the old reader (:mod:`platform_defs.standby`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

__all__ = ["register", "run", "run_pipeline_job", "show_pipeline_log", "QUIET_LOG_LEVEL"]

#: Dagster console log level for in-process runs started from the CLI (the UI shows everything);
#: failures are printed by the commands themselves, one line each, with their root cause.
QUIET_LOG_LEVEL = os.environ.get("CHANGELAKE_LOG_LEVEL", "CRITICAL")


class _StderrLog(logging.Handler):
    """``level: message`` lines on the *current* ``sys.stderr`` (looked up per record, as logging's
    last-resort handler, so a rich progress display that redirects stderr keeps them above it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"{record.levelname.lower()}: {self.format(record)}\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - as logging.StreamHandler
            self.handleError(record)


def show_pipeline_log(level: int = logging.INFO) -> logging.Handler:
    """Show the pipeline's Python log (the ``changelake`` loggers) from ``level`` on stderr, as a
    Debezium connector's log at INFO: e.g. a ``log`` signal's message, an ad-hoc snapshot starting,
    a Kafka signal record skipped for its key. Without it only warnings reach stderr (logging's
    last resort). Idempotent; returns the handler."""
    logger = logging.getLogger("changelake")
    for handler in logger.handlers:
        if isinstance(handler, _StderrLog):
            return handler
    handler = _StderrLog(level)
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    return handler


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("pipeline", help="run a Flink-CDC-style pipeline YAML")
    sub = p.add_subparsers(dest="pipeline_command", required=True)
    r = sub.add_parser("run", help="run FILE.yaml (unbounded unless --until-caught-up / --max-duration)")
    r.add_argument("file", type=Path)
    r.add_argument("--until-caught-up", action="store_true", help="stop once the source is caught up")
    r.add_argument("--max-duration", type=float, default=None, metavar="S", help="stop after S seconds")
    r.add_argument("--worker", nargs="?", const="", default=None, metavar="ID",
                   help="run one worker of the pipeline's consumer group (ID: its stable group.instance.id, "
                        "default this host's name)")
    r.add_argument("--standby", action="store_true",
                   help="high availability: wait while the pipeline's active run is alive, then take over "
                        "(fencing the old reader)")
    r.set_defaults(func=run)


def run_pipeline_job(path: Path, until_caught_up: bool, max_duration_s: float | None = None,
                     worker_id: str | None = None, standby: bool = False):
    """Execute the pipeline job of ``path`` (one op in-process, or its worker ops under the
    multiprocess executor; ``worker_id``: one worker, in-process). The run is tagged with this
    process (host, pid), so a restart right after this process died is not refused. Returns
    Dagster's result (``success``, ``all_events``). ``standby``: the run config's ``standby``
    (wait while another run of the pipeline lives, then take over)."""
    import dagster as dg

    from assets.keys import job_name
    from changelake.pipeline.files import load_structure
    from platform_defs.pipelines import cli_job, worker_count
    from sensors.liveness import process_tags

    structure = load_structure(path)
    config: dict = {"until_caught_up": until_caught_up}
    if max_duration_s is not None:
        config["max_duration_s"] = max_duration_s
    if standby:
        config["standby"] = True
    run_config = {
        "ops": {f"run_{job_name(structure)}": {"config": config}},
        "loggers": {"console": {"config": {"log_level": QUIET_LOG_LEVEL}}},
    }
    instance = dg.DagsterInstance.get()
    if worker_id is None and worker_count(structure) > 1:
        recon = dg.build_reconstructable_job(
            "platform_defs.pipelines", "cli_job", reconstructable_args=(str(path.resolve()),),
            reconstructor_working_directory=str(Path(__file__).resolve().parents[1]),
        )
        return dg.execute_job(recon, instance=instance, run_config=run_config, tags=process_tags(),
                              raise_on_error=False)
    job = cli_job(str(path.resolve()), worker_id)
    return job.execute_in_process(run_config=run_config, instance=instance, tags=process_tags(), raise_on_error=False)


def active_run_of(path: Path) -> str | None:
    """A message naming the queued or running Dagster run of this pipeline, or None.

    A run that is dead (its process is gone, or its heartbeat stopped, see
    :func:`sensors.liveness.worker_gone`) does not block: it is marked failed (or canceled)
    in the instance, and a note goes to stderr."""
    import dagster as dg

    from assets.keys import PIPELINE_TAG
    from changelake.pipeline.files import load_structure
    from sensors.liveness import worker_gone

    name = load_structure(path).name
    active = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
              dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
    instance = dg.DagsterInstance.get()
    for record in instance.get_run_records(dg.RunsFilter(tags={PIPELINE_TAG: name}, statuses=active)):
        run = record.dagster_run
        why = worker_gone(run, record, name)
        if why is None:
            return (f"pipeline '{name}' is already running: run {run.run_id} ({run.status.value}); "
                    "stop it first (terminate the run) or wait for it to finish (one run per pipeline)")
        message = f"run {run.run_id} of pipeline '{name}' died: {why}"
        if run.status == dg.DagsterRunStatus.CANCELING:
            instance.report_run_canceled(run, message)
        else:
            instance.report_run_failed(run, message)
        print(f"note: marked {message}", file=sys.stderr)
    return None


def run(args: argparse.Namespace) -> int:
    from cli._dagster import failure_messages

    if not args.file.is_file():
        print(f"error: pipeline file {str(args.file)!r} does not exist", file=sys.stderr)
        return 2
    from changelake.pipeline.files import refuse_shared_lake_tables_of

    refuse_shared_lake_tables_of(args.file)  # README "One writing pipeline per lake table", as the folder's load
    worker_id = None
    if args.standby and args.worker is not None:
        print("error: --standby and --worker exclude each other (workers of a consumer group are all active)",
              file=sys.stderr)
        return 2
    if args.worker is not None:
        import socket

        worker_id = args.worker or socket.gethostname()
    elif not args.standby:  # a standby waits for the running run instead
        running = active_run_of(args.file)
        if running:
            print(f"error: {running}", file=sys.stderr)
            return 1
    from assets.reporting import PROGRESS_ENV

    os.environ.setdefault(PROGRESS_ENV, "stderr")  # progress lines on stderr (CHANGELAKE_PROGRESS=off: none)
    show_pipeline_log()  # the connectors' INFO lines (a log signal's message, ...) on stderr too
    result = run_pipeline_job(args.file, args.until_caught_up, args.max_duration, worker_id=worker_id,
                              standby=args.standby)
    outputs = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT" and e.step_output_data]
    for event in outputs:  # one line per op: per worker for a parallel pipeline
        md = event.step_output_data.metadata
        line = ", ".join(f"{k}={v.value}" for k, v in md.items())
        print(f"{event.step_key}: {line}" if len(outputs) > 1 else line)
    if len(outputs) > 1:  # a parallel run: each change counted once over the workers (see RunStats.tables)
        import json

        tables: dict[str, int] = {}
        for event in outputs:
            raw = event.step_output_data.metadata.get("tables")
            for table, count in (json.loads(raw.value) if raw is not None and raw.value else {}).items():
                tables[table] = tables.get(table, 0) + int(count)
        print(f"total: changes={sum(tables.values())}, tables={json.dumps(tables, sort_keys=True)}")
    if not result.success:
        from cli._credentials import auth_hint

        lines = failure_messages(result) or ["the run failed"]
        for line in lines:
            print(f"error: {line}", file=sys.stderr)
        for line in auth_hint(args.file, lines):
            print(f"hint: {line}", file=sys.stderr)
        return 1
    return 0
