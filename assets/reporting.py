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
from changelake.pipeline.progress import LakeProgress, TableProgress, lag_of
from assets.keys import lake_asset_key, topic_asset_key

__all__ = ["Reporter", "TopicReporter", "LakeReporter", "reporter_for", "lake_metadata"]


def _md(values: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key] = dg.MetadataValue.json(value) if isinstance(value, (dict, list)) else value
    return out


def lake_metadata(progress: TableProgress, lag: int | None, pipeline: str) -> dict[str, Any]:
    """Dagster metadata of one lake table's progress (the one vocabulary)."""
    return _md({**progress.metadata(lag), "pipeline": pipeline})


class Reporter:
    """Turns ``on_batch`` payloads into asset materializations, and the run's final stats into
    the op's output metadata. Called from the pipeline's thread (``on_batch``) and, after it
    ended, from the op's (``final``, ``close``)."""

    def __init__(self, defn: PipelineDefinition) -> None:
        self.defn = defn

    def on_batch(self, batch: Mapping[str, Any]) -> list[dg.AssetMaterialization]:
        return []

    def final(self, stats: Any) -> dict[str, Any]:
        return stats.metadata()

    def close(self) -> None:
        pass


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
        per_topic: dict[str, int] = {}
        for table, n in (batch.get("tables") or {}).items():
            topic = self.topic_for(table)
            per_topic[topic] = per_topic.get(topic, 0) + int(n)
        ends = self._probe.end_offsets(per_topic)
        self.offsets.update(ends)
        position = json.dumps(batch.get("position"), sort_keys=True, default=str)
        out = []
        for topic, records in sorted(per_topic.items()):
            offsets = {tp: off for tp, off in ends.items() if tp.rpartition("/")[0] == topic}
            out.append(dg.AssetMaterialization(
                asset_key=topic_asset_key(topic),
                description=f"pipeline {self.defn.name} committed {records} record(s) to topic {topic}",
                metadata=_md({"records": records, "offsets": offsets, "position": position, "pipeline": self.defn.name}),
            ))
        return out

    def final(self, stats: Any) -> dict[str, Any]:
        md = stats.metadata()
        md["offsets"] = json.dumps(dict(sorted(self.offsets.items())))
        return md

    def close(self) -> None:
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
        return lag_of(offsets, self._probe.end_offsets(topics_of_table(self.defn, TableId.parse(table))))

    def add(self, batch: Mapping[str, Any]) -> list[TableProgress]:
        """Fold one ``on_batch`` payload in; the changed tables of this batch. From Kafka the
        payload carries the lake's commit results (snapshot ids, offsets); from MySQL it carries the
        events per table and op written with the binlog position (the lake commits them with it)."""
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
