"""Runs a pipeline definition: any registered source with any registered sink it can feed.

Sources and sinks come from :mod:`changelake.connectors.registry` by their ``type``. A
positioned source (``mysql``) feeds Kafka (Pipeline 1), upsert-kafka, or a lake directly; a
partitioned source (``kafka``) feeds a lake (Pipeline 2). Both loops have one shape: poll a batch
from the source, route and transform it, write it to the sink together with the source position,
commit, repeat. A run is unbounded (until ``stop`` is set or the process is terminated) or
bounded: ``until_caught_up`` stops once the source has delivered everything that existed when it
last looked, ``max_duration_s`` after that many seconds. Positions live with the data (Kafka
transaction / lake snapshot and checkpoint), so the next run resumes exactly where this one stopped.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from changelake.changelog import DataChangeEvent, Op, Schema, TableId
from changelake.changelog.row import ChangelogRow
from changelake.changelog.errors import ChangelogError
from changelake.changelog.route import Router, parse_route_rules
from changelake.changelog.transform import Transformer, infer_schema, parse_transform_rules
from changelake.connectors.base import ChangelogSink, ChangelogSource, LakeSink
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.lake.offsets import split_topic_partition
from changelake.connectors.lake.position_sink import LakePositionSink
from changelake.connectors.registry import ConnectorContext, find_factory, supported_pairs
from changelake.pipeline.definition import PipelineDefinition

__all__ = ["RunStats", "run_pipeline", "run_changelog_pipeline", "run_kafka_to_iceberg", "kafka_lag"]

BatchCallback = Callable[[dict[str, Any]], None]

log = logging.getLogger(__name__)


@dataclass
class RunStats:
    """What a run did.

    Attributes:
        pipeline: the pipeline name.
        events: change events read from the source (before route/transform).
        batches: batches committed.
        tables: rows applied per sink table (``db.table`` -> rows).
        position: the last committed source position (Pipeline 1), or None.
        offsets: next Kafka offset per ``topic/partition`` (Pipeline 2).
        elapsed_s: wall time of the run in seconds.
        stopped_because: ``caught-up``, ``max-duration``, ``stopped``.
        metrics: the sink's counters at the end of the run (e.g. Kafka records, tombstones, commits).
        bad_records: records skipped with ``<format>.ignore-parse-errors`` (Pipeline 2): corrupt, or
            a change that cannot be applied (e.g. a row without its primary-key column).
        dead_letters: of those, records copied to ``dead-letter.topic``.
        inferred_schema_tables: source tables whose records carried no schema (no Pipeline 1 schema
            header, no schema wrapper), so their column types were inferred from JSON values.
    """

    pipeline: str
    events: int = 0
    batches: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    position: Mapping[str, Any] | None = None
    offsets: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    stopped_because: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    bad_records: int = 0
    dead_letters: int = 0
    inferred_schema_tables: list[str] = field(default_factory=list)

    def offsets_json(self) -> dict[str, int]:
        return dict(self.offsets)

    def metadata(self) -> dict[str, Any]:
        """A flat, JSON-able summary (for logs and Dagster metadata)."""
        return {
            "pipeline": self.pipeline,
            "events": self.events,
            "batches": self.batches,
            "tables": json.dumps(self.tables, sort_keys=True),
            "position": json.dumps(self.position, sort_keys=True, default=str) if self.position else "",
            "offsets": json.dumps(self.offsets, sort_keys=True),
            "elapsed_s": round(self.elapsed_s, 3),
            "stopped_because": self.stopped_because,
            "sink_metrics": json.dumps(self.metrics, sort_keys=True, default=str),
            "bad_records": self.bad_records,
            "dead_letters": self.dead_letters,
            "inferred_schema_tables": json.dumps(sorted(self.inferred_schema_tables)),
        }


class _Clock:
    def __init__(self, max_duration_s: float | None, stop: threading.Event | None) -> None:
        self.start = time.monotonic()
        self.max_duration_s = max_duration_s
        self.stop = stop

    def stop_reason(self, until_caught_up: bool, polled_nothing: bool, caught_up: Callable[[], bool]) -> str | None:
        """Why the run should stop now (``stopped``, ``max-duration``, ``caught-up``), or None."""
        if self.stop is not None and self.stop.is_set():
            return "stopped"
        if self.max_duration_s is not None and time.monotonic() - self.start >= self.max_duration_s:
            return "max-duration"
        if until_caught_up and polled_nothing and caught_up():
            return "caught-up"
        return None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start


def _router(defn: PipelineDefinition) -> Router:
    return Router(parse_route_rules(defn.route), mode=defn.pipeline.get("route-mode", "ALL_MATCH"))


def _route_and_transform(events: list[DataChangeEvent], router: Router, transformer: Transformer) -> list[DataChangeEvent]:
    """Transform, then route, as Flink CDC does: ``transform`` rules match the source table's
    name, ``route`` then re-addresses the transformed event to its sink table(s)."""
    out: list[DataChangeEvent] = []
    for event in events:
        transformed = transformer.apply(event)
        if transformed is not None:
            out.extend(router.route_event(transformed))
    return out


def run_pipeline(
    defn: PipelineDefinition,
    *,
    until_caught_up: bool = False,
    max_duration_s: float | None = None,
    stop: threading.Event | None = None,
    batch_size: int = 2000,
    on_batch: BatchCallback | None = None,
) -> RunStats:
    """Run ``defn``: its source and sink come from the connector registry by ``type``.

    A partitioned source (``kafka``: per-partition offsets) feeds a lake sink through
    :func:`run_kafka_to_iceberg`; a positioned source (``mysql``) feeds any other registered sink
    through :func:`run_changelog_pipeline` (``kafka``, ``upsert-kafka``, and ``iceberg``/``paimon``
    directly, as Flink CDC does). ``batch_size``: records or events per poll (2000).

    Raises:
        OptionValidationError: an unknown connector type (the registered ones are listed), a
            connector used on the wrong side, a partitioned source with a non-lake sink, or
            invalid options.
        ChangelakeError subclasses from the connectors (source gone, delivery failed, ...).
    """
    source = find_factory(defn.source_type).endpoint("source")
    sink = find_factory(defn.sink_type).endpoint("sink")
    if source.partitioned and not sink.partitioned:
        raise OptionValidationError(
            f"pipeline '{defn.name}': source type '{defn.source_type}' with sink type '{defn.sink_type}' is not "
            "supported; supported pairs: " + ", ".join(f"{a} -> {b}" for a, b in supported_pairs()),
            option="type",
        )
    if source.partitioned:
        return run_kafka_to_iceberg(
            defn, until_caught_up=until_caught_up, max_duration_s=max_duration_s, stop=stop,
            batch_size=batch_size, on_batch=on_batch,
        )
    return run_changelog_pipeline(
        defn, until_caught_up=until_caught_up, max_duration_s=max_duration_s, stop=stop,
        batch_size=batch_size, on_batch=on_batch,
    )


# ---------------------------------------------------------------------------------------------
# A positioned source (MySQL) into any sink that stores the position with the data
# ---------------------------------------------------------------------------------------------


def build_changelog_sink(defn: PipelineDefinition) -> ChangelogSink:
    """The unopened sink of a positioned-source pipeline, built by the registry from ``sink.type``;
    a lake sink (``iceberg``, ``paimon``) is wrapped in :class:`LakePositionSink`."""
    context = ConnectorContext(defn.name)
    sink = find_factory(defn.sink_type).create_sink(defn.options("sink"), context)
    if isinstance(sink, ChangelogSink):
        return sink
    if isinstance(sink, LakeSink):
        return LakePositionSink(sink, defn.name)
    raise OptionValidationError(f"pipeline '{defn.name}': sink type '{defn.sink_type}' cannot store a source position",
                                option="type")


def run_changelog_pipeline(
    defn: PipelineDefinition,
    *,
    until_caught_up: bool = False,
    max_duration_s: float | None = None,
    stop: threading.Event | None = None,
    batch_size: int = 2000,
    on_batch: BatchCallback | None = None,
) -> RunStats:
    """Snapshot, then binlog, into the sink; the source position is committed with every batch.

    The sink stores the position with the data: a Kafka transaction with an offsets-topic record
    under ``exactly-once`` (``kafka``: KafkaPipelineSink, Flink CDC's Kafka pipeline sink;
    ``upsert-kafka``: keyed, compacted topics with tombstones), or the lake's pipeline checkpoint
    after the table commits (``iceberg``/``paimon`` through :class:`LakePositionSink`, whose
    tables skip replayed events by their sequence number). A restart resumes at the stored
    position: no loss, no duplicate.
    """
    router, transformer = _router(defn), Transformer(parse_transform_rules(defn.transform))
    stats = RunStats(defn.name)
    clock = _Clock(max_duration_s, stop)
    sink = build_changelog_sink(defn)
    sink.open()
    try:
        position = sink.stored_position()
        context = ConnectorContext(defn.name, start_position=position)
        source: ChangelogSource = find_factory(defn.source_type).create_source(defn.options("source"), context)
        source.open()
        try:
            committed = position
            stats.position = position  # a run that finds nothing new still reports where it stands
            while True:
                events = source.poll(max_events=batch_size, timeout_s=0.5)
                # The source's position also moves past idle or uncaptured binlog traffic and from
                # the snapshot to the binlog phase: commit it even when a poll returned nothing.
                current = source.position
                if events:
                    out = _route_and_transform(events, router, transformer)
                    sink.write(out)
                if current is not None and (events or current != committed):
                    sink.commit(current)
                    committed = current
                    stats.position = current
                if events:
                    stats.events += len(events)
                    stats.batches += 1
                    per_table: dict[str, int] = {}
                    per_op: dict[str, dict[str, int]] = {}  # table -> Debezium op (c/r/u/d) -> events
                    for e in out:
                        per_table[str(e.table)] = per_table.get(str(e.table), 0) + 1
                        stats.tables[str(e.table)] = stats.tables.get(str(e.table), 0) + 1
                        table_ops = per_op.setdefault(str(e.table), {})
                        table_ops[e.op.value] = table_ops.get(e.op.value, 0) + 1
                    if on_batch:
                        on_batch({"events": len(events), "tables": per_table, "ops": per_op, "position": current})
                reason = clock.stop_reason(until_caught_up, not events, source.caught_up)
                if reason:
                    stats.stopped_because = reason
                    break
        finally:
            source.close()
    finally:
        sink.close()
        stats.metrics = dict(getattr(sink, "metrics", {}))
    stats.elapsed_s = clock.elapsed
    return stats


# ---------------------------------------------------------------------------------------------
# Pipeline 2: Kafka -> Iceberg
# ---------------------------------------------------------------------------------------------

CHECKPOINT_NAMESPACE = "changelake"


def _checkpoint_key(pipeline: str) -> str:
    return f"pipeline.{pipeline}.kafka-offsets"


def read_checkpoint(catalog: Any, pipeline: str) -> dict[str, int]:
    """Offsets every lake table of ``pipeline`` had absorbed at the last completed batch.

    Stored as a property of the catalog namespace ``changelake`` after all of a batch's table
    commits succeeded; a restart seeks there and each table skips what it already holds (its own
    offsets live in its Iceberg snapshot summary).
    """
    from changelake.connectors.iceberg.writer import read_namespace_property

    raw = read_namespace_property(catalog, _checkpoint_key(pipeline))
    return {k: int(v) for k, v in json.loads(raw).items()} if raw else {}


def write_checkpoint(catalog: Any, pipeline: str, offsets: Mapping[str, int]) -> None:
    """Store ``offsets`` as the pipeline checkpoint of an Iceberg lake (a property of the catalog
    namespace ``changelake``)."""
    from changelake.connectors.iceberg.writer import write_namespace_property

    write_namespace_property(catalog, _checkpoint_key(pipeline), json.dumps(dict(offsets), sort_keys=True))


def open_lake_sink(defn: PipelineDefinition) -> Any:
    """The open lake sink of a Kafka -> lake pipeline, built by the registry from ``sink.type``
    (``iceberg``: IcebergSink, ``paimon``: PaimonSink). Both take ``add``/``flush`` batches with
    Kafka offsets.

    Raises:
        OptionValidationError: the sink is not a lake sink, or invalid options.
    """
    sink = find_factory(defn.sink_type).create_sink(defn.options("sink"), ConnectorContext(defn.name))
    if not isinstance(sink, LakeSink):
        raise OptionValidationError(f"pipeline '{defn.name}': sink type '{defn.sink_type}' is not a lake sink",
                                    option="type")
    sink.open()
    return sink


def read_lake_checkpoint(sink: Any, pipeline: str) -> dict[str, int]:
    """The pipeline checkpoint: the sink's own store when it has one (Paimon), else the catalog
    namespace property (Iceberg, :func:`read_checkpoint`)."""
    if hasattr(sink, "read_checkpoint"):
        return dict(sink.read_checkpoint(pipeline))
    return read_checkpoint(sink.catalog, pipeline)


def write_lake_checkpoint(sink: Any, pipeline: str, offsets: Mapping[str, int], *, merge: bool = False) -> None:
    """Store the pipeline checkpoint where :func:`read_lake_checkpoint` finds it.

    With ``merge`` (parallel workers) each partition keeps the larger of the stored and the given
    offset. A merge racing another worker's can lose that worker's advance: the checkpoint then
    lags, which only makes a restart re-read records the tables' own snapshot offsets already
    skip; it never runs ahead of the lake."""
    if merge:
        stored = read_lake_checkpoint(sink, pipeline)
        offsets = {**stored, **{k: max(v, stored.get(k, 0)) for k, v in offsets.items()}}
    if hasattr(sink, "write_checkpoint"):
        sink.write_checkpoint(pipeline, offsets)
    else:
        write_checkpoint(sink.catalog, pipeline, offsets)


def _event_schema(
    event: DataChangeEvent,
    transformer: Transformer,
    known: Mapping[TableId, Schema],
    pending: tuple[Schema, list[Any]] | None,
) -> Schema | None:
    """The schema of an event after transform: its own (from the message's schema wrapper), else
    inferred from its row; a truncate without one takes the table's last known schema (or None)."""
    if event.schema is not None:
        return event.schema
    if event.op is Op.TRUNCATE:
        return pending[0] if pending else known.get(event.table)
    values = event.after if event.after is not None else (event.before or {})
    return transformer.apply_schema(event.table, infer_schema(values))


def run_kafka_to_iceberg(
    defn: PipelineDefinition,
    *,
    until_caught_up: bool = False,
    max_duration_s: float | None = None,
    stop: threading.Event | None = None,
    batch_size: int = 5000,
    on_batch: BatchCallback | None = None,
    worker: bool = False,
) -> RunStats:
    """Read the topics from the checkpoint (earliest on the first run), upsert into the lake's
    tables (Iceberg or Paimon, by ``sink.type``) by primary key, one commit per table per batch
    with the Kafka offsets stored in the commit's snapshot. A batch is every poll since the last
    commit, committed at the sink's ``commit.max-rows`` rows, after ``commit.interval``, when a
    poll returns nothing, or when the run stops (:mod:`changelake.pipeline.commit_policy`);
    ``on_batch`` is called once per such commit.

    ``pipeline.parallelism`` N > 1 runs N worker processes in one Kafka consumer group instead
    (:mod:`changelake.pipeline.scale_out`); ``worker=True`` is one of them: it joins the group,
    starts each assigned partition at the lake checkpoint read at assignment, and merges its
    offsets into the shared checkpoint.

    Types come from each record's schema header (Pipeline 1), a schema wrapper or canal-json's
    ``mysqlType``; otherwise they are inferred (``schema.inference.strategy``) and the table is
    listed once in ``RunStats.inferred_schema_tables`` and the log. Every lake table written is
    recorded in the pipeline's discovery file (:mod:`changelake.pipeline.discovery`). An unbounded
    run re-lists topics every ``scan.topic-partition-discovery.interval``.

    Raises:
        OptionValidationError: a table without primary key (add ``primary-keys`` in ``transform``),
            or an invalid catalog URI.
        DecodeError: a corrupt record (topic, partition, offset), unless ``<format>.ignore-parse-errors``.
        RecordError: a record whose change cannot be applied, e.g. its row lacks a primary-key
            column (topic, partition, offset, table; the cause chained), unless
            ``<format>.ignore-parse-errors`` (then counted in ``bad_records`` and copied to
            ``dead-letter.topic`` when set).
        SchemaEvolutionError: a column type changed incompatibly (table, column, old and new type).
    """
    from changelake.connectors.kafka.source import KafkaPipelineSource
    from changelake.connectors.lake import TruncateMarker, topic_partition

    from changelake.pipeline.scale_out import parallelism, run_workers

    if not worker and parallelism(defn) > 1:
        return run_workers(defn, until_caught_up=until_caught_up, max_duration_s=max_duration_s, stop=stop,
                           batch_size=batch_size, on_batch=on_batch)
    router, transformer = _router(defn), Transformer(parse_transform_rules(defn.transform))
    stats = RunStats(defn.name)
    clock = _Clock(max_duration_s, stop)
    sink = open_lake_sink(defn)
    try:
        checkpoint = read_lake_checkpoint(sink, defn.name)
        start = {split_topic_partition(k): v for k, v in checkpoint.items()}
        source: KafkaPipelineSource = find_factory(defn.source_type).create_source(
            defn.options("source"), ConnectorContext(defn.name)
        )
        if worker:
            source.open_group(lambda tps: {split_topic_partition(k): v for k, v in read_lake_checkpoint(sink, defn.name).items()})
            checkpoint = {}  # this worker's own view; written merged (max per partition) with the others'
        else:
            source.open(start_offsets=start or None)
        stats.offsets = dict(checkpoint)
        known_schemas: dict[TableId, Schema] = {}
        static_schemas: dict[TableId, Schema] = {}
        static = source.options.inference_strategy.value == "static"
        from changelake.pipeline.discovery import discovered_tables, record_tables

        recorded = {str(t) for t in discovered_tables(defn.name)}
        discovery_s = source.options.discovery_interval.total_seconds()
        last_discovery = time.monotonic()
        from changelake.pipeline.commit_policy import CommitPolicy, PendingPolls

        policy, pending = CommitPolicy.of(sink.options), PendingPolls()
        try:
            while True:
                records = source.poll(max_records=batch_size, timeout_s=0.5)
                if records:
                    batch_offsets: dict[str, int] = {}
                    per_table: dict[TableId, tuple[Schema, list[Any]]] = {}
                    applied: dict[str, int] = {}  # change events per sink table
                    ops: dict[str, dict[str, int]] = {}  # per sink table: op letter -> change events
                    for record in records:
                        tp = topic_partition(record.topic, record.partition)
                        batch_offsets[tp] = max(batch_offsets.get(tp, 0), record.offset + 1)
                        meta = {"topic": record.topic, "partition": record.partition, "offset": record.offset}
                        source_events = _note_inferred(list(record.events), stats, static_schemas, static)
                        try:
                            routed = _route_and_transform(source_events, router, transformer)
                            checked = []
                            for e in routed:
                                schema_of_e = _event_schema(e, transformer, known_schemas, per_table.get(e.table))
                                checked.append((e, _checked_schema(e, schema_of_e)))
                        except (ChangelogError, _MissingKeyError) as exc:
                            table = str(source_events[0].table) if source_events else None
                            source.reject(record, exc, table)  # raises RecordError unless ignore-parse-errors
                            continue
                        for event, schema in checked:
                            prev = per_table.get(event.table)
                            if schema is None:
                                raise OptionValidationError(
                                    f"pipeline '{defn.name}': a truncate of {event.table} (topic {record.topic!r} "
                                    f"partition {record.partition} offset {record.offset}) carries no schema and no row "
                                    "of the table was seen before it; write the topic with changelake's Pipeline 1 (schema "
                                    "headers) or 'debezium-json.include-schema.enabled: true'",
                                    option="debezium-json.include-schema.enabled",
                                )
                            if not schema.primary_key:
                                raise OptionValidationError(
                                    f"pipeline '{defn.name}': table {event.table} (topic {record.topic!r} partition "
                                    f"{record.partition} offset {record.offset}) has no primary key; declare it with "
                                    "a 'transform' rule: primary-keys: <col>[,<col>...]",
                                    option="transform.primary-keys",
                                )
                            known_schemas[event.table] = schema
                            applied[str(event.table)] = applied.get(str(event.table), 0) + 1
                            table_ops = ops.setdefault(str(event.table), {})
                            table_ops[event.op.value] = table_ops.get(event.op.value, 0) + 1
                            items = prev[1] if prev else []
                            if prev and prev[0] != schema:
                                sink.add(event.table, items, prev[0], {})
                                items = []
                            if event.op is Op.TRUNCATE:
                                # The marker carries its offset, so a replayed batch that reaches past
                                # the committed offsets does not truncate the table a second time.
                                items.append(TruncateMarker(metadata=meta))
                            else:
                                rows = event.to_rows()
                                if rows:  # one metadata dict per event, shared by its rows (read-only)
                                    row_meta = {**rows[0].metadata, **meta}
                                    items.extend(ChangelogRow(r.kind, r.values, r.table, row_meta) for r in rows)
                            per_table[event.table] = (schema, items)
                    for table_id, (schema, items) in per_table.items():
                        sink.add(table_id, items, schema, batch_offsets)
                    events = sum(len(r.events) for r in records)
                    pending.note(len(records), events, batch_offsets, applied, ops)
                    stats.events += events
                reason = clock.stop_reason(until_caught_up, not records, source.caught_up)
                # Polls are buffered in the sink and committed together (commit.max-rows / commit.interval).
                if reason or policy.due(pending, buffer_full=sink.should_flush(), polled_nothing=not records):
                    if pending.records:
                        source.flush_dead_letters()  # copies are acknowledged before the lake moves past them
                        results = sink.flush()
                        stats.offsets.update(pending.offsets)
                        source.commit_advisory({split_topic_partition(k): v for k, v in pending.offsets.items()})
                        stats.batches += 1
                        for table, count in pending.applied.items():
                            stats.tables[table] = stats.tables.get(table, 0) + count
                        if not set(pending.applied) <= recorded:
                            recorded |= set(pending.applied)
                            try:
                                record_tables(defn.name, recorded)
                            except OSError as exc:  # a cache for the UI: never fail the pipeline for it
                                log.warning("cannot record discovered tables of pipeline %s: %s", defn.name, exc)
                        if on_batch:
                            on_batch({"records": pending.records, "tables": pending.applied, "commits": len(results),
                                      "ops": pending.ops, "results": results})
                        pending = PendingPolls()
                    # Every polled record is committed by now: the checkpoint may move to the consumer's
                    # positions, which also step over transaction markers at the end of a partition.
                    for (topic, partition), pos in source.positions().items():
                        tp = topic_partition(topic, partition)
                        stats.offsets[tp] = max(stats.offsets.get(tp, 0), pos)
                    if stats.offsets != checkpoint:
                        write_lake_checkpoint(sink, defn.name, stats.offsets, merge=worker)
                        checkpoint = dict(stats.offsets)
                if reason:
                    stats.stopped_because = reason
                    break
                # Unbounded runs re-list topics (topic-pattern) and partitions, as Flink's partition
                # discovery; a bounded run found them at open and stops at the ends seen then.
                if not until_caught_up and discovery_s > 0 and time.monotonic() - last_discovery >= discovery_s:
                    source.refresh()
                    last_discovery = time.monotonic()
        finally:
            stats.bad_records = source.parse_errors
            stats.dead_letters = source.dead_letters
            source.close()
    finally:
        sink.close()
    stats.elapsed_s = clock.elapsed
    return stats


class _MissingKeyError(ValueError):
    """A change event's row has no value for a primary-key column."""


def _checked_schema(event: DataChangeEvent, schema: Schema | None) -> Schema | None:
    """``schema`` after checking that the event's key row(s) hold every primary-key column.

    Raises:
        _MissingKeyError: names the image (``before``/``after``), the missing columns and the
            columns present.
    """
    if schema is None or not schema.primary_key or event.op is Op.TRUNCATE:
        return schema
    images = {"before": event.before} if event.op is Op.DELETE else {"after": event.after}
    if event.op is Op.UPDATE:
        images["before"] = event.before
    for name, row in images.items():
        if row is None:
            continue
        missing = [k for k in schema.primary_key if row.get(k) is None]
        if missing:
            present = sorted(k for k, v in row.items() if v is not None)
            raise _MissingKeyError(
                f"primary-key column(s) {missing} of table {event.table} missing or NULL in the '{name}' row of "
                f"a '{event.op.value}' event; columns with values are {present}"
            )
    return schema


def _note_inferred(
    events: list[DataChangeEvent], stats: RunStats, static_schemas: dict[TableId, Schema], static: bool
) -> list[DataChangeEvent]:
    """Record (once per table, in the log and ``stats.inferred_schema_tables``) that a table's
    events carry no schema, so its types are inferred from JSON values; with
    ``schema.inference.strategy: static`` give them the schema inferred from the table's first row."""
    out = []
    for event in events:
        if event.schema is None and event.op is not Op.TRUNCATE:
            name = str(event.table)
            if name not in stats.inferred_schema_tables:
                stats.inferred_schema_tables.append(name)
                log.warning(
                    "table %s: records carry no schema (no 'changelake.schema.id' header, no schema wrapper); "
                    "column types are inferred from JSON values (DECIMAL may become double, DATETIME string)",
                    name,
                )
            if static:
                row = event.after if event.after is not None else (event.before or {})
                schema = static_schemas.setdefault(event.table, infer_schema(row))
                event = replace(event, schema=schema)
        out.append(event)
    return out


def kafka_lag(defn: PipelineDefinition, timeout_s: float = 10.0) -> dict[str, tuple[int, int]]:
    """Per ``topic/partition`` of a Kafka -> Iceberg pipeline: (the lake checkpoint, Kafka's end
    offset). Their difference is the lag in offsets (transaction markers count as offsets)."""
    from confluent_kafka import Consumer, TopicPartition

    from changelake.connectors.kafka_common import with_logger

    sink = open_lake_sink(defn)
    try:
        checkpoint = read_lake_checkpoint(sink, defn.name)
    finally:
        sink.close()
    opts = defn.options("source")
    conf = {k[len("properties."):]: v for k, v in opts.items() if k.startswith("properties.")}
    conf.update({"group.id": f"changelake-lag-{defn.name}", "enable.auto.commit": False})
    consumer = Consumer(with_logger(conf))
    lag: dict[str, tuple[int, int]] = {}
    try:
        for topic in [t for t in opts.get("topic", "").split(";") if t]:
            md = consumer.list_topics(topic, timeout=timeout_s)
            for partition in md.topics[topic].partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
                done = checkpoint.get(f"{topic}/{partition}", low)
                lag[f"{topic}/{partition}"] = (done, high)
    finally:
        consumer.close()
    return lag
