"""Errors shared by the lake sinks (Iceberg, Paimon)."""

from __future__ import annotations

from changelake.connectors.errors import ConnectorError

__all__ = ["LakeSinkError", "NullPrimaryKeyError", "LakeSchemaEvolutionError"]


class LakeSinkError(ConnectorError):
    """Base class of errors common to the lake sinks. ``table`` and ``column`` name where, when known."""

    def __init__(self, message: str, *, table: str | None = None, column: str | None = None) -> None:
        self.table = table
        self.column = column
        super().__init__(message)


class NullPrimaryKeyError(LakeSinkError):
    """A row to write has NULL in a primary-key column. Names the table and the column.

    A primary-key column cannot be NULL in MySQL; this usually means the transform's
    ``primary-keys`` names the wrong column for this table.
    """


class LakeSchemaEvolutionError(LakeSinkError):
    """An incoming schema change cannot be applied to a lake table without losing data.

    The base of each lake's ``SchemaEvolutionError`` (Iceberg, Paimon), so callers can catch one
    type whichever lake a pipeline names. ``table`` and ``column`` name where.
    """
