"""The :class:`~changelake.connectors.base.ChangelogSink` contract on top of a lake sink, the runner's
sink-side adapter: :class:`LakeChangelogSink`, the part shared by :class:`LakePositionSink` (a
positioned source, ``mysql``) and :class:`LakeOffsetsSink` (a partitioned source, ``kafka``), and
those two (below).

Both turn change events into the lake sink's rows per table, each row carrying the
``topic``/``partition``/``offset`` it is known by, and commit the lake when it is due:

* the lake's ``commit.max-rows`` rows are buffered, or
* ``commit.interval`` seconds passed since the first uncommitted write (as Flink's Iceberg sink
  commits once per checkpoint interval), or
* the source is idle (:meth:`LakeChangelogSink.flush` with ``force=False``; only where
  :attr:`~LakeChangelogSink.FLUSH_WHEN_IDLE`), or the run stops (``force=True``).

After all of a commit's table commits the pipeline checkpoint is stored (the subclass's
:meth:`~LakeChangelogSink._store`), so it never names data not yet in every table; a table that
committed past the checkpoint (a crash between two tables) skips the replayed rows below its own
stored offsets.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyarrow.compute as pc

from changelake.changelog.change_batch import ChangeBatch
from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RETRACT, RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.connectors.base import BufferedSink, LakeSink, ReportsMetrics, WritesChangeBatches
from changelake.changelog.tally import PendingPolls
from changelake.connectors.lake.commit_policy import CommitPolicy
from changelake.connectors.lake.compaction import BatchItem, TruncateMarker
from changelake.connectors.lake.ddl import dropped_rows_removed, lake_schema, scoped
from changelake.connectors.lake.offsets import topic_partition
from changelake.errors import PipelineDataError

__all__ = ["LakeChangelogSink", "LakeOffsetsSink", "LakePositionSink", "POSITION_KEY", "sequence_topic"]


class LakeChangelogSink(BufferedSink, ReportsMetrics):
    """Base: events -> lake rows with their offsets, commit policy, checkpoint after the tables;
    a :class:`~changelake.connectors.base.BufferedSink` that reports metrics.

    Args:
        lake: an unopened lake sink (``IcebergSink``, ``PaimonSink``).
        pipeline: the pipeline name (names the checkpoint).

    Subclasses implement ``_locate`` (an event's ``(topic, partition, offset)``), ``_load`` (read
    the checkpoint at open) and ``_store`` (write it).

    Attributes:
        metrics: ``events`` written, ``commits`` (checkpoints stored), ``table_commits`` and
            ``replays_skipped`` (table commits skipped as replays, after a crash) and
            ``commit_redos`` (table writes redone after losing a commit race to another writer),
            ``change_batches`` (batches written by the columnar lane, whole, in Arrow).
    """

    #: A lake table keeps the final image per key: every row kind is accepted.
    changelog_mode: frozenset[RowKind] = RETRACT
    #: Commit the buffered rows (and a moved checkpoint) whenever the source is idle.
    FLUSH_WHEN_IDLE = False
    #: :meth:`commit` may only buffer (:class:`~changelake.connectors.base.BufferedSink`).
    buffers_commits = True

    def __init__(self, lake: LakeSink, pipeline: str) -> None:
        self.lake = lake
        self.pipeline = pipeline
        self._policy = CommitPolicy.of(lake.options)
        self._polls = PendingPolls()  # written since the last lake commit (``since``: the first write)
        self._stored: dict[str, Any] | None = None
        self._pending: dict[str, Any] | None = None  # a position given to commit(), not yet in the lake
        self._uncommitted = False  # events written since the last commit()
        self._open = False
        self.metrics: dict[str, int] = {"events": 0, "commits": 0, "table_commits": 0, "replays_skipped": 0,
                                        "commit_redos": 0, "change_batches": 0}
        #: Called with each sink table before this sink first buffers rows of it (so before the
        #: table's first commit of the run); raises to refuse the table. The pipeline's
        #: one-writer check (:func:`changelake.pipeline.files.lake_table_claim`); None: no check.
        self.claim: Callable[[TableId], None] | None = None
        self._claimed: set[TableId] = set()

    def _claim(self, tables: Iterable[TableId]) -> None:
        """:attr:`claim` each table not yet claimed, all of them before any row is buffered."""
        if self.claim is None:
            return
        for table_id in tables:
            if table_id not in self._claimed:
                self.claim(table_id)
                self._claimed.add(table_id)

    # -- the subclass's part ----------------------------------------------------------------------
    def _locate(self, event: DataChangeEvent) -> tuple[str, int, int]:
        raise NotImplementedError

    def _load(self) -> None:
        raise NotImplementedError

    def _store(self, position: dict[str, Any]) -> None:
        raise NotImplementedError

    def _checkpoint_moved(self) -> bool:
        """True when the checkpoint to store differs from the stored one."""
        return self._pending != self._stored

    # -- the contract -----------------------------------------------------------------------------
    def open(self) -> None:
        """Open the lake and read the stored checkpoint (idempotent)."""
        if self._open:
            return
        self.lake.open()
        self._load()
        self._open = True

    def stored_position(self) -> dict[str, Any] | None:
        """The position of the last lake commit, None on the first run."""
        return None if self._stored is None else dict(self._stored)

    def write(self, events: Sequence[DataChangeEvent]) -> None:
        """Buffer the events' rows per table in the lake sink, each with its offset (no I/O).

        Raises:
            PipelineDataError: an event without schema, or a table without primary key (declare it
                with a ``transform`` rule ``primary-keys``); names the table and, when the event
                came from Kafka, topic, partition and offset.
        """
        if self.claim is not None:
            self._claim(dict.fromkeys(e.table for e in events))
        per_table: dict[TableId, tuple[Schema, list[BatchItem]]] = {}
        earlier: dict[TableId, list[tuple[Schema, list[BatchItem]]]] = {}  # segments of earlier schemas
        offsets: dict[str, int] = {}
        lake_schemas: dict[TableId, Schema | None] = {}
        for event in events:
            topic, partition, offset = self._locate(event)
            tp = topic_partition(topic, partition)
            offsets[tp] = max(offsets.get(tp, 0), offset + 1)
            if event.is_drop and event.schema is None:
                # a DROP TABLE of a table no row of which was seen (Pipeline 1 started after its
                # last change): the lake table's own schema
                if event.table not in lake_schemas:
                    lake_schemas[event.table] = (per_table[event.table][0] if event.table in per_table
                                                 else lake_schema(self.lake, event.table))
                found = lake_schemas[event.table]
                if found is None:
                    continue  # no lake table: nothing to empty
                event = replace(event, schema=found)
            schema = self._schema(event, topic, partition, offset)
            meta = {"topic": topic, "partition": partition, "offset": offset}
            prev = per_table.get(event.table)
            items = prev[1] if prev else []
            if prev and prev[0] != schema:  # schema change inside the batch: the rows so far go first
                earlier.setdefault(event.table, []).append(prev)
                items = []
            if event.op is Op.TRUNCATE:
                # The marker carries its offset: a replayed batch reaching past the committed
                # offsets does not truncate the table a second time.
                # A copy of a truncate on a hash-by-key topic covers its partition's keys only.
                items.append(TruncateMarker(metadata=meta, scope=scoped(event.position.get("truncate.scope"), schema),
                                            drop=event.is_drop))
            else:
                rows = event.to_rows()
                if rows:  # one metadata dict per event, shared by its rows (read-only)
                    row_meta = {**rows[0].metadata, **meta}
                    items.extend(ChangelogRow(r.kind, r.values, r.table, row_meta) for r in rows)
            per_table[event.table] = (schema, items)
        for table_id, (schema, items) in per_table.items():
            segments = [*earlier.get(table_id, []), (schema, items)]
            if len(segments) > 1:
                # each schema's rows are handed over (and committed) on their own, so rows a DROP
                # TABLE later in the batch deletes are left out first: a definition dropped within
                # the batch never shapes the lake table (lake/ddl.py)
                kept = dropped_rows_removed([seg for _, seg in segments])
                for (seg_schema, seg), left in zip(segments[:-1], kept[:-1]):
                    if left or not seg:
                        self.lake.add(table_id, left, seg_schema, {})
                items = kept[-1]
            self.lake.add(table_id, items, schema, offsets)
        self.metrics["events"] += len(events)
        if events:
            self._uncommitted = True
            self._polls.note(0, len(events), offsets, {})

    def commit(self, position: Mapping[str, Any]) -> list[Any] | None:
        """Everything written so far belongs to ``position``; commit the lake when it is due
        (``commit.max-rows`` buffered rows, or ``commit.interval`` since the first uncommitted
        write). Returns the lake's per-table results when it committed, else None."""
        self._pending = dict(position)
        self._uncommitted = False
        if self._policy.due(self._polls, buffer_full=self.lake.should_flush(), polled_nothing=False):
            return self._flush()
        return None

    def flush(self, force: bool = True) -> list[Any] | None:
        """Commit what :meth:`commit` covered now (``force``: the run stops), or, when the source
        is idle (``force=False``), if :attr:`FLUSH_WHEN_IDLE` or ``commit.interval`` passed.
        Returns the lake's per-table results when a commit or a checkpoint happened, else None."""
        if self._pending is None or self._uncommitted:
            return None
        due = force or self._policy.due(self._polls, buffer_full=False, polled_nothing=self.FLUSH_WHEN_IDLE)
        if not due or (self.lake.buffered_rows == 0 and not self._checkpoint_moved()):
            return None
        return self._flush()

    def close(self) -> None:
        """Close the lake (idempotent). Rows not yet committed are dropped; the next run reads
        them again from the stored position (call :meth:`flush` first to keep them)."""
        self._open = False
        self.lake.close()

    def _flush(self) -> list[Any]:
        results = self.lake.flush()
        self._polls = PendingPolls()
        skipped = sum(1 for r in results if getattr(r, "skipped", False))
        self.metrics["table_commits"] += len(results) - skipped
        self.metrics["replays_skipped"] += skipped
        self.metrics["commit_redos"] = self.lake.commit_redos
        if self._pending is not None and self._checkpoint_moved():
            self._store(self._pending)
            self.metrics["commits"] += 1
        self._stored = self._pending if self._pending is not None else self._stored
        self._pending = None
        return list(results)

    def _schema(self, event: DataChangeEvent, topic: str, partition: int, offset: int) -> Schema:
        schema = event.schema
        where = f" (topic {topic!r} partition {partition} offset {offset})" if self._from_kafka else ""
        located = {"topic": topic, "partition": partition, "offset": offset} if self._from_kafka else {}
        if schema is None:
            raise PipelineDataError(
                f"pipeline '{self.pipeline}': a {'truncate' if event.op is Op.TRUNCATE else 'change event'} of "
                f"{event.table}{where} carries no schema and no row of the table was seen before it; write the topic "
                "with changelake's Pipeline 1 (schema headers) or 'debezium-json.include-schema.enabled: true', or "
                "give each event of a source writing to a lake directly its table schema",
                pipeline=self.pipeline, table=str(event.table), **located,  # type: ignore[arg-type]
            )
        if not schema.primary_key:
            raise PipelineDataError(
                f"pipeline '{self.pipeline}': table {event.table}{where} has no primary key; declare it with a "
                "'transform' rule: primary-keys: <col>[,<col>...]",
                pipeline=self.pipeline, table=str(event.table), **located,  # type: ignore[arg-type]
            )
        return schema

    #: Events are located by Kafka records (error messages name topic, partition and offset).
    _from_kafka = False


# -- LakeOffsetsSink: a partitioned source (kafka) -------------------------------------------------
# A lake sink (``iceberg``, ``paimon``) fed by a partitioned source (``kafka``), exactly once.
#
# Each change event names the Kafka record it came from in its ``position``
# (``{"topic": t, "partition": p, "offset": next offset}``, as
# :class:`~changelake.connectors.kafka.source.KafkaPipelineSource` gives it). Its rows carry that
# record's offset; every table commit stores the next offset per ``topic/partition`` it absorbed
# (:mod:`changelake.connectors.lake.offsets`), and after all of a commit's tables the pipeline
# checkpoint stores the source position: the next offset per ``topic/partition``, e.g.
# ``{"orders/0": 42, "orders/1": 7}`` (the lake's :meth:`read_checkpoint`/:meth:`write_checkpoint`).
# A restart seeks there and each table skips what its own snapshots say it already holds.
#
# Parallel workers (``merge``) share no read-modify-write state: each stores one checkpoint entry
# per partition it advanced (:meth:`~changelake.connectors.lake.sink.LakeTableSink.write_checkpoint_entries`),
# after its tables committed, and reads the entries of the partitions the group assigns it.


class LakeOffsetsSink(LakeChangelogSink, WritesChangeBatches):
    """The :class:`~changelake.connectors.base.ChangelogSink` contract on top of a lake sink, for a
    partitioned source; the position is ``{"topic/partition": next offset}``.

    Args:
        lake: an unopened ``IcebergSink`` or ``PaimonSink``.
        pipeline: the pipeline name (names the checkpoint).
        merge: a parallel worker (one of ``pipeline.parallelism``, possibly on another machine):
            it stores its own checkpoint entry per partition whose offset moved, written on its
            own (no read, no lock); the checkpoint is the largest entry per partition, so no
            worker undoes another's advance and a worker that lost a partition (a zombie) cannot
            pull it back. Entries name only offsets the worker's tables absorbed.
        writer: with ``merge``: the worker's stable id (names its entries; default ``worker``).

    Commits when ``commit.max-rows`` rows are buffered, ``commit.interval`` passed since the first
    uncommitted write, the source is idle (the topics are drained for now), or the run stops.

    Raises (from :meth:`write`):
        PipelineDataError: an event without ``topic``/``partition``/``offset`` position, a
            truncate without schema, or a table without primary key (names topic, partition,
            offset and table).
    """

    FLUSH_WHEN_IDLE = True
    _from_kafka = True

    def __init__(self, lake: LakeSink, pipeline: str, *, merge: bool = False, writer: str | None = None) -> None:
        super().__init__(lake, pipeline)
        self.merge = merge
        self.writer = writer or "worker"
        self._entries: dict[str, int] = {}  # a worker's entries as it last stored them

    def _load(self) -> None:
        # A parallel worker's own view starts empty: it reads the shared checkpoint when the group
        # assigns it partitions (read_stored), not before joining.
        self._stored = {} if self.merge else dict(self.lake.read_checkpoint(self.pipeline))

    def stored_position(self) -> dict[str, Any] | None:
        """The offsets of the last completed commit, ``{}`` on the first run (a parallel worker:
        its own offsets, ``{}`` until its first commit)."""
        return dict(self._stored or {})

    def read_stored(self) -> dict[str, int]:
        """The checkpoint as stored in the lake now (other workers' advances included)."""
        return dict(self.lake.read_checkpoint(self.pipeline))

    def write_change_batches(self, batches: Sequence[ChangeBatch]) -> None:
        """Buffer each batch as it is (Arrow) in its lake table, in order with the events written
        before and after it; its rows carry their Kafka offsets (no I/O).

        Raises:
            PipelineDataError: a table without primary key (names topic, partition, offset of the
                batch's first row, and the table).
        """
        if self.claim is not None:
            self._claim(dict.fromkeys(b.table for b in batches if b.num_rows))
        for batch in batches:
            if not batch.num_rows:
                continue
            if not batch.schema.primary_key:
                first = int(batch.offsets[0].as_py())
                raise PipelineDataError(
                    f"pipeline '{self.pipeline}': table {batch.table} (topic {batch.topic!r} partition "
                    f"{batch.partition} offset {first}) has no primary key; declare it with a 'transform' rule: "
                    "primary-keys: <col>[,<col>...]",
                    pipeline=self.pipeline, table=str(batch.table), topic=batch.topic, partition=batch.partition,
                    offset=first,
                )
            offsets = {topic_partition(batch.topic, batch.partition): int(pc.max(batch.offsets).as_py()) + 1}
            self.lake.add(batch.table, [batch], batch.schema, offsets)
            self.metrics["events"] += batch.records
            self.metrics["change_batches"] += 1
            self._uncommitted = True
            self._polls.note(0, batch.records, offsets, {})

    def _locate(self, event: DataChangeEvent) -> tuple[str, int, int]:
        pos = event.position
        try:
            return str(pos["topic"]), int(pos["partition"]), int(pos["offset"]) - 1
        except (KeyError, TypeError, ValueError):
            raise PipelineDataError(
                f"pipeline '{self.pipeline}': a change event of {event.table} has no Kafka position "
                f"(topic, partition, offset); got {dict(pos)!r}",
                pipeline=self.pipeline, table=str(event.table),
            ) from None

    def _store(self, position: dict[str, Any]) -> None:
        offsets: Mapping[str, int] = {k: int(v) for k, v in position.items()}
        if not self.merge:
            self.lake.write_checkpoint(self.pipeline, offsets)
            return
        moved = {k: v for k, v in offsets.items() if self._entries.get(k) != v}
        if moved:
            self.lake.write_checkpoint_entries(self.pipeline, moved, self.writer)
            self._entries.update(moved)


# -- LakePositionSink: a positioned source (mysql) -------------------------------------------------
# A lake sink (``iceberg``, ``paimon``) fed directly by a positioned source (``mysql``), exactly once.
#
# Flink CDC writes MySQL straight into Iceberg or Paimon; so does ``mysql -> iceberg`` here, with the
# same rule as Kafka -> lake (:mod:`changelake.connectors.lake.offsets`): every change event gets
# the next number of a per-pipeline sequence, which stands in for a Kafka offset on the pseudo
# topic-partition ``changelake.source.<pipeline>/0``. Each table commit stores the next number it
# absorbed in its snapshot; after all of a commit's tables, the pipeline checkpoint (a pipeline
# property of the lake, :data:`POSITION_KEY`) stores the source position together with the next
# number::
#
#     {"position": {"phase": "binlog", "file": "mysql-bin.000003", "pos": 4711, "row": 0}, "next": 1234}
#
# A restart resumes the source at that position and numbers its events from ``next`` again; a
# table that committed past the checkpoint (a crash between two tables' commits) skips the events
# below its own stored number, so nothing is applied twice and nothing is lost. This relies on the
# source returning the same events in the same order from a stored position, as the binlog does;
# a snapshot chunk re-read after a crash reads the table's current rows, which the binlog that
# follows the snapshot brings to the same final state (as Flink CDC's snapshot without locks).
# Buffering, the commit policy and the checkpoint-after-tables order are
# :class:`LakeChangelogSink`'s.


#: Pipeline property holding ``{"position": ..., "next": n}``; ``{pipeline}`` is the pipeline name.
POSITION_KEY = "pipeline.{pipeline}.source-position"


def sequence_topic(pipeline: str) -> str:
    """The pseudo topic whose partition 0 numbers a pipeline's change events: ``changelake.source.<pipeline>``."""
    return f"changelake.source.{pipeline}"


class LakePositionSink(LakeChangelogSink):
    """The :class:`~changelake.connectors.base.ChangelogSink` contract on top of a lake sink, for a
    positioned source: events are numbered on :func:`sequence_topic` partition 0.

    Args:
        lake: an unopened ``IcebergSink`` or ``PaimonSink``.
        pipeline: the pipeline name (names the checkpoint and the sequence).

    ``commit(position)`` marks everything written so far as belonging to ``position``; the lake
    commit happens when the lake's ``commit.max-rows`` rows are buffered, ``commit.interval``
    seconds passed, or at :meth:`flush`. The stored position only ever names data already
    committed to every table.

    Raises (from :meth:`write`):
        PipelineDataError: an event without schema, or a table without primary key (declare it
            with a ``transform`` rule ``primary-keys``).
    """

    def __init__(self, lake: LakeSink, pipeline: str) -> None:
        super().__init__(lake, pipeline)
        self._topic = sequence_topic(pipeline)
        self._key = POSITION_KEY.format(pipeline=pipeline)
        self._next = 0  # number of the next event written
        self._committed_next = 0  # events below this number are committed with the stored position

    def _load(self) -> None:
        text = self.lake.read_pipeline_property(self._key)
        if text:
            stored = json.loads(text)
            self._stored = dict(stored["position"]) if stored.get("position") is not None else None
            self._next = self._committed_next = int(stored["next"])

    def _locate(self, event: DataChangeEvent) -> tuple[str, int, int]:
        number = self._next
        self._next += 1
        return self._topic, 0, number

    def _checkpoint_moved(self) -> bool:
        # the same source position with more events numbered (e.g. a snapshot chunk re-read) moves it too
        return self._pending != self._stored or self._next != self._committed_next

    def _store(self, position: dict[str, Any]) -> None:
        self.lake.write_pipeline_property(
            self._key, json.dumps({"position": position, "next": self._next}, sort_keys=True, default=str)
        )
        self._committed_next = self._next
