"""ChangelogRow: the one internal language of every hop (a RowKind plus column values)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import TableId

__all__ = ["ChangelogRow"]


@dataclass(frozen=True)
class ChangelogRow:
    """One change: ``kind`` applied to a row of ``values`` of table ``table``.

    Attributes:
        kind: +I, -U, +U or -D.
        values: column name -> Python value (see :mod:`changelake.changelog.types`), in column
            order. A -D row carries the full deleted row when known, else only the key columns.
        table: the table the row belongs to, or None when the stream has one implicit table.
        metadata: source metadata, e.g. ``ts_ms`` (commit time, ms since epoch, 0 for snapshot
            rows), ``snapshot`` (bool), ``op`` (the Debezium op letter that produced the row).
    """

    kind: RowKind
    values: Mapping[str, Any]
    table: TableId | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def with_kind(self, kind: RowKind) -> "ChangelogRow":
        return replace(self, kind=kind)

    def __str__(self) -> str:
        """As Flink's SQL client prints a changelog: ``+U[1, Alice, 12.50]``."""
        inner = ", ".join("NULL" if v is None else str(v) for v in self.values.values())
        return f"{self.kind.short_string}[{inner}]"

    @staticmethod
    def insert(values: Mapping[str, Any], table: TableId | None = None) -> "ChangelogRow":
        return ChangelogRow(RowKind.INSERT, dict(values), table)

    @staticmethod
    def update_before(values: Mapping[str, Any], table: TableId | None = None) -> "ChangelogRow":
        return ChangelogRow(RowKind.UPDATE_BEFORE, dict(values), table)

    @staticmethod
    def update_after(values: Mapping[str, Any], table: TableId | None = None) -> "ChangelogRow":
        return ChangelogRow(RowKind.UPDATE_AFTER, dict(values), table)

    @staticmethod
    def delete(values: Mapping[str, Any], table: TableId | None = None) -> "ChangelogRow":
        return ChangelogRow(RowKind.DELETE, dict(values), table)
