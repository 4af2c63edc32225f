"""When a lake sink commits: batches sized by rows and time, not by source polls.

A poll returns at most a few thousand records; committing each poll costs one Iceberg snapshot
(metadata file, manifest list, and a copy-on-write rewrite of every data file a delete touches)
per table per poll. :class:`CommitPolicy` lets
:class:`~changelake.connectors.lake.changelog_sink.LakeChangelogSink` buffer several polls and
commit them together, as Flink's Iceberg sink commits once per checkpoint interval:

* ``commit.max-rows`` changelog rows are buffered (the lake sink's ``should_flush()``), or
* ``commit.interval`` has passed since the first uncommitted poll, or
* a poll returned nothing (the source is drained for now: commit what is there), or
* the run stops.

:class:`PendingPolls` counts what was polled since the last durable commit (the runner's batch
report, and the time of the first uncommitted poll).

Exactly-once is unchanged: the buffered polls' Kafka offsets go into the same commit as their
rows, and the pipeline checkpoint is written only after every buffered table committed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["CommitPolicy", "PendingPolls"]


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


@dataclass(frozen=True)
class CommitPolicy:
    """Decides whether the buffered polls are committed now.

    Attributes:
        interval_s: seconds after the first uncommitted poll at which a commit is due (> 0).
        clock: the monotonic clock (seconds), replaceable in tests.
    """

    interval_s: float = 10.0
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def of(cls, sink_options: Any) -> "CommitPolicy":
        """The policy of a lake sink's options (``commit_interval_s``, default 10 s)."""
        return cls(float(getattr(sink_options, "commit_interval_s", 10.0)))

    def due(self, pending: PendingPolls, *, buffer_full: bool, polled_nothing: bool) -> bool:
        """True when the runner should commit now: the sink's buffer reached ``commit.max-rows``,
        the last poll returned nothing, or ``interval_s`` passed since the first pending poll."""
        if buffer_full or polled_nothing:
            return True
        return pending.since is not None and self.clock() - pending.since >= self.interval_s
