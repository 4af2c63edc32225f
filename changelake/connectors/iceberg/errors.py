"""Errors of the Iceberg sink (``changelake.connectors.iceberg``)."""

from __future__ import annotations

from changelake.connectors.lake.errors import LakeSchemaEvolutionError, LakeSinkError, NullPrimaryKeyError

__all__ = [
    "IcebergSinkError",
    "IcebergTypeError",
    "SchemaEvolutionError",
    "NullPrimaryKeyError",
    "IcebergCommitError",
]


class IcebergSinkError(LakeSinkError):
    """Base class of Iceberg sink errors. ``table`` and ``column`` name where, when known."""


class IcebergTypeError(IcebergSinkError):
    """A changelake type or value cannot be stored in the Iceberg column (names table and column)."""


class SchemaEvolutionError(IcebergSinkError, LakeSchemaEvolutionError):
    """An incoming schema change cannot be applied to the Iceberg table without losing data.

    Allowed changes: new columns (added as nullable), int -> long, float -> double, a larger DECIMAL
    precision with the same scale, NOT NULL -> NULL, a dropped column (kept, made nullable). Anything
    else (e.g. a changed primary key, DECIMAL scale, or INT -> STRING) needs an operator: route the
    table to a new lake table, or migrate the existing one by hand and restart the pipeline.
    """


class IcebergCommitError(IcebergSinkError):
    """The Iceberg commit failed after pyiceberg's own retries (names the table).

    The batch was not absorbed; the offsets stored in the table are unchanged, so restarting the
    ingest replays it.
    """
