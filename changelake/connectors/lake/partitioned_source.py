"""A partitioned source (``kafka``) seen through the one-position source contract.

:class:`~changelake.connectors.kafka.source.KafkaPipelineSource` polls records with per-partition
offsets; :class:`PartitionedSource` gives the runner what every source gives: ``poll`` returns
change events (each with its record's ``{"topic", "partition", "offset"}`` position), ``position``
is the next offset per ``topic/partition`` (``{"orders/0": 42}``; it also steps over transaction
markers), ``caught_up``, ``close``. On top: ``reject`` (a record the stage found bad),
``notify_committed`` (advisory group-offset commit once the lake holds a position, for lag
watching), partition discovery every ``scan.topic-partition-discovery.interval`` in unbounded
runs, and the schema-less bookkeeping (``schema.inference.strategy``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Callable, Mapping

from changelake.changelog import DataChangeEvent, Op, Schema, TableId
from changelake.changelog.change_batch import ChangeBatch
from changelake.changelog.rowkind import RETRACT, RowKind
from changelake.changelog.transform import infer_schema
from changelake.connectors.base import EmitsChangeBatches, PartitionedChangelogSource, RejectsRecords, ReportsBadRecords
from changelake.connectors.lake.offsets import split_topic_partition, topic_partition

__all__ = ["PartitionedSource", "note_inferred"]

log = logging.getLogger(__name__)


class PartitionedSource(PartitionedChangelogSource, RejectsRecords, ReportsBadRecords, EmitsChangeBatches):
    """Adapts a ``KafkaPipelineSource`` to the runner's source contract, with the optional
    abilities it declares (:mod:`changelake.connectors.base`).

    Args:
        source: an unopened ``KafkaPipelineSource`` (from the registry's ``kafka`` factory).
        start: the stored checkpoint, ``{"topic/partition": next offset}``; partitions not in it
            start as ``scan.startup.mode`` says.
        group_start: for a parallel worker: join the consumer group and start each assigned
            partition at the checkpoint this returns at assignment (then ``start`` is ignored);
            the position then covers the currently assigned partitions only, each from where
            its assignment started (a partition handed away and back starts afresh).
        discover: re-list topics and partitions every ``scan.topic-partition-discovery.interval``
            (unbounded runs; a bounded run stops at the ends seen at open).
    """

    #: The position is a map of per-partition offsets (see the module docstring).
    partitioned = True
    changelog_mode: frozenset[RowKind] = RETRACT

    def __init__(self, source: Any, *, start: Mapping[str, int] | None = None,
                 group_start: Callable[[], Mapping[str, int]] | None = None, discover: bool = False) -> None:
        self.source = source
        self._start = dict(start or {})
        self._group_start = group_start
        self._position: dict[str, int] = {} if group_start else dict(self._start)
        self._records: dict[int, Any] = {}  # id(position object) -> record, for reject()
        self._static: dict[TableId, Schema] = {}
        self._discovery_s = source.options.discovery_interval.total_seconds() if discover else 0.0
        self._last_discovery = time.monotonic()
        #: source tables whose records carry no schema (types inferred), in first-seen order
        self.inferred_tables: list[str] = []
        #: Kafka records returned by the last poll (rejected and empty ones included)
        self.last_records = 0
        #: the source decodes groups of records in Arrow (:meth:`poll_batches`)
        self.change_batches = callable(getattr(source, "poll_groups", None))

    def open(self) -> None:
        """Assign and seek (or join the group). Raises KafkaUnavailableError, SourceError."""
        if self._group_start is not None:
            group_start = self._group_start

            def start_assigned(tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
                for topic, partition in tps:  # polled before a revoke: not this assignment's
                    self._position.pop(topic_partition(topic, partition), None)
                return {split_topic_partition(k): v for k, v in group_start().items()}

            self.source.open_group(start_assigned)
        else:
            self.source.open(start_offsets={split_topic_partition(k): v for k, v in self._start.items()} or None)

    def poll(self, max_events: int = 5000, timeout_s: float = 0.5) -> list[DataChangeEvent]:
        """The change events of up to ``max_events`` records. Raises DecodeError, SourceError."""
        if self._discovery_s > 0 and time.monotonic() - self._last_discovery >= self._discovery_s:
            self.source.refresh()
            self._last_discovery = time.monotonic()
        records = self.source.poll(max_records=max_events, timeout_s=timeout_s)
        self.last_records = len(records)
        self._records.clear()
        static = self.source.options.inference_strategy.value == "static"
        events: list[DataChangeEvent] = []
        for record in records:
            tp = topic_partition(record.topic, record.partition)
            self._position[tp] = max(self._position.get(tp, 0), record.offset + 1)
            if record.events:
                self._records[id(record.events[0].position)] = record
                events.extend(note_inferred(list(record.events), self.inferred_tables, self._static, static))
        return events

    def poll_batches(self, max_events: int = 5000, timeout_s: float = 0.5) -> list[ChangeBatch | list[DataChangeEvent]]:
        """As :meth:`poll`, with the records the source decodes in Arrow as :class:`ChangeBatch`
        items (:meth:`~changelake.connectors.kafka.source.KafkaPipelineSource.poll_groups`), in
        order per partition; the other records' events come as lists. A batch's ``fallback``
        gives its records' events decoded one by one (registered for :meth:`reject`).
        Raises DecodeError, SourceError."""
        if self._discovery_s > 0 and time.monotonic() - self._last_discovery >= self._discovery_s:
            self.source.refresh()
            self._last_discovery = time.monotonic()
        items = self.source.poll_groups(max_records=max_events, timeout_s=timeout_s)
        self._records.clear()
        static = self.source.options.inference_strategy.value == "static"
        out: list[ChangeBatch | list[DataChangeEvent]] = []
        records = 0
        for item in items:
            if hasattr(item, "changes"):  # a RecordGroup
                tp = topic_partition(item.topic, item.partition)
                self._position[tp] = max(self._position.get(tp, 0), item.offsets[-1] + 1)
                records += len(item.offsets)
                out.append(self._batch(item, static))
                continue
            records += 1
            tp = topic_partition(item.topic, item.partition)
            self._position[tp] = max(self._position.get(tp, 0), item.offset + 1)
            if item.events:
                self._records[id(item.events[0].position)] = item
                events = note_inferred(list(item.events), self.inferred_tables, self._static, static)
                if out and isinstance(out[-1], list):
                    out[-1].extend(events)
                else:
                    out.append(events)
        self.last_records = records
        return out

    def _batch(self, group: Any, static: bool) -> ChangeBatch:
        import pyarrow as pa

        def fallback() -> list[DataChangeEvent]:
            events: list[DataChangeEvent] = []
            for record in group.records():
                if record.events:
                    self._records[id(record.events[0].position)] = record
                    events.extend(note_inferred(list(record.events), self.inferred_tables, self._static, static))
            return events

        changes = group.changes
        offsets = pa.array(group.offsets, pa.int64()).take(changes.message)
        return ChangeBatch(group.table, group.schema, changes.rows, changes.kinds, offsets, group.topic,
                           group.partition, len(group.offsets), group.offsets[-1], fallback, dict(changes.ops))

    @property
    def position(self) -> dict[str, int]:
        """Next offset per ``topic/partition`` after everything returned (dead-letter copies of
        rejected records are acknowledged first, so no position moves past an unsent copy)."""
        self.source.flush_dead_letters()
        assigned = self.source.positions()
        for (topic, partition), pos in assigned.items():
            tp = topic_partition(topic, partition)
            self._position[tp] = max(self._position.get(tp, 0), pos)
        if self._group_start is not None:  # a worker: only what the group assigns it now
            return {tp: off for tp, off in self._position.items() if split_topic_partition(tp) in assigned}
        return dict(self._position)

    def caught_up(self) -> bool:
        """Every assigned partition reached the end offset seen at open/refresh."""
        return bool(self.source.caught_up())

    def reject(self, event: DataChangeEvent, error: BaseException, table: str) -> None:
        """Skip the record ``event`` came from (``<format>.ignore-parse-errors``, dead-letter copy),
        or raise RecordError naming topic, partition, offset and table."""
        self.source.reject(self._records[id(event.position)], error, table)

    def notify_committed(self, position: Mapping[str, int]) -> None:
        """The lake holds ``position``: commit it to the consumer group (advisory, for lag)."""
        self.source.commit_advisory({split_topic_partition(k): v for k, v in position.items()})

    @property
    def bad_records(self) -> int:
        """Records skipped with ``<format>.ignore-parse-errors``."""
        return int(self.source.parse_errors)

    @property
    def dead_letters(self) -> int:
        """Records copied to ``dead-letter.topic``."""
        return int(self.source.dead_letters)

    def close(self) -> None:
        """Close the consumer (and the dead-letter producer); idempotent."""
        self.source.close()


def note_inferred(
    events: list[DataChangeEvent], inferred: list[str], static_schemas: dict[TableId, Schema], static: bool
) -> list[DataChangeEvent]:
    """Record (once per table, in the log and ``inferred``) that a table's events carry no schema,
    so its types are inferred from JSON values; with ``schema.inference.strategy: static`` give
    them the schema inferred from the table's first row."""
    out = []
    for event in events:
        if event.schema is None and event.op is not Op.TRUNCATE:
            name = str(event.table)
            if name not in inferred:
                inferred.append(name)
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
