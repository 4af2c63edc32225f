"""Asset events of a pipeline run, in one vocabulary (see ``changelake.pipeline.progress``).

* Pipeline 1 (MySQL -> Kafka): one materialization of ``kafka/<db>/<table>`` per commit and topic
  with ``records``, ``offsets`` (the topic's end offsets after the commit) and ``position``.
* Pipeline 2 (Kafka -> Iceberg): one materialization of ``lake/<pipeline>/<db>/<table>`` per changed table
  with ``rows_inserted``, ``rows_updated``, ``rows_deleted``, ``offsets`` (that table's own),
  ``snapshot_id`` and ``lag`` — per commit from the long-running op, per run from the asset.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import dagster as dg

from changelake.changelog import TableId
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.progress import LakeProgress, ProgressPrinter, RunProgress, TableProgress, lag_of
from assets.keys import lake_asset_key, topic_asset_key
from assets.metadata import OFFSETS, PIPELINE, POSITION, RECORDS

__all__ = ["Reporter", "TopicReporter", "LakeReporter", "reporter_for", "lake_metadata", "PROGRESS_ENV"]

#: ``stderr``: show progress lines on stderr too (set by ``changelake pipeline run``)
PROGRESS_ENV = "CHANGELAKE_PROGRESS"


def _md(values: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key] = dg.MetadataValue.json(value) if isinstance(value, (dict, list)) else value
    return out


def lake_metadata(progress: TableProgress, lag: int | None, pipeline: str) -> dict[str, Any]:
    """Dagster metadata of one lake table's progress (the one vocabulary)."""
    return _md({**progress.metadata(lag), PIPELINE: pipeline})


class Reporter:
    """Turns ``on_batch`` payloads into asset materializations, and the run's final stats into
    the op's output metadata. Called from the pipeline's thread (``on_batch``) and, after it
    ended, from the op's (``final``, ``close``)."""

    def __init__(self, defn: PipelineDefinition) -> None:
        import os
        import threading

        self.defn = defn
        self.run_progress = RunProgress()
        self._lock = threading.Lock()
        self._estimated = False
        mode = os.environ.get(PROGRESS_ENV, "")
        self._printer = ProgressPrinter() if mode == "stderr" else None

    def track(self, batch: Mapping[str, Any]) -> None:
        """Fold a batch into the run's progress (every reporter's ``on_batch`` calls it). The
        first batch of an initial snapshot asks the source for its row estimate."""
        with self._lock:
            self.run_progress.add(batch)
            position = batch.get("position")
            in_snapshot = isinstance(position, Mapping) and position.get("phase") == "snapshot"
        if in_snapshot and not self._estimated and self.defn.source_type == "mysql":
            self._estimated = True
            from changelake.connectors.mysql_cdc.snapshot.estimate import snapshot_row_estimate

            self.run_progress.snapshot_estimate = snapshot_row_estimate(self.defn.options("source"))

    def current_lag(self) -> int | None:
        """Offsets not yet absorbed, summed over the run's topics (None: not measured)."""
        return None

    def progress_line(self, force: bool = False) -> str | None:
        """The progress line when the interval has passed (or ``force``), else None; also shown
        on stderr when the CLI asked for it (``CHANGELAKE_PROGRESS=stderr``: a rich status line on
        a terminal, plain lines otherwise)."""
        if not (force or self.run_progress.due()):
            return None
        try:
            lag = self.current_lag()
        except Exception:  # noqa: BLE001 - progress only; the run reports real errors
            lag = None
        with self._lock:
            self.run_progress.lag = lag
            line = self.run_progress.line()
        if self._printer is not None:
            self._printer.show(line, self.run_progress.snapshot_fraction())
        return line

    def on_batch(self, batch: Mapping[str, Any]) -> list[dg.AssetMaterialization]:
        self.track(batch)
        return []

    def final(self, stats: Any) -> dict[str, Any]:
        return stats.metadata()

    def close(self) -> None:
        if self._printer is not None:
            self._printer.close()


class TopicReporter(Reporter):
    """Pipeline 1: a materialization per commit of each topic written."""

    def __init__(self, defn: PipelineDefinition) -> None:
        super().__init__(defn)
        from changelake.connectors.registry import ConnectorContext, find_factory

        # a sink reporting topics names them (``topic_for``); built unopened, no I/O
        self._namer: Any = find_factory(defn.sink_type).create_sink(defn.options("sink"), ConnectorContext(defn.name))
        from changelake.connectors.kafka_common import KafkaEndOffsets

        self._probe = KafkaEndOffsets.from_options(defn.options("sink"))
        self.offsets: dict[str, int] = {}

    def topic_for(self, table: str) -> str:
        return str(self._namer.topic_for(TableId.parse(table)))

    def on_batch(self, batch: Mapping[str, Any]) -> list[dg.AssetMaterialization]:
        self.track(batch)
        per_topic: dict[str, int] = {}
        for table, n in (batch.get("tables") or {}).items():
            topic = self.topic_for(table)
            per_topic[topic] = per_topic.get(topic, 0) + int(n)
        with self._lock:
            ends = self._probe.end_offsets(per_topic)
        self.offsets.update(ends)
        position = json.dumps(batch.get("position"), sort_keys=True, default=str)
        out = []
        for topic, records in sorted(per_topic.items()):
            offsets = {tp: off for tp, off in ends.items() if tp.rpartition("/")[0] == topic}
            out.append(dg.AssetMaterialization(
                asset_key=topic_asset_key(topic),
                description=f"pipeline {self.defn.name} committed {records} record(s) to topic {topic}",
                metadata=_md({RECORDS: records, OFFSETS: offsets, POSITION: position, PIPELINE: self.defn.name}),
            ))
        return out

    def final(self, stats: Any) -> dict[str, Any]:
        md = stats.metadata()
        md[OFFSETS] = json.dumps(dict(sorted(self.offsets.items())))
        return md

    def close(self) -> None:
        super().close()
        self._probe.close()


class LakeReporter(Reporter):
    """Pipeline 2: per-table progress; the long-running op reports it per commit."""

    def __init__(self, defn: PipelineDefinition, per_commit: bool = True) -> None:
        super().__init__(defn)
        from changelake.pipeline.lake_checks import topics_of_table

        from changelake.connectors.registry import ConnectorContext, find_factory

        lake = find_factory(defn.sink_type).create_sink(defn.options("sink"), ConnectorContext(defn.name))  # unopened
        self.progress = LakeProgress(identifier=lambda t: lake.table_name(TableId.parse(t)),
                                     topics_of=lambda t: topics_of_table(defn, TableId.parse(t)))
        from changelake.connectors.registry import is_partitioned_source

        #: a MySQL -> lake pipeline has one binlog position, no Kafka offsets and no lag in offsets
        self._from_kafka = is_partitioned_source(defn.source_type)
        from changelake.connectors.kafka_common import KafkaEndOffsets

        self._probe = KafkaEndOffsets.from_options(defn.options("source")) if self._from_kafka else None
        self._per_commit = per_commit

    def lag(self, table: str, offsets: Mapping[str, int]) -> int | None:
        """Offsets on the table's topic not yet in ``offsets`` (transaction markers count); None
        when the source is not Kafka."""
        from changelake.pipeline.lake_checks import topics_of_table

        if self._probe is None:
            return None
        with self._lock:
            return lag_of(offsets, self._probe.end_offsets(topics_of_table(self.defn, TableId.parse(table))))

    def current_lag(self) -> int | None:
        """The lag of every table the run has committed to (None from MySQL: no offsets)."""
        if self._probe is None:
            return None
        return sum(self.lag(t, p.offsets) or 0 for t, p in list(self.progress.tables.items()))

    def add(self, batch: Mapping[str, Any]) -> list[TableProgress]:
        """Fold one ``on_batch`` payload in; the changed tables of this batch. From Kafka the
        payload carries the lake's commit results (snapshot ids, offsets); from MySQL it carries the
        events per table and op written with the binlog position (the lake commits them with it)."""
        self.track(batch)
        return self.progress.add(batch) if self._from_kafka else self.progress.add_positioned(batch)

    def on_batch(self, batch: Mapping[str, Any]) -> list[dg.AssetMaterialization]:
        steps = self.add(batch)
        if not self._per_commit:
            return []
        return [
            dg.AssetMaterialization(
                asset_key=lake_asset_key(self.defn, step.table),
                metadata=lake_metadata(step, self.lag(step.table, self.progress.get(step.table).offsets), self.defn.name),
            )
            for step in steps
        ]

    def close(self) -> None:
        super().close()
        if self._probe is not None:
            self._probe.close()


def reporter_for(defn: PipelineDefinition) -> Reporter:
    """The reporter of a pipeline by what its sink type reports (the registry's ``progress``):
    lake tables, topics, or nothing beyond the run's stats."""
    from changelake.connectors.registry import progress_of

    progress = progress_of(defn.sink_type)
    if progress == "tables":
        return LakeReporter(defn)
    if progress == "topics":
        return TopicReporter(defn)
    return Reporter(defn)
