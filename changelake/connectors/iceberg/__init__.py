"""The ``iceberg`` pipeline sink: changelog batches into Iceberg tables via pyiceberg, exactly once.

Public API: :class:`IcebergSink` (writer), :func:`parse_sink_options` / :class:`IcebergSinkOptions`,
:data:`TRUNCATE`, :func:`read_table`, :func:`topic_partition`, and the type mapping in
:mod:`changelake.connectors.iceberg.types`.
"""

from changelake.connectors.lake.compaction import TRUNCATE, TruncateMarker
from changelake.connectors.iceberg.errors import (
    IcebergCommitError,
    IcebergSinkError,
    IcebergTypeError,
    NullPrimaryKeyError,
    SchemaEvolutionError,
)
from changelake.connectors.iceberg.offsets import OFFSETS_PROPERTY, topic_partition
from changelake.connectors.iceberg.options import IDENTIFIER, IcebergSinkOptions, parse_sink_options
from changelake.connectors.iceberg.reader import read_table
from changelake.connectors.iceberg.catalog import open_catalog
from changelake.connectors.iceberg.writer import IcebergSink, WriteResult

__all__ = [
    "IDENTIFIER",
    "IcebergSink",
    "IcebergSinkOptions",
    "parse_sink_options",
    "WriteResult",
    "open_catalog",
    "read_table",
    "TRUNCATE",
    "TruncateMarker",
    "OFFSETS_PROPERTY",
    "topic_partition",
    "IcebergSinkError",
    "IcebergTypeError",
    "IcebergCommitError",
    "NullPrimaryKeyError",
    "SchemaEvolutionError",
]
