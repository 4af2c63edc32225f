"""Compaction of a changelog batch by primary key; moved to :mod:`changelake.connectors.lake.compaction`
(shared with the Paimon sink). Re-exported here for existing imports."""

from changelake.connectors.lake.compaction import TRUNCATE, BatchItem, CompactedBatch, TruncateMarker, compact

__all__ = ["TruncateMarker", "TRUNCATE", "BatchItem", "CompactedBatch", "compact"]
