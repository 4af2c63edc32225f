"""What a pipeline run reports per table and per topic: one vocabulary for every way it runs.

Pipeline 2 (Kafka -> Iceberg) reports, per lake table and per commit or per bounded run:
``rows_inserted``, ``rows_updated``, ``rows_deleted`` (change events by operation: snapshot reads
and creates are inserts), ``offsets`` (that table's own next Kafka offsets, as stored in its
snapshot summary), ``snapshot_id`` and ``lag`` (records on its topic(s) not yet absorbed).
Pipeline 1 (MySQL -> Kafka) reports per topic ``records`` written, the topic's end ``offsets``
after the commit, and the source ``position``.

The runner's ``on_batch`` callback feeds :class:`LakeProgress` / :class:`TopicProgress`; the
Dagster layer turns their dictionaries into asset materializations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from changelake.connectors.kafka_common import lag_of

__all__ = ["TableProgress", "LakeProgress", "TopicProgress", "lag_of", "lag_by_topic", "RunProgress", "ProgressPrinter",
           "describe_position"]

_OP_FIELD = {"c": "rows_inserted", "r": "rows_inserted", "u": "rows_updated", "d": "rows_deleted"}


@dataclass
class TableProgress:
    """Accumulated progress of one lake table (``db.table`` of the sink)."""

    table: str
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    truncated: bool = False
    commits: int = 0
    offsets: dict[str, int] = field(default_factory=dict)
    snapshot_id: int | None = None
    #: unchanged rows the lake rewrote (copy-on-write) and keys changed, when the sink reports them
    rows_rewritten: int | None = None
    keys_changed: int = 0
    rows_written: int = 0

    def count_ops(self, ops: Mapping[str, int]) -> None:
        """Add change events by op letter: ``c``/``r`` inserted, ``u`` updated, ``d`` deleted."""
        for op, count in ops.items():
            name = _OP_FIELD.get(op)
            if name:
                setattr(self, name, getattr(self, name) + int(count))

    def accumulate(self, step: "TableProgress") -> None:
        """Add one commit's progress (rows, one commit, truncated)."""
        self.rows_inserted += step.rows_inserted
        self.rows_updated += step.rows_updated
        self.rows_deleted += step.rows_deleted
        self.truncated = self.truncated or step.truncated
        self.commits += 1

    @property
    def changed(self) -> bool:
        """True when at least one commit wrote to the table."""
        return self.commits > 0

    def metadata(self, lag: int | None = None) -> dict[str, Any]:
        """The table's metadata in the one vocabulary (JSON-able values)."""
        md: dict[str, Any] = {
            "rows_inserted": self.rows_inserted,
            "rows_updated": self.rows_updated,
            "rows_deleted": self.rows_deleted,
            "offsets": dict(sorted(self.offsets.items())),
            "snapshot_id": self.snapshot_id if self.snapshot_id is not None else "",
            "commits": self.commits,
        }
        if self.rows_rewritten is not None:
            md["rows_rewritten"] = self.rows_rewritten
            # rows written per changed key (about 1: only the changed rows; copy-on-write more)
            md["write_amplification"] = round(self.rows_written / self.keys_changed, 3) if self.keys_changed else 0.0
        if self.truncated:
            md["truncated"] = True
        if lag is not None:
            md["lag"] = lag
        return md


class LakeProgress:
    """Folds Pipeline 2's ``on_batch`` payloads into per-table progress.

    Each payload carries ``ops`` (table -> {op letter -> count}) and ``results`` (the sink's
    ``WriteResult`` per committed table). A replayed batch the table already held (``skipped``)
    counts nothing.

    Args:
        identifier: maps a sink table (``db.table``) to its lake identifier (``namespace.table``);
            identity by default.
        topics_of: maps a sink table to the topics it is read from; a commit's offsets are kept
            for those topics only (the sink stores the whole batch's offsets with each table).
            None keeps them all.
    """

    def __init__(self, identifier: Any = None, topics_of: Any = None) -> None:
        self.tables: dict[str, TableProgress] = {}
        self._identifier = identifier or (lambda table: table)
        self._topics_of = topics_of

    def add(self, batch: Mapping[str, Any]) -> list[TableProgress]:
        """Fold one batch in; returns the per-table progress of this batch alone (changed tables)."""
        results = {getattr(r, "table", None): r for r in batch.get("results") or ()}
        out: list[TableProgress] = []
        for table, ops in (batch.get("ops") or {}).items():
            result = results.get(self._identifier(table))
            if result is None or getattr(result, "skipped", False):
                continue
            offsets = dict(result.offsets)
            if self._topics_of is not None:
                topics = set(self._topics_of(table))
                offsets = {tp: o for tp, o in offsets.items() if tp.rpartition("/")[0] in topics}
            step = TableProgress(table, commits=1, offsets=offsets, snapshot_id=result.snapshot_id,
                                 truncated=bool(getattr(result, "truncated", False)))
            if getattr(result, "rows_rewritten", None) is not None:
                step.rows_rewritten = int(result.rows_rewritten)
                upserted = int(getattr(result, "rows_upserted", 0))
                step.keys_changed = upserted + int(getattr(result, "keys_deleted", 0))
                step.rows_written = step.rows_rewritten + upserted
            step.count_ops(ops)
            total = self.tables.setdefault(table, TableProgress(table))
            total.accumulate(step)
            total.offsets.update(step.offsets)
            total.snapshot_id = step.snapshot_id
            if step.rows_rewritten is not None:
                total.rows_rewritten = (total.rows_rewritten or 0) + step.rows_rewritten
                total.keys_changed += step.keys_changed
                total.rows_written += step.rows_written
            out.append(step)
        return out

    def add_positioned(self, batch: Mapping[str, Any]) -> list[TableProgress]:
        """Fold in one batch of a positioned source (``mysql``) into a lake: the events per table
        and op written with the source position (the lake commits them with it; no per-table
        results, offsets or snapshot ids). Returns this batch's per-table progress."""
        out: list[TableProgress] = []
        for table, ops in (batch.get("ops") or {}).items():
            step = TableProgress(table, commits=1)
            step.count_ops(ops)
            self.tables.setdefault(table, TableProgress(table)).accumulate(step)
            out.append(step)
        return out

    def get(self, table: str) -> TableProgress:
        """The accumulated progress of ``table`` (all zero if nothing was committed)."""
        return self.tables.get(table) or TableProgress(table)


@dataclass
class TopicProgress:
    """Folds Pipeline 1's ``on_batch`` payloads into per-topic record counts."""

    records: dict[str, int] = field(default_factory=dict)

    def add(self, per_topic: Mapping[str, int]) -> None:
        for topic, n in per_topic.items():
            self.records[topic] = self.records.get(topic, 0) + int(n)


def lag_by_topic(positions: Mapping[str, tuple[int, int]]) -> dict[str, int]:
    """Lag per topic of ``{"topic/partition": (absorbed, end)}`` (as ``kafka_lag`` returns it):
    :func:`lag_of` over each topic's partitions, e.g. ``{"db.t": 12}``."""
    absorbed: dict[str, dict[str, int]] = {}
    ends: dict[str, dict[str, int]] = {}
    for tp, (done, end) in positions.items():
        topic = tp.rpartition("/")[0]
        absorbed.setdefault(topic, {})[tp] = done
        ends.setdefault(topic, {})[tp] = end
    return {topic: lag_of(absorbed[topic], ends[topic]) for topic in ends}


def dumps(value: Any) -> str:
    """Compact, sorted JSON (for metadata text)."""
    return json.dumps(value, sort_keys=True, default=str)


class RunProgress:
    """A progress line for a long run, at a steady interval (as Flink's and Debezium's periodic
    "records read" lines): events per table, the source position or the lag, and during an
    initial snapshot the rows done out of the estimate with percent and ETA.

    Fed the runner's ``on_batch`` payloads (``tables``: table -> events, ``ops``: table -> {op
    letter -> count}, ``position``: the source position, JSON-able). Thread-safe enough for one
    writer (the pipeline's thread) and one reader (the op's thread): it only swaps whole values.

    Args:
        interval_s: seconds between lines (``CHANGELAKE_PROGRESS_INTERVAL_S``, default 10).
        snapshot_estimate: total rows the initial snapshot will read (the server's estimate), or
            None when unknown or when there is no snapshot.
        clock: ``time.monotonic`` by default (injectable for tests).
    """

    def __init__(self, interval_s: float | None = None, snapshot_estimate: int | None = None,
                 clock: Any = None) -> None:
        import os
        import time

        if interval_s is None:
            interval_s = float(os.environ.get("CHANGELAKE_PROGRESS_INTERVAL_S", "10"))
        self.interval_s = max(0.0, interval_s)
        self.snapshot_estimate = snapshot_estimate
        self._clock = clock or time.monotonic
        self.started = self._clock()
        self._last_line = self.started
        self.events = 0
        self.per_table: dict[str, int] = {}
        self.snapshot_rows = 0
        self.position: Any = None
        self.lag: int | None = None

    def add(self, batch: Mapping[str, Any]) -> None:
        """Fold one ``on_batch`` payload in."""
        tables = batch.get("tables") or {}
        for table, n in tables.items():
            self.per_table[str(table)] = self.per_table.get(str(table), 0) + int(n)
        self.events += int(batch.get("events") or sum(int(n) for n in tables.values()))
        self.snapshot_rows += sum(int((ops or {}).get("r", 0)) for ops in (batch.get("ops") or {}).values())
        if batch.get("position") is not None:
            self.position = batch.get("position")

    def due(self) -> bool:
        """True once ``interval_s`` passed since the last line."""
        return self._clock() - self._last_line >= self.interval_s

    def line(self) -> str:
        """The progress line now (and restart the interval): ``progress: 12,000 events in 30 s
        (400/s); db.a 2,000, db.b 10,000; position binlog mysql-bin.000003:4567; snapshot 12,000
        of ~100,000 rows (12%, ETA 3m40s)``."""
        now = self._clock()
        self._last_line = now
        elapsed = max(1e-9, now - self.started)
        parts = [f"progress: {self.events:,} events in {elapsed:.0f} s ({self.events / elapsed:,.0f}/s)"]
        if self.per_table:
            top = sorted(self.per_table.items(), key=lambda kv: (-kv[1], kv[0]))
            shown = ", ".join(f"{t} {n:,}" for t, n in top[:8])
            parts.append(shown + (f", +{len(top) - 8} more tables" if len(top) > 8 else ""))
        else:
            parts.append("no changes yet")
        where = describe_position(self.position)
        if where:
            parts.append(f"position {where}")
        if self.lag is not None:
            parts.append(f"lag {self.lag:,}")
        snapshot = self.snapshot_text(elapsed)
        if snapshot:
            parts.append(snapshot)
        return "; ".join(parts)

    def snapshot_fraction(self) -> float | None:
        """Rows done / estimate (capped at 1.0), or None without an estimate."""
        if not self.snapshot_estimate:
            return None
        return min(1.0, self.snapshot_rows / self.snapshot_estimate)

    def snapshot_text(self, elapsed: float) -> str:
        """``snapshot 12,000 of ~100,000 rows (12%, ETA 3m40s)`` while a snapshot runs, else ''."""
        in_snapshot = isinstance(self.position, Mapping) and self.position.get("phase") == "snapshot"
        if not in_snapshot and not (self.snapshot_rows and self.position is None):
            return ""
        fraction = self.snapshot_fraction()
        if fraction is None:
            return f"snapshot {self.snapshot_rows:,} rows"
        eta = ""
        if 0 < fraction < 1:
            eta = f", ETA {_duration(elapsed * (1 - fraction) / fraction)}"
        return f"snapshot {self.snapshot_rows:,} of ~{self.snapshot_estimate:,} rows ({fraction:.0%}{eta})"


def describe_position(position: Any) -> str:
    """A short text of a source position: ``binlog mysql-bin.000003:4567`` (a MySQL position, in
    the snapshot or binlog phase), ``gtid ...``, or ``N partitions`` for Kafka offsets."""
    if not isinstance(position, Mapping) or not position:
        return ""
    if "file" in position and "pos" in position:
        phase = position.get("phase", "binlog")
        return f"{phase} {position['file']}:{position['pos']}"
    if "gtid" in position:
        return f"gtid {position['gtid']}"
    if all(isinstance(v, int) for v in position.values()):
        return f"offsets of {len(position)} partition(s)"
    return ""


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{s:02d}s"
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m"


class ProgressPrinter:
    """Shows progress lines on stderr: a rich status line redrawn in place where a terminal is
    attached, plain lines (one per interval, for logs) otherwise. :meth:`close` ends the display."""

    def __init__(self, stream: Any = None) -> None:
        import sys

        self._stream = stream or sys.stderr
        self._live: Any = None
        if getattr(self._stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.live import Live

            self._live = Live("", console=Console(file=self._stream), refresh_per_second=2, transient=False)
            self._live.start()

    def show(self, line: str, fraction: float | None = None) -> None:
        if self._live is not None:
            from rich.progress_bar import ProgressBar
            from rich.table import Table

            grid = Table.grid(padding=(0, 1))
            grid.add_row(line)
            if fraction is not None:
                grid.add_row(ProgressBar(total=1.0, completed=fraction, width=40))
            self._live.update(grid)
        else:
            print(line, file=self._stream, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
