"""A lake sink (``iceberg``, ``paimon``) fed by a partitioned source (``kafka``), exactly once.

Each change event names the Kafka record it came from in its ``position``
(``{"topic": t, "partition": p, "offset": next offset}``, as
:class:`~changelake.connectors.kafka.source.KafkaPipelineSource` gives it). Its rows carry that
record's offset; every table commit stores the next offset per ``topic/partition`` it absorbed
(:mod:`changelake.connectors.lake.offsets`), and after all of a commit's tables the pipeline
checkpoint stores the source position: the next offset per ``topic/partition``, e.g.
``{"orders/0": 42, "orders/1": 7}`` (the lake's :meth:`read_checkpoint`/:meth:`write_checkpoint`).
A restart seeks there and each table skips what its own snapshots say it already holds.

Parallel workers (``merge``) share no read-modify-write state: each stores one checkpoint entry
per partition it advanced (:meth:`~changelake.connectors.lake.sink.LakeTableSink.write_checkpoint_entries`),
after its tables committed, and reads the entries of the partitions the group assigns it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pyarrow.compute as pc

from changelake.changelog.change_batch import ChangeBatch
from changelake.changelog.event import DataChangeEvent
from changelake.connectors.base import LakeSink, WritesChangeBatches
from changelake.connectors.lake.offsets import topic_partition
from changelake.connectors.lake.changelog_sink import LakeChangelogSink
from changelake.errors import PipelineDataError

__all__ = ["LakeOffsetsSink"]


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
