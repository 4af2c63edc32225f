"""Counting change events: per sink table and op letter (the one op tally), and what was polled
since the last durable commit (the runner's batch report, a lake sink's commit policy)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable

from changelake.changelog.event import DataChangeEvent

__all__ = ["PendingPolls", "tally_ops"]


def tally_ops(events: Iterable[DataChangeEvent]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Change events per sink table (``db.table`` -> count), and per sink table and op letter
    (``db.table`` -> ``{"c": n, "u": n, "d": n, "r": n, ...}``)."""
    applied: dict[str, int] = {}
    ops: dict[str, dict[str, int]] = {}
    for event in events:
        table = str(event.table)
        applied[table] = applied.get(table, 0) + 1
        by_op = ops.setdefault(table, {})
        by_op[event.op.value] = by_op.get(event.op.value, 0) + 1
    return applied, ops


@dataclass
class PendingPolls:
    """What was polled since the last commit.

    Attributes:
        records: Kafka records polled (including rejected ones).
        events: change events in them.
        offsets: next offset per ``topic/partition`` after the polled records.
        applied: change events per sink table (``db.table`` -> count).
        ops: change events per sink table and op letter (``db.table`` -> ``{"c": n, "u": n, ...}``).
        since: ``time.monotonic()`` of the first uncommitted poll (None when nothing is pending).
    """

    records: int = 0
    events: int = 0
    offsets: dict[str, int] = field(default_factory=dict)
    applied: dict[str, int] = field(default_factory=dict)
    ops: dict[str, dict[str, int]] = field(default_factory=dict)
    since: float | None = None

    def note(
        self,
        records: int,
        events: int,
        offsets: dict[str, int],
        applied: dict[str, int],
        ops: dict[str, dict[str, int]] | None = None,
    ) -> None:
        """Add one poll's figures (offsets: max per partition)."""
        if self.since is None:
            self.since = time.monotonic()
        self.records += records
        self.events += events
        for tp, offset in offsets.items():
            self.offsets[tp] = max(self.offsets.get(tp, 0), offset)
        for table, count in applied.items():
            self.applied[table] = self.applied.get(table, 0) + count
        for table, by_op in (ops or {}).items():
            mine = self.ops.setdefault(table, {})
            for op, count in by_op.items():
                mine[op] = mine.get(op, 0) + count
