"""A lake sink (``iceberg``, ``paimon``) fed directly by a positioned source (``mysql``), exactly once.

Flink CDC writes MySQL straight into Iceberg or Paimon; so does ``mysql -> iceberg`` here, with the
same rule as Kafka -> lake (:mod:`changelake.connectors.lake.offsets`): every change event gets
the next number of a per-pipeline sequence, which stands in for a Kafka offset on the pseudo
topic-partition ``changelake.source.<pipeline>/0``. Each table commit stores the next number it
absorbed in its snapshot; after all of a commit's tables, the pipeline checkpoint (a pipeline
property of the lake, :data:`POSITION_KEY`) stores the source position together with the next
number::

    {"position": {"phase": "binlog", "file": "mysql-bin.000003", "pos": 4711, "row": 0}, "next": 1234}

A restart resumes the source at that position and numbers its events from ``next`` again; a
table that committed past the checkpoint (a crash between two tables' commits) skips the events
below its own stored number, so nothing is applied twice and nothing is lost. This relies on the
source returning the same events in the same order from a stored position, as the binlog does;
a snapshot chunk re-read after a crash reads the table's current rows, which the binlog that
follows the snapshot brings to the same final state (as Flink CDC's snapshot without locks).
"""

from __future__ import annotations

import json
import time
from typing import Any, Mapping, Sequence

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RETRACT, RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.connectors.base import LakeSink
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.lake.compaction import BatchItem, TruncateMarker
from changelake.connectors.lake.offsets import topic_partition

__all__ = ["LakePositionSink", "POSITION_KEY", "sequence_topic"]

#: Pipeline property holding ``{"position": ..., "next": n}``; ``{pipeline}`` is the pipeline name.
POSITION_KEY = "pipeline.{pipeline}.source-position"


def sequence_topic(pipeline: str) -> str:
    """The pseudo topic whose partition 0 numbers a pipeline's change events: ``changelake.source.<pipeline>``."""
    return f"changelake.source.{pipeline}"


class LakePositionSink:
    """The :class:`~changelake.connectors.base.ChangelogSink` contract on top of a lake sink.

    Args:
        lake: an unopened ``IcebergSink`` or ``PaimonSink`` (anything with ``add``/``flush`` and
            ``read_pipeline_property``/``write_pipeline_property``).
        pipeline: the pipeline name (names the checkpoint and the sequence).

    ``commit(position)`` marks everything written so far as belonging to ``position``; the lake
    commit happens when the lake's ``commit.max-rows`` rows are buffered, ``commit.interval``
    seconds passed since the last one, or at :meth:`close`. The stored position only ever names
    data already committed to every table.

    Raises (from :meth:`write`):
        OptionValidationError: an event without schema, or a table without primary key (declare it
            with a ``transform`` rule ``primary-keys``).
    """

    #: A lake table keeps the final image per key: every row kind is accepted.
    changelog_mode: frozenset[RowKind] = RETRACT

    def __init__(self, lake: LakeSink, pipeline: str) -> None:
        self.lake = lake
        self.pipeline = pipeline
        self._tp = topic_partition(sequence_topic(pipeline), 0)
        self._key = POSITION_KEY.format(pipeline=pipeline)
        self._interval_s = float(getattr(lake.options, "commit_interval_s", 10.0))
        self._stored: dict[str, Any] | None = None
        self._next = 0  # number of the next event written
        self._committed_next = 0  # events below this number are committed with self._stored
        self._pending: dict[str, Any] | None = None  # a position given to commit(), not yet in the lake
        self._uncommitted = False  # events written since the last commit()
        self._last_flush = time.monotonic()
        self._open = False
        #: counters: change events written, checkpoints stored, table commits, table commits
        #: skipped as replays (the table already held the events, after a crash)
        self.metrics: dict[str, int] = {"events": 0, "commits": 0, "table_commits": 0, "replays_skipped": 0}

    def open(self) -> None:
        """Open the lake and read the stored checkpoint (idempotent)."""
        if self._open:
            return
        self.lake.open()
        text = self.lake.read_pipeline_property(self._key)  # type: ignore[attr-defined]
        if text:
            stored = json.loads(text)
            self._stored = dict(stored["position"]) if stored.get("position") is not None else None
            self._next = self._committed_next = int(stored["next"])
        self._last_flush = time.monotonic()
        self._open = True

    def stored_position(self) -> dict[str, Any] | None:
        """The source position of the last lake commit, None on the first run."""
        return self._stored

    def write(self, events: Sequence[DataChangeEvent]) -> None:
        """Number the events and buffer their rows per table in the lake sink (no I/O)."""
        per_table: dict[TableId, tuple[Schema, list[BatchItem]]] = {}
        for event in events:
            schema = self._schema(event)
            meta = {"topic": sequence_topic(self.pipeline), "partition": 0, "offset": self._next}
            self._next += 1
            prev = per_table.get(event.table)
            items = prev[1] if prev else []
            if prev and prev[0] != schema:  # schema change inside the batch: hand over the rows so far
                self.lake.add(event.table, items, prev[0], {})
                items = []
            if event.op is Op.TRUNCATE:
                items.append(TruncateMarker(metadata=meta))
            else:
                rows = event.to_rows()
                if rows:
                    row_meta = {**rows[0].metadata, **meta}
                    items.extend(ChangelogRow(r.kind, r.values, r.table, row_meta) for r in rows)
            per_table[event.table] = (schema, items)
        offsets = {self._tp: self._next}
        for table_id, (schema, items) in per_table.items():
            self.lake.add(table_id, items, schema, offsets)
        self.metrics["events"] += len(events)
        self._uncommitted = self._uncommitted or bool(events)

    def commit(self, position: Mapping[str, Any]) -> None:
        """Everything written so far belongs to ``position``; commit the lake when it is due."""
        self._pending = dict(position)
        self._uncommitted = False
        if self.lake.should_flush() or time.monotonic() - self._last_flush >= self._interval_s:
            self._flush()

    def close(self) -> None:
        """Commit what :meth:`commit` covered, then close the lake (idempotent). Events written
        after the last :meth:`commit` are dropped; the next run reads them again."""
        if not self._open:
            self.lake.close()
            return
        try:
            if self._pending is not None and not self._uncommitted:
                self._flush()
        finally:
            self._open = False
            self.lake.close()

    def _flush(self) -> None:
        results = self.lake.flush()
        self._last_flush = time.monotonic()
        skipped = sum(1 for r in results if getattr(r, "skipped", False))
        self.metrics["table_commits"] += len(results) - skipped
        self.metrics["replays_skipped"] += skipped
        if self._pending is None:
            return
        if self._pending == self._stored and self._next == self._committed_next:
            self._pending = None
            return
        self.lake.write_pipeline_property(  # type: ignore[attr-defined]
            self._key, json.dumps({"position": self._pending, "next": self._next}, sort_keys=True, default=str)
        )
        self._stored, self._committed_next, self._pending = self._pending, self._next, None
        self.metrics["commits"] += 1

    def _schema(self, event: DataChangeEvent) -> Schema:
        schema = event.schema
        if schema is None:
            raise OptionValidationError(
                f"pipeline '{self.pipeline}': a change event of {event.table} carries no schema; a source writing to a "
                "lake directly must give each event its table schema",
                option="type",
            )
        if not schema.primary_key:
            raise OptionValidationError(
                f"pipeline '{self.pipeline}': table {event.table} has no primary key; declare it with a 'transform' "
                "rule: primary-keys: <col>[,<col>...]",
                option="transform.primary-keys",
            )
        return schema
