"""Pipeline YAML files -> Dagster jobs with one long-running op each.

Every pipeline file in ``pipelines/`` (or ``$CHANGELAKE_PIPELINES_DIR``) becomes a job named after
``pipeline.name`` (``mysql-to-kafka`` -> ``mysql_to_kafka``). Its op runs the pipeline: unbounded
when launched from the UI (until the run is terminated), bounded with ``until_caught_up`` (stop
once the source has no more data than at the last check) or ``max_duration_s`` for schedules,
sensors, CI and ``changelake pipeline run``. Positions are stored by the sinks, so every run
resumes where the previous one stopped.
"""


from pathlib import Path

import dagster as dg
from pydantic import Field

from assets.keys import PIPELINE_TAG, job_name, pool_name
from assets.reporting import reporter_for
from changelake.pipeline.files import load_structure
from platform_defs.running import run_supervised
from resources.binding import bind
from resources.lake import LakeCatalogResource
from resources.kafka import KafkaResource
from resources.mysql import MySqlResource

__all__ = ["PipelineRunConfig", "build_pipeline_job"]


class PipelineRunConfig(dg.Config):
    """Run config of a pipeline op."""

    until_caught_up: bool = Field(
        default=False, description="Stop once the source is caught up (bounded run). False: run until terminated."
    )
    max_duration_s: float | None = Field(default=None, description="Stop after this many seconds (bounded run).")
    batch_size: int = Field(default=2000, description="Change events per batch (one sink commit per batch).")


def build_pipeline_job(path: Path) -> dg.JobDefinition:
    """A job with one long-running op that runs the pipeline of ``path``, in-process.

    The op is in the pipeline's pool (limit 1, see the instance config) and the job carries the
    ``changelake/pipeline`` tag (one run per value), so a second launch waits in the run queue;
    the pipeline's lock refuses what bypasses the queue (``changelake pipeline run``).
    """
    structure = load_structure(path)
    name = job_name(structure)

    @dg.op(
        name=f"run_{name}",
        description=f"Runs pipeline '{structure.name}' ({structure.source_type} -> {structure.sink_type}) from {path.name}.",
        tags={"kind": "changelake"},
        pool=pool_name(structure),
    )
    def run_pipeline_op(
        context: dg.OpExecutionContext,
        config: PipelineRunConfig,
        mysql: MySqlResource,
        kafka: KafkaResource,
        lake: LakeCatalogResource,
    ):
        defn = bind(path, mysql=mysql, kafka=kafka, lake=lake)
        context.log.info(f"pipeline {defn.name}: {defn.redacted()}")
        yield from run_supervised(
            context, defn, reporter_for(defn), until_caught_up=config.until_caught_up,
            max_duration_s=config.max_duration_s, batch_size=config.batch_size,
        )

    @dg.job(
        name=name,
        description=(
            f"Pipeline '{structure.name}' ({structure.source_type} -> {structure.sink_type}) as one long-running op: "
            "unbounded by default (stop it by terminating the run), bounded with until_caught_up or max_duration_s."
        ),
        tags={PIPELINE_TAG: structure.name},
        executor_def=dg.in_process_executor,
    )
    def pipeline_job() -> None:
        run_pipeline_op()

    return pipeline_job
