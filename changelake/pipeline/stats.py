"""What a pipeline run did: :class:`RunStats`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["RunStats"]


@dataclass
class RunStats:
    """What a run did.

    Attributes:
        pipeline: the pipeline name.
        events: change events read from the source (before route/transform).
        batches: batches committed durably (a lake sink buffers several polls into one).
        tables: change events applied per sink table (``db.table`` -> count). A lake sink counts
            those its table commits absorbed (past the table's stored offsets): changes re-read
            after a consumer-group handover or a crash, or absorbed first by another worker, are
            not counted again, so the workers of a parallel run add up to the distinct changes.
            ``events`` counts what was read, re-reads included.
        position: the last committed source position of a positioned source (``mysql``), or None.
        offsets: the stored checkpoint of a partitioned source (``kafka``): next offset per
            ``topic/partition``.
        elapsed_s: wall time of the run in seconds.
        stopped_because: ``caught-up``, ``max-duration``, ``stopped``.
        metrics: the sink's counters at the end of the run (e.g. Kafka records, tombstones, commits).
        bad_records: records skipped with ``<format>.ignore-parse-errors`` (``kafka`` source):
            corrupt, or a change that cannot be applied (e.g. a row without its primary-key column).
        dead_letters: of those, records copied to ``dead-letter.topic``.
        inferred_schema_tables: source tables whose records carried no schema (no Pipeline 1 schema
            header, no schema wrapper), so their column types were inferred from JSON values.
    """

    pipeline: str
    events: int = 0
    batches: int = 0
    tables: dict[str, int] = field(default_factory=dict)
    position: Mapping[str, Any] | None = None
    offsets: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    stopped_because: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    bad_records: int = 0
    dead_letters: int = 0
    inferred_schema_tables: list[str] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        """A flat, JSON-able summary (for logs and Dagster metadata)."""
        return {
            "pipeline": self.pipeline,
            "events": self.events,
            "batches": self.batches,
            "tables": json.dumps(self.tables, sort_keys=True),
            "position": json.dumps(self.position, sort_keys=True, default=str) if self.position else "",
            "offsets": json.dumps(self.offsets, sort_keys=True),
            "elapsed_s": round(self.elapsed_s, 3),
            "stopped_because": self.stopped_because,
            "sink_metrics": json.dumps(self.metrics, sort_keys=True, default=str),
            "bad_records": self.bad_records,
            "dead_letters": self.dead_letters,
            "inferred_schema_tables": json.dumps(sorted(self.inferred_schema_tables)),
        }
