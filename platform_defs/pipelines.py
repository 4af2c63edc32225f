"""Pipeline YAML files -> Dagster jobs: one long-running op, or one per worker of a parallel pipeline.

Every pipeline file in ``pipelines/`` (or ``$CHANGELAKE_PIPELINES_DIR``) becomes a job named after
``pipeline.name`` (``mysql-to-kafka`` -> ``mysql_to_kafka``). Its op ``run_<name>`` runs the
pipeline: unbounded when launched from the UI (until the run is terminated), bounded with
``until_caught_up`` (stop once the source has no more data than at the last check) or
``max_duration_s`` for schedules, sensors, CI and ``changelake pipeline run``. Positions are
stored by the sinks, so every run resumes where the previous one stopped.

A Kafka -> lake pipeline with ``pipeline.parallelism: N`` (N > 1) is past one process: ``run_<name>``
is a graph of N worker ops (``worker_0`` ... ``worker_<N-1>``, one consumer group,
:mod:`changelake.pipeline.scale_out`), with the same run config (mapped to every worker). Dagster
places them: the job's executor is ``multiprocess_executor`` (one process per worker, one machine)
unless ``$CHANGELAKE_EXECUTOR`` names another (``k8s``: dagster-k8s's ``k8s_job_executor``, one
Kubernetes Job per worker; ``celery_k8s``; ``docker``; from the ``scale`` extra), configured in the
run config's ``execution`` block. A worker that fails is retried by its ``RetryPolicy``.
"""


import importlib
import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from assets.keys import PIPELINE_TAG, job_name, pool_name
from assets.reporting import reporter_for
from changelake.connectors.registry import find_factory
from changelake.errors import ChangelakeError
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.files import load_structure
from changelake.pipeline.scale_out import parallelism
from platform_defs.running import run_supervised
from resources.binding import bind
from resources.lake import LakeCatalogResource
from resources.kafka import KafkaResource
from resources.mysql import MySqlResource

__all__ = [
    "PipelineRunConfig", "build_pipeline_job", "worker_count", "worker_executor", "EXECUTORS", "EXECUTOR_ENV",
    "WORKER_RETRY_POLICY",
]

#: Environment variable choosing the executor of parallel pipelines' jobs (default ``multiprocess``).
EXECUTOR_ENV = "CHANGELAKE_EXECUTOR"
#: Executor name -> (module, attribute). All but the first two come from ``pip install changelake[scale]``.
EXECUTORS: dict[str, tuple[str, str]] = {
    "multiprocess": ("dagster", "multiprocess_executor"),
    "in_process": ("dagster", "in_process_executor"),
    "k8s": ("dagster_k8s", "k8s_job_executor"),
    "celery_k8s": ("dagster_celery_k8s", "celery_k8s_job_executor"),
    "docker": ("dagster_docker", "docker_executor"),
}
#: A worker op that raised is run again (a lost catalog, a fenced consumer); Kafka's group moves
#: its partitions to the other workers meanwhile.
WORKER_RETRY_POLICY = dg.RetryPolicy(max_retries=5, delay=5, backoff=dg.Backoff.EXPONENTIAL)


class PipelineRunConfig(dg.Config):
    """Run config of a pipeline op (of every worker of a parallel pipeline)."""

    until_caught_up: bool = Field(
        default=False, description="Stop once the source is caught up (bounded run). False: run until terminated."
    )
    max_duration_s: float | None = Field(default=None, description="Stop after this many seconds (bounded run).")
    batch_size: int = Field(default=2000, description="Change events per batch (one sink commit per batch).")
    standby: bool = Field(
        default=False, description="High availability: wait while another run of this pipeline is alive (its "
        "heartbeat in the instance), then take over; the new reader's init_transactions fences the old one.")


class ExecutorUnavailableError(ChangelakeError):
    """``$CHANGELAKE_EXECUTOR`` names an unknown executor, or one whose package is not installed
    (install the extra: ``pip install changelake[scale]``)."""


def worker_executor(name: str | None = None) -> dg.ExecutorDefinition:
    """The executor of a parallel pipeline's job: ``name``, else ``$CHANGELAKE_EXECUTOR``, else
    ``multiprocess`` (see :data:`EXECUTORS`).

    Raises:
        ExecutorUnavailableError: unknown name, or its package is missing (names the extra).
    """
    name = name or os.environ.get(EXECUTOR_ENV) or "multiprocess"
    if name not in EXECUTORS:
        raise ExecutorUnavailableError(
            f"{EXECUTOR_ENV}={name!r} is not an executor; choose one of {', '.join(sorted(EXECUTORS))}")
    module, attribute = EXECUTORS[name]
    try:
        executor: dg.ExecutorDefinition = getattr(importlib.import_module(module), attribute)
    except ImportError as exc:
        raise ExecutorUnavailableError(
            f"executor {name!r} needs the package {module.replace('_', '-')}: pip install changelake[scale]") from exc
    return executor


def worker_count(structure: PipelineDefinition) -> int:
    """Worker ops of the pipeline's job: ``pipeline.parallelism`` for a partitioned source
    (``kafka``), else 1 (a lake sink that cannot take several writers refuses at run time)."""
    if not find_factory(structure.source_type).endpoint("source").partitioned:
        return 1
    return parallelism(structure)


def build_pipeline_job(path: Path | str, *, worker_id: str | None = None, executor: str | None = None) -> dg.JobDefinition:
    """The job of the pipeline file ``path`` (see the module docstring).

    Args:
        worker_id: a job of ONE worker of the pipeline's consumer group with this stable id (run
            in-process by ``changelake pipeline run --worker``), whatever ``pipeline.parallelism``.
        executor: with several workers: the executor name (default ``$CHANGELAKE_EXECUTOR``).

    Raises:
        ExecutorUnavailableError: see :func:`worker_executor`.
    """
    path = Path(path)
    structure = load_structure(path)
    name = job_name(structure)
    n = worker_count(structure)
    description = f"Runs pipeline '{structure.name}' ({structure.source_type} -> {structure.sink_type}) from {path.name}"

    def make_op(op_name: str, worker: str | None, **op_kwargs: object) -> dg.OpDefinition:
        @dg.op(name=op_name, description=description + (f", as worker {worker}." if worker else "."),
               tags={"kind": "changelake"}, **op_kwargs)  # type: ignore[arg-type]
        def run_pipeline_op(
            context: dg.OpExecutionContext,
            config: PipelineRunConfig,
            mysql: MySqlResource,
            kafka: KafkaResource,
            lake: LakeCatalogResource,
        ):
            defn = bind(path, mysql=mysql, kafka=kafka, lake=lake)
            context.log.info(f"pipeline {defn.name}{f' worker {worker}' if worker else ''}: {defn.redacted()}")
            yield from run_supervised(
                context, defn, reporter_for(defn), until_caught_up=config.until_caught_up,
                max_duration_s=config.max_duration_s, batch_size=config.batch_size, worker_id=worker,
                standby=config.standby,
            )

        return run_pipeline_op

    tags = {PIPELINE_TAG: structure.name}
    if worker_id is not None or n == 1:
        single = make_op(f"run_{name}", worker_id, pool=pool_name(structure)) if worker_id is None else \
            make_op(f"run_{name}", worker_id)

        @dg.job(
            name=name,
            description=(
                f"Pipeline '{structure.name}' ({structure.source_type} -> {structure.sink_type}) as one long-running "
                "op: unbounded by default (stop it by terminating the run), bounded with until_caught_up or "
                "max_duration_s."
            ),
            tags=tags if worker_id is None else {**tags, "changelake/worker": worker_id},
            executor_def=dg.in_process_executor,
        )
        def pipeline_job() -> None:
            single()

        return pipeline_job

    workers = [make_op(f"worker_{i}", str(i), retry_policy=WORKER_RETRY_POLICY) for i in range(n)]

    def to_every_worker(config: PipelineRunConfig) -> dict:
        values = config if isinstance(config, dict) else config.model_dump()  # dagster passes the dict
        return {f"worker_{i}": {"config": dict(values)} for i in range(n)}

    @dg.graph(name=f"run_{name}", description=f"{description}: {n} workers in one Kafka consumer group.",
              config=dg.ConfigMapping(config_fn=to_every_worker))
    def run_workers() -> None:
        for op in workers:
            op()

    @dg.job(
        name=name,
        description=(
            f"Pipeline '{structure.name}' ({structure.source_type} -> {structure.sink_type}) as {n} long-running worker "
            "ops in one Kafka consumer group (pipeline.parallelism), placed by the job's executor: unbounded by "
            "default, bounded with until_caught_up or max_duration_s."
        ),
        tags=tags,
        executor_def=worker_executor(executor),
    )
    def parallel_job() -> None:
        run_workers()

    return parallel_job


def cli_job(path: str, worker_id: str | None = None) -> dg.JobDefinition:
    """The job of ``path`` with the resources of :mod:`resources.definitions` bound (for
    ``changelake pipeline run``; reconstructable by module and name for the multiprocess executor)."""
    from resources.definitions import defs as resource_defs

    job = build_pipeline_job(Path(path), worker_id=worker_id)
    return dg.Definitions(jobs=[job], resources=resource_defs().resources).resolve_job_def(job.name)
