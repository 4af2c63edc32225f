"""Kafka offsets stored in Iceberg snapshot summaries (the exactly-once bookkeeping).

As the Apache Iceberg Kafka Connect sink's ``Coordinator.lastCommittedOffsetsForTable``: every
commit writes, in its snapshot summary, the next Kafka offset per topic-partition that the table
has absorbed; a restart walks the snapshot ancestors from the current snapshot to the first one
carrying the property and resumes there.

Offsets are a ``dict[str, int]`` keyed ``"topic/partition"`` (e.g. ``{"orders/0": 42}``); the
value is the NEXT offset to consume (last absorbed offset + 1), as Kafka commits offsets.
"""

from __future__ import annotations

import json
from typing import Mapping

from pyiceberg.table import Table
from pyiceberg.table.snapshots import ancestors_of

__all__ = [
    "OFFSETS_PROPERTY",
    "COMMIT_ID_PROPERTY",
    "topic_partition",
    "split_topic_partition",
    "read_committed_offsets",
    "merge_offsets",
    "is_replay",
    "encode_offsets",
]

#: Snapshot-summary key holding the JSON offsets map.
OFFSETS_PROPERTY = "changelake.kafka-offsets"
#: Snapshot-summary key holding a uuid shared by all snapshots of one sink commit.
COMMIT_ID_PROPERTY = "changelake.commit-id"


def topic_partition(topic: str, partition: int) -> str:
    """The offsets-map key of a topic-partition: ``"topic/partition"``."""
    return f"{topic}/{partition}"


def split_topic_partition(key: str) -> tuple[str, int]:
    """Inverse of :func:`topic_partition` (splits at the last ``/``). Raises ValueError."""
    topic, _, partition = key.rpartition("/")
    if not topic:
        raise ValueError(f"offsets key {key!r} is not 'topic/partition'")
    return topic, int(partition)


def read_committed_offsets(table: Table) -> dict[str, int]:
    """The offsets stored by the latest snapshot (walking ancestors) that has them; ``{}`` if none."""
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        summary = snapshot.summary
        raw = summary.get(OFFSETS_PROPERTY) if summary is not None else None
        if raw is not None:
            return {str(k): int(v) for k, v in json.loads(raw).items()}
    return {}


def merge_offsets(committed: Mapping[str, int], batch: Mapping[str, int]) -> dict[str, int]:
    """Committed offsets advanced by a batch: per partition the larger value; sorted by key."""
    merged = dict(committed)
    for key, offset in batch.items():
        merged[key] = max(offset, merged.get(key, offset))
    return dict(sorted(merged.items()))


def is_replay(committed: Mapping[str, int], batch: Mapping[str, int]) -> bool:
    """True when every partition of a non-empty ``batch`` is already absorbed (offset <= committed)."""
    return bool(batch) and all(key in committed and offset <= committed[key] for key, offset in batch.items())


def encode_offsets(offsets: Mapping[str, int]) -> str:
    """Compact JSON of an offsets map, keys sorted, e.g. ``{"orders/0":42}``."""
    return json.dumps(dict(sorted(offsets.items())), separators=(",", ":"))
