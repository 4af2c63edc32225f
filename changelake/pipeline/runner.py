"""Runs a pipeline definition: any registered source with any registered sink it can feed.

Sources and sinks come from :mod:`changelake.connectors.registry` by their ``type`` and run in
the one loop of :mod:`changelake.pipeline.loop` (poll, transform and route, write, commit the
position with the data). This module only pairs them:

* a positioned source (``mysql``) feeds any sink: ``kafka`` and ``upsert-kafka`` store the
  position themselves; a lake (``iceberg``, ``paimon``) through
  :class:`~changelake.connectors.lake.changelog_sink.LakePositionSink`, directly as Flink CDC does;
* a partitioned source (``kafka``, through
  :class:`~changelake.connectors.kafka.source.PartitionedSource`) feeds a lake through
  :class:`~changelake.connectors.lake.changelog_sink.LakeOffsetsSink`;
  with ``worker=True`` the loop is one of ``pipeline.parallelism`` workers in one consumer group,
  placed and restarted by Dagster or by whoever runs ``changelake pipeline run --worker``
  (:mod:`changelake.pipeline.scale_out`). Without it one process reads every partition.

A run is unbounded (until ``stop`` is set or the process is terminated) or bounded:
``until_caught_up`` stops once the source has delivered everything that existed when it last
looked, ``max_duration_s`` after that many seconds. Positions live with the data (Kafka
transaction / lake snapshot and checkpoint), so the next run resumes exactly where this one stopped.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

from changelake.connectors.base import ChangelogSink, LakeSink
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.lake.changelog_sink import LakeOffsetsSink, LakePositionSink
from changelake.connectors.registry import ConnectorContext, find_factory, supported_pairs
from changelake.pipeline.clock import StopClock
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.files import lake_table_claim
from changelake.pipeline.lake_checkpoint import (
    CHECKPOINT_NAMESPACE,
    kafka_lag,
    open_lake_sink,
    read_checkpoint,
    read_lake_checkpoint,
    write_checkpoint,
    write_lake_checkpoint,
)
from changelake.pipeline.loop import BatchCallback, run_loop
from changelake.pipeline.stage import Stage
from changelake.pipeline.stats import RunStats

__all__ = [
    "RunStats",
    "BatchCallback",
    "run_pipeline",
    "run_changelog_pipeline",
    "run_kafka_to_iceberg",
    "build_changelog_sink",
    "kafka_lag",
    "open_lake_sink",
    "read_checkpoint",
    "write_checkpoint",
    "read_lake_checkpoint",
    "write_lake_checkpoint",
    "CHECKPOINT_NAMESPACE",
]

log = logging.getLogger(__name__)


def run_pipeline(
    defn: PipelineDefinition,
    *,
    until_caught_up: bool = False,
    max_duration_s: float | None = None,
    stop: threading.Event | None = None,
    batch_size: int = 2000,
    on_batch: BatchCallback | None = None,
    worker: bool = False,
    worker_id: str | None = None,
) -> RunStats:
    """Run ``defn``: its source and sink come from the connector registry by ``type``.

    Args:
        until_caught_up: stop once the source has delivered everything that existed when it looked.
        max_duration_s: stop after this many seconds.
        stop: stop once this event is set.
        batch_size: records or events per poll (2000).
        on_batch: called once per durable commit (:data:`~changelake.pipeline.loop.BatchCallback`).
        worker: run as one of ``pipeline.parallelism`` workers of a partitioned source: join the
            consumer group, start each assigned partition at its checkpoint entry, store entries
            for the partitions it advanced (:mod:`changelake.pipeline.scale_out`).
        worker_id: with ``worker``: a stable name of this worker (e.g. ``0``, or a pod name),
            giving it static group membership (``group.instance.id``).

    Raises:
        OptionValidationError: an unknown connector type (the registered ones are listed), a
            connector used on the wrong side, a partitioned source with a non-lake sink, a worker
            whose lake sink does not take several writers, or invalid options.
        PipelineDataError: a change event the sink cannot apply (e.g. a lake table without
            primary key; names table and, from Kafka, topic, partition and offset).
        ChangelakeError subclasses from the connectors (source gone, delivery failed, a bad record
            without ``<format>.ignore-parse-errors``: RecordError, DecodeError, ...).
    """
    source_side = find_factory(defn.source_type).endpoint("source")
    sink_side = find_factory(defn.sink_type).endpoint("sink")
    partitioned = source_side.partitioned
    if partitioned and not sink_side.partitioned:
        raise OptionValidationError(
            f"pipeline '{defn.name}': source type '{defn.source_type}' with sink type '{defn.sink_type}' is not "
            "supported; supported pairs: " + ", ".join(f"{a} -> {b}" for a, b in supported_pairs()),
            option="type",
        )
    worker = worker and partitioned
    if worker:
        from changelake.pipeline.scale_out import as_worker

        defn = as_worker(defn, worker_id)
    sink = build_changelog_sink(defn, partitioned=partitioned, merge=worker, writer=worker_id)

    def make_source(stored: Mapping[str, Any] | None) -> Any:
        source = find_factory(defn.source_type).create_source(
            defn.options("source"), ConnectorContext(defn.name, start_position=stored)
        )
        if not partitioned:
            return source
        from changelake.connectors.kafka.source import PartitionedSource

        group_start = sink.read_stored if worker and isinstance(sink, LakeOffsetsSink) else None
        return PartitionedSource(source, start=None if worker else stored, group_start=group_start,
                                 discover=not until_caught_up)

    if isinstance(sink, (LakeOffsetsSink, LakePositionSink)):  # README "One writing pipeline per lake table"
        sink.claim = lake_table_claim(defn)
    return run_loop(
        defn.name, sink, make_source, Stage(defn), StopClock(max_duration_s, stop),
        until_caught_up=until_caught_up, batch_size=batch_size, on_batch=on_batch,
        on_durable=_lake_tables_recorder(defn) if isinstance(sink, (LakeOffsetsSink, LakePositionSink)) else None,
        columnar=str(defn.pipeline.get("columnar.enabled", "true")).strip().lower() != "false",
    )


def build_changelog_sink(defn: PipelineDefinition, *, partitioned: bool = False, merge: bool = False,
                         writer: str | None = None) -> ChangelogSink:
    """The unopened sink of a pipeline, built by the registry from ``sink.type``; a lake sink
    (``iceberg``, ``paimon``) is wrapped in :class:`LakePositionSink` (positioned source) or
    :class:`LakeOffsetsSink` (``partitioned`` source; ``merge``: a parallel worker's, which stores
    its own per-partition checkpoint entries, named by ``writer``).

    Raises:
        OptionValidationError: ``merge`` with a lake sink that does not declare ``multi_writer``
            (its commits cannot check the table's offsets inside the commit).
    """
    sink = find_factory(defn.sink_type).create_sink(
        defn.options("sink"), ConnectorContext(defn.name, schema_change_behavior=defn.pipeline.get("schema.change.behavior")))
    if isinstance(sink, LakeSink):
        if partitioned:
            if merge and not sink.multi_writer:
                raise OptionValidationError(
                    f"pipeline '{defn.name}': sink type '{defn.sink_type}' does not take several writers (its commits "
                    "cannot check the table's offsets inside the commit); run it with pipeline.parallelism: 1",
                    option="parallelism",
                )
            return LakeOffsetsSink(sink, defn.name, merge=merge, writer=writer)
        return LakePositionSink(sink, defn.name)
    if isinstance(sink, ChangelogSink):
        return sink
    raise OptionValidationError(f"pipeline '{defn.name}': sink type '{defn.sink_type}' cannot store a source position",
                                option="type")


def _lake_tables_recorder(defn: PipelineDefinition) -> Any:
    """Records every lake table a run wrote in the pipeline's discovery file (a cache for the UI:
    a failure to write it is logged, never fails the pipeline)."""
    from changelake.pipeline.discovery import discovered_tables, record_tables

    recorded = {str(t) for t in discovered_tables(defn.name)}

    def record(stats: RunStats) -> None:
        if set(stats.tables) <= recorded:
            return
        recorded.update(stats.tables)
        try:
            record_tables(defn.name, recorded)
        except OSError as exc:
            log.warning("cannot record discovered tables of pipeline %s: %s", defn.name, exc)

    return record


def run_changelog_pipeline(defn: PipelineDefinition, **kwargs: Any) -> RunStats:
    """A positioned source (``mysql``) into any sink: :func:`run_pipeline` (same keywords)."""
    return run_pipeline(defn, **kwargs)


def run_kafka_to_iceberg(defn: PipelineDefinition, *, batch_size: int = 5000, **kwargs: Any) -> RunStats:
    """A partitioned source (``kafka``) into a lake: :func:`run_pipeline` (same keywords,
    ``batch_size`` 5000 records per poll by default; ``worker=True`` for a scale-out worker)."""
    return run_pipeline(defn, batch_size=batch_size, **kwargs)
