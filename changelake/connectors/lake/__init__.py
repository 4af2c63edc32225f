"""Pieces shared by the lake sinks (``iceberg``, ``paimon``): batch compaction by primary key,
Kafka-offset bookkeeping, common errors, and the list of lake sink identifiers."""

from changelake.connectors.lake.compaction import TRUNCATE, BatchItem, CompactedBatch, TruncateMarker, compact
from changelake.connectors.lake.errors import LakeSinkError, NullPrimaryKeyError
from changelake.connectors.lake.offsets import OFFSETS_PROPERTY, topic_partition

__all__ = [
    "LAKE_SINK_TYPES",
    "TRUNCATE",
    "TruncateMarker",
    "BatchItem",
    "CompactedBatch",
    "compact",
    "LakeSinkError",
    "NullPrimaryKeyError",
    "OFFSETS_PROPERTY",
    "topic_partition",
]

#: Sink ``type`` identifiers of the lake sinks Pipeline 2 (Kafka -> lake) can write.
LAKE_SINK_TYPES: tuple[str, ...] = ("iceberg", "paimon")
