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

__all__ = ["TableProgress", "LakeProgress", "TopicProgress", "lag_of", "lag_by_topic"]

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
            step.count_ops(ops)
            total = self.tables.setdefault(table, TableProgress(table))
            total.accumulate(step)
            total.offsets.update(step.offsets)
            total.snapshot_id = step.snapshot_id
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


def lag_of(offsets: Mapping[str, int], ends: Mapping[str, int]) -> int:
    """Records (offsets) between what was absorbed and the end, summed over ``ends``' partitions;
    a partition not in ``offsets`` counts from 0 (the one lag sum)."""
    return sum(max(0, end - offsets.get(tp, 0)) for tp, end in ends.items())


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
