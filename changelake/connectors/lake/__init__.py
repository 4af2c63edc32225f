"""What the lake sinks (``iceberg``, ``paimon``) share, so that a new lake sink is one package with
only its table-format specifics plus one registry line:

- :mod:`~changelake.connectors.lake.sink`: :class:`LakeTableSink`, the base (buffering, replay
  skip, compaction, one commit per table, the checkpoint) and :class:`WriteResult`;
- :mod:`~changelake.connectors.lake.options`: the common keys and their validation;
- :mod:`~changelake.connectors.lake.factory`: the registry factory in one call;
- :mod:`~changelake.connectors.lake.compaction`, :mod:`~changelake.connectors.lake.offsets`,
  :mod:`~changelake.connectors.lake.errors`, :mod:`~changelake.connectors.lake.commit_policy`;
- the source contract on top of any lake sink, :mod:`~changelake.connectors.lake.changelog_sink`:
  :class:`~changelake.connectors.lake.changelog_sink.LakePositionSink` (positioned source,
  ``mysql``) and :class:`~changelake.connectors.lake.changelog_sink.LakeOffsetsSink` (partitioned
  source, ``kafka``), both :class:`~changelake.connectors.lake.changelog_sink.LakeChangelogSink`.
"""

from changelake.connectors.lake.compaction import TRUNCATE, BatchItem, CompactedBatch, TruncateMarker, compact
from changelake.connectors.lake.errors import LakeSinkError, NullPrimaryKeyError
from changelake.connectors.lake.offsets import OFFSETS_PROPERTY, topic_partition
from changelake.connectors.lake.sink import LakeTableSink, WriteResult

__all__ = [
    "TRUNCATE",
    "TruncateMarker",
    "BatchItem",
    "CompactedBatch",
    "compact",
    "LakeSinkError",
    "NullPrimaryKeyError",
    "OFFSETS_PROPERTY",
    "topic_partition",
    "LakeTableSink",
    "WriteResult",
]

