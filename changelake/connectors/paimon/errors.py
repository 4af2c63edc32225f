"""Errors of the Paimon sink (``changelake.connectors.paimon``)."""

from __future__ import annotations

from changelake.connectors.lake.errors import LakeSchemaEvolutionError, LakeSinkError, NullPrimaryKeyError

__all__ = [
    "PaimonSinkError",
    "PaimonTypeError",
    "SchemaEvolutionError",
    "NullPrimaryKeyError",
    "PaimonCommitError",
]


class PaimonSinkError(LakeSinkError):
    """Base class of Paimon sink errors. ``table`` and ``column`` name where, when known."""


class PaimonTypeError(PaimonSinkError):
    """A changelake value cannot be stored in its Paimon column (names table and column)."""


class SchemaEvolutionError(PaimonSinkError, LakeSchemaEvolutionError):
    """An incoming schema change cannot be applied to the Paimon table without losing data.

    Attributes:
        old_type, new_type: the lake column's Paimon type and the incoming one (e.g. ``INT`` and
            ``STRING``), when the error is about a column's type.

    Allowed changes: new columns (added as nullable), TINYINT -> SMALLINT -> INT -> BIGINT,
    FLOAT -> DOUBLE, a larger DECIMAL precision with the same scale, NOT NULL -> NULL, a dropped
    column (kept, written as NULL). Anything else (a changed primary key, DECIMAL scale, INT ->
    STRING ...) needs an operator: route the table to a new lake table, or migrate the existing
    one by hand (Paimon's ``ALTER TABLE``) and restart the pipeline.
    """

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        column: str | None = None,
        old_type: str | None = None,
        new_type: str | None = None,
    ) -> None:
        self.old_type = old_type
        self.new_type = new_type
        super().__init__(message, table=table, column=column)


class PaimonCommitError(PaimonSinkError):
    """The Paimon commit failed (names the table).

    The batch was not absorbed: the offsets stored in the table's snapshots are unchanged, so
    restarting the ingest replays it.
    """
