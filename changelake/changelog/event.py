"""DataChangeEvent: one captured change of one table row, with before and after images.

This is what a CDC source (MySQL binlog / snapshot) produces and what the changelog formats
(debezium-json, canal-json, maxwell-json) carry on Kafka; :meth:`DataChangeEvent.to_rows` turns it
into changelog rows (an update becomes ``-U`` then ``+U``), as Flink CDC's DataChangeEvent.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId

__all__ = ["Op", "DataChangeEvent", "TRUNCATE_TABLE", "DROP_TABLE"]

#: Flink CDC's schema-change event type names of the table-level events a truncate event stands for.
TRUNCATE_TABLE = "truncate.table"
DROP_TABLE = "drop.table"


class Op(enum.Enum):
    """Operation of a change event; values are Debezium's ``op`` letters."""

    CREATE = "c"
    READ = "r"  # a snapshot row
    UPDATE = "u"
    DELETE = "d"
    TRUNCATE = "t"


@dataclass(frozen=True)
class DataChangeEvent:
    """A change of one row of ``table``.

    Attributes:
        table: the table changed.
        op: c (insert), r (snapshot read), u (update), d (delete), t (truncate: no row images).
        before: the full row before the change (u, d), else None.
        after: the full row after the change (c, r, u), else None.
        schema: the table's schema at this event (columns as of the event, not today's), or None
            when decoded from a message that carries no schema.
        ts_ms: commit time in ms since the epoch, UTC; 0 for snapshot rows.
        position: source-specific resume position after this event (opaque to sinks), e.g.
            ``{"file": "mysql-bin.000003", "pos": 4711, "row": 2}``.
        transaction: Debezium's ``transaction`` block (``provide.transaction.metadata``):
            ``{"id": str, "total_order": int, "data_collection_order": int}`` (orders 1-based),
            or None (the default; snapshot rows and sources without transaction metadata).
        schema_change: for a ``t`` event, the table-level change it stands for, by Flink CDC's
            event type name: None or :data:`TRUNCATE_TABLE` (``TRUNCATE TABLE``), :data:`DROP_TABLE`
            (``DROP TABLE``: every row goes, as for a truncate, and a lake table re-created later
            starts from the new definition).
    """

    table: TableId
    op: Op
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    schema: Schema | None = None
    ts_ms: int = 0
    position: Mapping[str, Any] = field(default_factory=dict)
    transaction: Mapping[str, Any] | None = None
    schema_change: str | None = None

    @property
    def is_drop(self) -> bool:
        """A ``DROP TABLE`` (a ``t`` event with :attr:`schema_change` ``drop.table``)."""
        return self.op is Op.TRUNCATE and self.schema_change == DROP_TABLE

    def to_rows(self) -> list[ChangelogRow]:
        """Changelog rows: c/r -> [+I], u -> [-U, +U], d -> [-D], t -> [] (handled by sinks)."""
        meta = {"ts_ms": self.ts_ms, "op": self.op.value}
        if self.op in (Op.CREATE, Op.READ):
            return [ChangelogRow(RowKind.INSERT, dict(self.after or {}), self.table, meta)]
        if self.op is Op.UPDATE:
            return [
                ChangelogRow(RowKind.UPDATE_BEFORE, dict(self.before or {}), self.table, meta),
                ChangelogRow(RowKind.UPDATE_AFTER, dict(self.after or {}), self.table, meta),
            ]
        if self.op is Op.DELETE:
            return [ChangelogRow(RowKind.DELETE, dict(self.before or {}), self.table, meta)]
        return []

    @property
    def key_row(self) -> Mapping[str, Any] | None:
        """The row whose primary key identifies this event: before for deletes, else after."""
        return self.before if self.op is Op.DELETE else self.after
