"""A lake sink (``iceberg``, ``paimon``) fed by a partitioned source (``kafka``), exactly once.

Each change event names the Kafka record it came from in its ``position``
(``{"topic": t, "partition": p, "offset": next offset}``, as
:class:`~changelake.connectors.kafka.source.KafkaPipelineSource` gives it). Its rows carry that
record's offset; every table commit stores the next offset per ``topic/partition`` it absorbed
(:mod:`changelake.connectors.lake.offsets`), and after all of a commit's tables the pipeline
checkpoint stores the source position: the next offset per ``topic/partition``, e.g.
``{"orders/0": 42, "orders/1": 7}`` (the lake's :meth:`read_checkpoint`/:meth:`write_checkpoint`).
A restart seeks there and each table skips what its own snapshots say it already holds.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Mapping

from changelake.changelog.event import DataChangeEvent
from changelake.connectors.base import LakeSink
from changelake.connectors.lake.changelog_sink import LakeChangelogSink
from changelake.errors import PipelineDataError

__all__ = ["LakeOffsetsSink"]


class LakeOffsetsSink(LakeChangelogSink):
    """The :class:`~changelake.connectors.base.ChangelogSink` contract on top of a lake sink, for a
    partitioned source; the position is ``{"topic/partition": next offset}``.

    Args:
        lake: an unopened ``IcebergSink`` or ``PaimonSink``.
        pipeline: the pipeline name (names the checkpoint).
        merge: parallel workers share one checkpoint: each store reads it, keeps per partition
            the larger of the stored and the own offset, and writes it back, all under
            ``merge_lock``; it never runs ahead of the lake (every worker stores only offsets its
            tables committed), and holds every worker's stored offsets.
        merge_lock: with ``merge``: makes a hold that excludes every other worker's store of this
            checkpoint (e.g. :func:`changelake.pipeline.lock.checkpoint_lock`). Without it two
            workers' read-merge-writes can interleave and the later write drops the earlier one's
            advance; the checkpoint then lags (a restart re-reads records the tables skip).

    Commits when ``commit.max-rows`` rows are buffered, ``commit.interval`` passed since the first
    uncommitted write, the source is idle (the topics are drained for now), or the run stops.

    Raises (from :meth:`write`):
        PipelineDataError: an event without ``topic``/``partition``/``offset`` position, a
            truncate without schema, or a table without primary key (names topic, partition,
            offset and table).
    """

    FLUSH_WHEN_IDLE = True
    _from_kafka = True

    def __init__(self, lake: LakeSink, pipeline: str, *, merge: bool = False,
                 merge_lock: Callable[[], ContextManager[Any]] | None = None) -> None:
        super().__init__(lake, pipeline)
        self.merge = merge
        self._merge_lock = merge_lock or nullcontext

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
        # Read-merge-write under the workers' lock: unlocked, another worker's write based on an
        # older read would drop this advance (and nothing re-stores it if this worker's position
        # moves no further, e.g. at stop).
        with self._merge_lock():
            stored = self.lake.read_checkpoint(self.pipeline)
            if all(stored.get(k, -1) >= v for k, v in offsets.items()):
                return
            self.lake.write_checkpoint(self.pipeline, {**stored, **{k: max(v, stored.get(k, 0)) for k, v in offsets.items()}})
