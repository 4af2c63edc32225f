"""RowKind: the four kinds of change in a changelog, as Flink's ``org.apache.flink.types.RowKind``."""

from __future__ import annotations

import enum

__all__ = ["RowKind", "INSERT_ONLY", "UPSERT", "RETRACT", "ALL_KINDS"]


class RowKind(enum.Enum):
    """Kind of a changelog row. ``str(kind)`` is Flink's short string (``+I``, ``-U``, ``+U``, ``-D``)."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"

    def __str__(self) -> str:
        return self.value

    @property
    def short_string(self) -> str:
        """Flink's short string: ``+I``, ``-U``, ``+U`` or ``-D``."""
        return self.value

    @property
    def is_retraction(self) -> bool:
        """True for ``-U`` and ``-D`` (the row leaves the result)."""
        return self in (RowKind.UPDATE_BEFORE, RowKind.DELETE)

    @property
    def is_accumulate(self) -> bool:
        """True for ``+I`` and ``+U`` (the row enters the result)."""
        return self in (RowKind.INSERT, RowKind.UPDATE_AFTER)

    @classmethod
    def from_short_string(cls, text: str) -> "RowKind":
        """Parse ``+I``/``-U``/``+U``/``-D``. Raises ValueError on anything else."""
        for kind in cls:
            if kind.value == text:
                return kind
        raise ValueError(f"unknown row kind {text!r}; expected one of +I, -U, +U, -D")


#: Changelog modes, as sets of the kinds a source emits or a sink accepts (Flink's ChangelogMode).
INSERT_ONLY: frozenset[RowKind] = frozenset({RowKind.INSERT})
UPSERT: frozenset[RowKind] = frozenset({RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.DELETE})
RETRACT: frozenset[RowKind] = frozenset(RowKind)
ALL_KINDS: frozenset[RowKind] = RETRACT
