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

:class:`~changelake.changelog.tally.PendingPolls` counts what was polled since the last durable
commit (the time of the first uncommitted poll).

Exactly-once is unchanged: the buffered polls' Kafka offsets go into the same commit as their
rows, and the pipeline checkpoint is written only after every buffered table committed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from changelake.changelog.tally import PendingPolls

__all__ = ["CommitPolicy", "PendingPolls"]


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
