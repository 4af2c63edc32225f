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
Buffering, the commit policy and the checkpoint-after-tables order are
:class:`~changelake.connectors.lake.changelog_sink.LakeChangelogSink`'s.
"""

from __future__ import annotations

import json
from typing import Any

from changelake.changelog.event import DataChangeEvent
from changelake.connectors.base import LakeSink
from changelake.connectors.lake.changelog_sink import LakeChangelogSink

__all__ = ["LakePositionSink", "POSITION_KEY", "sequence_topic"]

#: Pipeline property holding ``{"position": ..., "next": n}``; ``{pipeline}`` is the pipeline name.
POSITION_KEY = "pipeline.{pipeline}.source-position"


def sequence_topic(pipeline: str) -> str:
    """The pseudo topic whose partition 0 numbers a pipeline's change events: ``changelake.source.<pipeline>``."""
    return f"changelake.source.{pipeline}"


class LakePositionSink(LakeChangelogSink):
    """The :class:`~changelake.connectors.base.ChangelogSink` contract on top of a lake sink, for a
    positioned source: events are numbered on :func:`sequence_topic` partition 0.

    Args:
        lake: an unopened ``IcebergSink`` or ``PaimonSink``.
        pipeline: the pipeline name (names the checkpoint and the sequence).

    ``commit(position)`` marks everything written so far as belonging to ``position``; the lake
    commit happens when the lake's ``commit.max-rows`` rows are buffered, ``commit.interval``
    seconds passed, or at :meth:`flush`. The stored position only ever names data already
    committed to every table.

    Raises (from :meth:`write`):
        PipelineDataError: an event without schema, or a table without primary key (declare it
            with a ``transform`` rule ``primary-keys``).
    """

    def __init__(self, lake: LakeSink, pipeline: str) -> None:
        super().__init__(lake, pipeline)
        self._topic = sequence_topic(pipeline)
        self._key = POSITION_KEY.format(pipeline=pipeline)
        self._next = 0  # number of the next event written
        self._committed_next = 0  # events below this number are committed with the stored position

    def _load(self) -> None:
        text = self.lake.read_pipeline_property(self._key)
        if text:
            stored = json.loads(text)
            self._stored = dict(stored["position"]) if stored.get("position") is not None else None
            self._next = self._committed_next = int(stored["next"])

    def _locate(self, event: DataChangeEvent) -> tuple[str, int, int]:
        number = self._next
        self._next += 1
        return self._topic, 0, number

    def _checkpoint_moved(self) -> bool:
        # the same source position with more events numbered (e.g. a snapshot chunk re-read) moves it too
        return self._pending != self._stored or self._next != self._committed_next

    def _store(self, position: dict[str, Any]) -> None:
        self.lake.write_pipeline_property(
            self._key, json.dumps({"position": position, "next": self._next}, sort_keys=True, default=str)
        )
        self._committed_next = self._next
