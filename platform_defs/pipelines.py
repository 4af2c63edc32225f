"""Pipeline YAML files -> Dagster jobs with one long-running op each.

Every pipeline file in ``pipelines/`` (or ``$CHANGELAKE_PIPELINES_DIR``) becomes a job named after
``pipeline.name`` (``mysql-to-kafka`` -> ``mysql_to_kafka``). Its op runs the pipeline: unbounded
when launched from the UI (until the run is terminated), bounded with ``until_caught_up`` (stop
once the source has no more data than at the last check) or ``max_duration_s`` for schedules,
sensors, CI and ``changelake pipeline run``. Positions are stored by the sinks, so every run
resumes where the previous one stopped.
"""


import os
import re
import time
from pathlib import Path

import dagster as dg
from pydantic import Field

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.lake import LAKE_SINK_TYPES
from changelake.pipeline.definition import PipelineDefinition, load_pipeline
from resources.connections import IcebergCatalogResource, KafkaResource, MySqlResource, pipeline_env

__all__ = ["PipelineRunConfig", "pipeline_files", "job_name", "build_pipeline_job", "load_structure"]

REPO_ROOT = Path(__file__).resolve().parent.parent
#: seconds between the long-running op's progress lines in the Dagster event log.
LOG_EVERY_S = 10.0


class PipelineRunConfig(dg.Config):
    """Run config of a pipeline op."""

    until_caught_up: bool = Field(
        default=False, description="Stop once the source is caught up (bounded run). False: run until terminated."
    )
    max_duration_s: float | None = Field(default=None, description="Stop after this many seconds (bounded run).")
    batch_size: int = Field(default=2000, description="Change events per batch (one sink commit per batch).")


def pipelines_dir() -> Path:
    return Path(os.environ.get("CHANGELAKE_PIPELINES_DIR", REPO_ROOT / "pipelines"))


def pipeline_files() -> list[Path]:
    """The pipeline YAML files, sorted by name."""
    return sorted(pipelines_dir().glob("*.yaml"))


def load_structure(path: Path) -> PipelineDefinition:
    """The definition with ``${VAR}`` references unresolved (no secrets needed at load time).

    Raises:
        OptionValidationError: the file is malformed; the message starts with the file's path.
    """
    try:
        return load_pipeline(path, resolve=False)
    except OptionValidationError as exc:
        raise OptionValidationError(f"pipeline file {path}: {exc}", option=exc.option) from exc


def job_name(defn: PipelineDefinition) -> str:
    return re.sub(r"\W", "_", defn.name)


def build_pipeline_job(path: Path) -> dg.JobDefinition:
    """A job with one long-running op that runs the pipeline of ``path``."""
    structure = load_structure(path)
    name = job_name(structure)

    @dg.op(
        name=f"run_{name}",
        description=f"Runs pipeline '{structure.name}' ({structure.source_type} -> {structure.sink_type}) from {path.name}.",
        tags={"kind": "changelake"},
    )
    def run_pipeline_op(
        context: dg.OpExecutionContext,
        config: PipelineRunConfig,
        mysql: MySqlResource,
        kafka: KafkaResource,
        lake: IcebergCatalogResource,
    ) -> dg.Output[None]:
        from changelake.pipeline.runner import run_pipeline

        defn = load_pipeline(path, env=pipeline_env(mysql, kafka, lake))
        context.log.info(f"pipeline {defn.name}: {defn.redacted()}")

        progress = {"events": 0, "batches": 0, "logged_at": time.monotonic()}

        def on_batch(batch: dict) -> None:
            # One log line per LOG_EVERY_S (not per batch): Dagster's event log is written
            # synchronously and per-batch lines cost ~6 % of Pipeline 1's throughput.
            progress["events"] += batch.get("events", 0)
            progress["batches"] += 1
            now = time.monotonic()
            if now - progress["logged_at"] >= LOG_EVERY_S:
                context.log.info(f"pipeline {defn.name}: committed {progress['events']} events in {progress['batches']} "
                                 f"batches in the last {now - progress['logged_at']:.0f} s; position {batch.get('position')}")
                progress.update(events=0, batches=0, logged_at=now)
            if defn.sink_type not in LAKE_SINK_TYPES:
                return
            for table, events in (batch.get("tables") or {}).items():  # one materialization per commit
                context.log_event(
                    dg.AssetMaterialization(
                        asset_key=lake_asset_key(table), metadata={"change_events": events, "pipeline": defn.name}
                    )
                )

        try:
            stats = run_pipeline(
                defn,
                until_caught_up=config.until_caught_up,
                max_duration_s=config.max_duration_s,
                batch_size=config.batch_size,
                on_batch=on_batch,
            )
        except (dg.DagsterExecutionInterruptedError, KeyboardInterrupt):
            # Terminating an unbounded run is how it is stopped: the sinks closed cleanly and every
            # committed batch stays committed; the next run resumes from the stored position.
            context.log.info(f"pipeline {defn.name}: stopped by a termination request")
            return dg.Output(None, metadata={"pipeline": defn.name, "stopped_because": "interrupted"})
        return dg.Output(None, metadata=stats.metadata())

    @dg.job(
        name=name,
        description=f"Pipeline '{structure.name}' as a long-running op; bounded with until_caught_up.",
        tags={"changelake/pipeline": structure.name},
    )
    def pipeline_job() -> None:
        run_pipeline_op()

    return pipeline_job


def lake_asset_key(table: str) -> dg.AssetKey:
    """Asset key of a lake table: ``lake/<db>/<table>``."""
    db, _, tbl = str(table).partition(".")
    return dg.AssetKey(["lake", db, tbl] if tbl else ["lake", db])
