"""Kafka offsets as the lake sinks store them with each commit (the exactly-once bookkeeping).

Offsets are a ``dict[str, int]`` keyed ``"topic/partition"`` (e.g. ``{"orders/0": 42}``); the
value is the NEXT offset to consume (last absorbed offset + 1), as Kafka commits offsets. Iceberg
keeps them in the snapshot summary, Paimon in the snapshot's ``properties``, both under
:data:`OFFSETS_PROPERTY` as compact JSON (as the Apache Iceberg Kafka Connect sink does).
"""

from __future__ import annotations

import json
from typing import Mapping

__all__ = [
    "OFFSETS_PROPERTY",
    "COMMIT_ID_PROPERTY",
    "topic_partition",
    "split_topic_partition",
    "merge_offsets",
    "is_replay",
    "encode_offsets",
    "decode_offsets",
]

#: Snapshot property holding the JSON offsets map.
OFFSETS_PROPERTY = "changelake.kafka-offsets"
#: Snapshot property holding a uuid shared by all snapshots of one sink commit.
COMMIT_ID_PROPERTY = "changelake.commit-id"


def topic_partition(topic: str, partition: int) -> str:
    """The offsets-map key of a topic-partition: ``"topic/partition"``."""
    return f"{topic}/{partition}"


def split_topic_partition(key: str) -> tuple[str, int]:
    """Inverse of :func:`topic_partition` (splits at the last ``/``); used by the runner to seek.
    Raises ValueError."""
    topic, _, partition = key.rpartition("/")
    if not topic:
        raise ValueError(f"offsets key {key!r} is not 'topic/partition'")
    return topic, int(partition)


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


def decode_offsets(text: str) -> dict[str, int]:
    """Inverse of :func:`encode_offsets`. Raises ValueError (json.JSONDecodeError) on bad text."""
    return {str(k): int(v) for k, v in json.loads(text).items()}
