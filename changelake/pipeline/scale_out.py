"""Pipeline 2 past one process: ``pipeline.parallelism`` workers in one Kafka consumer group.

No machinery of our own. A worker is :func:`changelake.pipeline.runner.run_pipeline` with
``worker=True``; something else places and restarts it: a Dagster step (the pipeline's job has
``pipeline.parallelism`` worker ops, run by ``multiprocess_executor`` on one machine or by
``k8s_job_executor``/``docker_executor``/``celery_k8s_job_executor`` across machines; restarts are
the ops' ``RetryPolicy``), or a person/orchestrator running ``changelake pipeline run FILE --worker``
on any machine. The workers share only Kafka and the lake's catalog:

* **Placement:** each worker subscribes to the topics in the group ``changelake-<pipeline>``;
  Kafka's group coordinator spreads the partitions and moves them when a worker joins, leaves or
  dies (the broker's ``group.consumer.session.timeout.ms``, 10 s in the services module),
  incrementally (Kafka's consumer rebalance protocol, KIP-848: the others keep running; the classic
  protocol with ``cooperative-sticky`` on ``properties.group.protocol: classic``), and a worker
  with a stable ``group.instance.id`` (static membership, :func:`as_worker`) takes its partitions
  back after a clean restart without a rebalance (a killed worker's id is held by the broker until
  its session times out; the replacement joins again until then).
* **Start position:** a worker starts each assigned partition at the lake's checkpoint entry for
  it: one entry per partition, written by a worker only after its tables committed, on its own
  (no read-modify-write, no lock), so it can lag but never lead; the tables' own snapshot offsets
  skip whatever a previous owner committed after it.
* **Commit rule:** every table commit is checked, inside the commit, against the table's current
  offsets (:class:`changelake.connectors.iceberg.writer.OffsetsCheckedTransaction`): a worker
  that lost its partitions (a zombie) never lands older rows over newer ones; a commit that lost a
  race is redone against the winner's offsets. Only lake sinks that declare ``multi_writer`` take several workers.
"""

from __future__ import annotations

from dataclasses import replace

from changelake.pipeline.definition import PipelineDefinition

__all__ = ["GROUP_INSTANCE_ID_KEY", "parallelism", "as_worker", "group_instance_id"]

#: The Kafka source option naming a worker's static group membership (Kafka's ``group.instance.id``).
GROUP_INSTANCE_ID_KEY = "properties.group.instance.id"


def parallelism(defn: PipelineDefinition) -> int:
    """``pipeline.parallelism`` (default 1): the number of worker ops of the pipeline's job."""
    return max(1, int(defn.pipeline.get("parallelism", 1) or 1))


def group_instance_id(defn: PipelineDefinition, worker_id: str) -> str:
    """The stable ``group.instance.id`` of worker ``worker_id``: ``changelake-<pipeline>-<worker_id>``."""
    return f"changelake-{defn.name}-{worker_id}"


def as_worker(defn: PipelineDefinition, worker_id: str | None) -> PipelineDefinition:
    """``defn`` whose Kafka source joins the group as static member :func:`group_instance_id`
    (unless the YAML sets ``properties.group.instance.id`` itself, or ``worker_id`` is None)."""
    if worker_id is None or GROUP_INSTANCE_ID_KEY in defn.source:
        return defn
    return replace(defn, source={**defn.source, GROUP_INSTANCE_ID_KEY: group_instance_id(defn, worker_id)})
