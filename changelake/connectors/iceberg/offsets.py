"""Kafka offsets stored in Iceberg snapshot summaries (the exactly-once bookkeeping).

As the Apache Iceberg Kafka Connect sink's ``Coordinator.lastCommittedOffsetsForTable``: every
commit writes, in its snapshot summary, the next Kafka offset per topic-partition that the table
has absorbed; a restart walks the snapshot ancestors from the current snapshot to the first one
carrying the property and resumes there.

Offsets are a ``dict[str, int]`` keyed ``"topic/partition"`` (e.g. ``{"orders/0": 42}``); the
value is the NEXT offset to consume (last absorbed offset + 1), as Kafka commits offsets.
"""

from __future__ import annotations

from pyiceberg.table import Table
from pyiceberg.table.snapshots import ancestors_of

from changelake.connectors.lake.offsets import (
    COMMIT_ID_PROPERTY,
    OFFSETS_PROPERTY,
    decode_offsets,
    encode_offsets,
    is_replay,
    merge_offsets,
    topic_partition,
)

__all__ = [
    "OFFSETS_PROPERTY",
    "COMMIT_ID_PROPERTY",
    "topic_partition",
    "read_committed_offsets",
    "merge_offsets",
    "is_replay",
    "encode_offsets",
]


def read_committed_offsets(table: Table) -> dict[str, int]:
    """The offsets stored by the latest snapshot (walking ancestors) that has them; ``{}`` if none."""
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        summary = snapshot.summary
        raw = summary.get(OFFSETS_PROPERTY) if summary is not None else None
        if raw is not None:
            return decode_offsets(raw)
    return {}
