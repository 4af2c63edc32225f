"""The lake side of a Kafka -> lake pipeline seen from outside a run: open its lake sink, read and
write its offsets checkpoint, and its lag behind Kafka (for sensors, checks and tests)."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from changelake.connectors.base import LakeSink
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.registry import ConnectorContext, find_factory
from changelake.pipeline.definition import PipelineDefinition

__all__ = [
    "CHECKPOINT_NAMESPACE",
    "read_checkpoint",
    "write_checkpoint",
    "open_lake_sink",
    "read_lake_checkpoint",
    "write_lake_checkpoint",
    "kafka_lag",
]

#: Catalog namespace whose properties hold an Iceberg lake's pipeline checkpoints.
CHECKPOINT_NAMESPACE = "changelake"


def read_checkpoint(catalog: Any, pipeline: str) -> dict[str, int]:
    """Offsets every Iceberg table of ``pipeline`` had absorbed at the last completed batch: the
    property ``pipeline.<name>.kafka-offsets`` of the catalog namespace ``changelake``; ``{}`` on
    the first run."""
    from changelake.connectors.iceberg.writer import IcebergSink, read_namespace_property

    raw = read_namespace_property(catalog, IcebergSink.CHECKPOINT_KEY.format(pipeline=pipeline))
    return {k: int(v) for k, v in json.loads(raw).items()} if raw else {}


def write_checkpoint(catalog: Any, pipeline: str, offsets: Mapping[str, int]) -> None:
    """Store ``offsets`` as the pipeline checkpoint of an Iceberg lake (see :func:`read_checkpoint`)."""
    from changelake.connectors.iceberg.writer import IcebergSink, write_namespace_property

    key = IcebergSink.CHECKPOINT_KEY.format(pipeline=pipeline)
    write_namespace_property(catalog, key, json.dumps(dict(offsets), sort_keys=True))


def open_lake_sink(defn: PipelineDefinition) -> Any:
    """The open lake sink of a pipeline, built by the registry from ``sink.type`` (``iceberg``:
    IcebergSink, ``paimon``: PaimonSink).

    Raises:
        OptionValidationError: the sink is not a lake sink, or invalid options.
    """
    sink = find_factory(defn.sink_type).create_sink(defn.options("sink"), ConnectorContext(defn.name))
    if not isinstance(sink, LakeSink):
        raise OptionValidationError(f"pipeline '{defn.name}': sink type '{defn.sink_type}' is not a lake sink",
                                    option="type")
    sink.open()
    return sink


def read_lake_checkpoint(sink: Any, pipeline: str) -> dict[str, int]:
    """The offsets checkpoint of ``pipeline`` kept by the open lake sink ``sink``; ``{}`` at first."""
    return dict(sink.read_checkpoint(pipeline))


def write_lake_checkpoint(sink: Any, pipeline: str, offsets: Mapping[str, int], *, merge: bool = False) -> None:
    """Store the checkpoint where :func:`read_lake_checkpoint` finds it; with ``merge`` (a parallel
    worker) as one entry per partition, each written on its own (the read takes the larger)."""
    if merge:
        sink.write_checkpoint_entries(pipeline, offsets)
    else:
        sink.write_checkpoint(pipeline, offsets)


def kafka_lag(defn: PipelineDefinition, timeout_s: float = 10.0) -> dict[str, tuple[int, int]]:
    """Per ``topic/partition`` of a Kafka -> lake pipeline: (the lake checkpoint, Kafka's end
    offset). Their difference is the lag in offsets (transaction markers count as offsets). The
    topics are the source's ``topic`` list, or those its ``topic-pattern`` matches now."""
    from confluent_kafka import Consumer

    from changelake.connectors.kafka_common import client_properties, watermarks, with_logger

    sink = open_lake_sink(defn)
    try:
        checkpoint = read_lake_checkpoint(sink, defn.name)
    finally:
        sink.close()
    opts = defn.options("source")
    conf: dict[str, Any] = dict(client_properties(opts))
    conf.update({"group.id": f"changelake-lag-{defn.name}", "enable.auto.commit": False})
    consumer = Consumer(with_logger(conf))
    lag: dict[str, tuple[int, int]] = {}
    try:
        pattern = opts.get("topic-pattern")
        if pattern:  # the topics the source matches now (as the Kafka source: the whole name)
            regex = re.compile(pattern)
            topics = sorted(t for t in consumer.list_topics(timeout=timeout_s).topics if regex.fullmatch(t))
        else:
            topics = [t for t in opts.get("topic", "").split(";") if t]
        for topic in topics:
            for partition, (low, high) in watermarks(consumer, topic, timeout_s).items():
                done = checkpoint.get(f"{topic}/{partition}", low)
                lag[f"{topic}/{partition}"] = (done, high)
    finally:
        consumer.close()
    return lag
