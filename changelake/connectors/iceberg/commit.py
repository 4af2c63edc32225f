"""One Iceberg commit whose retries re-check the table's Kafka offsets (the multi-writer commit rule).

pyiceberg 0.12 retries a commit that lost a race (``CommitFailedException``: the catalog's
``AssertRefSnapshotId`` saw a newer snapshot) by rebasing the staged snapshot onto the winner's,
up to the table property ``commit.retry.num-retries`` times. That is right when the winner did
not absorb Kafka offsets (a compaction, an expiry: pyiceberg validates the data conflicts), and
wrong when it did: this sink filtered its batch, and merged the offsets it stores in the snapshot
summary, against the offsets the table held when the commit was planned. Rebased, a worker that
lost its partitions (a zombie resumed after ``SIGSTOP``) would land older rows over newer ones, and
its summary would drop the winner's advance.

So, as the Apache Iceberg Kafka Connect sink's ``SnapshotAncestryValidator`` checks that no other
writer committed since the commit's base snapshot, :class:`OffsetsCheckedTransaction` checks inside
every retry that the table's committed offsets are still the planned ones; if they moved, it
stops with :class:`OffsetsMovedError` (nothing landed) and the sink redoes the write from the
refreshed table, re-filtered against the winner's offsets
(:meth:`changelake.connectors.iceberg.writer.IcebergSink.write`).
"""

from __future__ import annotations

from typing import Mapping

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table, Transaction

from changelake.connectors.iceberg.offsets import read_committed_offsets

__all__ = ["MULTI_WRITER_RETRIES", "OffsetsMovedError", "OffsetsCheckedTransaction"]

#: ``commit.retry.num-retries`` of the tables this sink creates, and its own redo budget: several
#: workers write one table (a topic with several partitions, a handover); with 4 writers pyiceberg's
#: default of 4 is not enough (measured: 1 run in 5 failed with 4, none with 20).
MULTI_WRITER_RETRIES = 20


class OffsetsMovedError(CommitFailedException):
    """Another writer absorbed Kafka offsets into the table after this commit was planned; the
    commit did not land (redo it from the refreshed table)."""


class OffsetsCheckedTransaction(Transaction):
    """A pyiceberg ``Transaction`` of ``table`` planned against ``planned`` offsets
    (``{"topic/partition": next offset}``, what the table held when the batch was filtered).

    A retry (the catalog refused the commit because the table moved) rebases only if the table's
    committed offsets are still ``planned``; otherwise it raises :class:`OffsetsMovedError`.
    """

    def __init__(self, table: Table, planned: Mapping[str, int]) -> None:
        super().__init__(table)
        self._planned = dict(planned)

    def _rebuild_snapshot_updates(self) -> None:
        # Called by pyiceberg's retry loop after refreshing the table, before rebasing.
        current = read_committed_offsets(self._table)
        if current != self._planned:
            moved = sorted(k for k in set(current) | set(self._planned) if current.get(k) != self._planned.get(k))
            raise OffsetsMovedError(
                f"another writer committed offsets of {', '.join(moved)} since this commit was planned"
            )
        super()._rebuild_snapshot_updates()
