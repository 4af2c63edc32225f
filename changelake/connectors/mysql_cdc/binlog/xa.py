"""XA transactions in the binlog: hold prepared work until its outcome is known.

MariaDB (10.5+) and MySQL write an XA transaction's changes at ``XA PREPARE`` (a group ending
with an ``XA_PREPARE_LOG_EVENT``) and its outcome later, in a group of its own (``XA COMMIT`` /
``XA ROLLBACK`` query). :class:`XaBook` keeps the prepared changes per XID: they are published at
``XA COMMIT`` and dropped at ``XA ROLLBACK``. Where each prepared group starts is part of the
stored position (:class:`~changelake.connectors.mysql_cdc.positions.PreparedXa`), so a restart
re-reads it; see :mod:`~changelake.connectors.mysql_cdc.binlog.reader`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from changelake.changelog.event import Op
from changelake.changelog.schema import Schema, TableId
from changelake.connectors.mysql_cdc.positions import PreparedXa

__all__ = ["HeldChange", "XaBook"]


@dataclass(frozen=True)
class HeldChange:
    """One decoded row change of a prepared XA transaction, not yet published."""

    table: TableId
    op: Op
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    schema: Schema | None


class XaBook:
    """Prepared XA transactions: their positions and (once read) their changes.

    Args:
        prepared: transactions prepared before the reader's start (from the stored position);
            their changes are unknown until :meth:`hold` is called for them while re-reading.
    """

    def __init__(self, prepared: tuple[PreparedXa, ...] = ()) -> None:
        self._prepared: dict[str, PreparedXa] = {x.xid: x for x in prepared}
        self._held: dict[str, list[HeldChange]] = {}

    @property
    def has_pending(self) -> bool:
        """True while some prepared transaction is unresolved."""
        return bool(self._prepared)

    def pending(self) -> tuple[PreparedXa, ...]:
        """Prepared, unresolved transactions, in binlog order."""
        return tuple(sorted(self._prepared.values(), key=PreparedXa.sort_key))

    def at(self, file: str, pos: int) -> PreparedXa | None:
        """The pending transaction whose group starts at ``file:pos`` (None if none does)."""
        for x in self._prepared.values():
            if x.file == file and x.pos == pos:
                return x
        return None

    def hold(self, where: PreparedXa, changes: list[HeldChange]) -> None:
        """A group ending in XA PREPARE was read: keep its changes until the outcome."""
        self._prepared[where.xid] = where
        self._held[where.xid] = list(changes)

    def is_pending(self, xid: str) -> bool:
        return xid in self._prepared

    def changes(self, xid: str) -> list[HeldChange] | None:
        """The held changes of ``xid`` (None if they were never read: prepared before the start)."""
        return self._held.get(xid)

    def forget(self, xid: str) -> None:
        """The outcome of ``xid`` has been handled (published or dropped)."""
        self._prepared.pop(xid, None)
        self._held.pop(xid, None)
