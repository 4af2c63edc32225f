"""The ``kafka`` factory: Pipeline 1's sink (:class:`KafkaPipelineSink`) and Pipeline 2's source
(:class:`KafkaPipelineSource`), as Flink CDC's ``KafkaDataSinkFactory`` and Alibaba's Kafka YAML source.

Validation is the options classes' own (:meth:`KafkaSinkOptions.from_options`,
:meth:`KafkaSourceOptions.from_options`); this module only declares the keys and builds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from changelake.connectors.options import PROPERTIES_PREFIX
from changelake.connectors.kafka.sink_options import (
    BOOTSTRAP_SERVERS,
    IDENTIFIER,
    SINK_OPTIONS,
    KafkaSinkOptions,
)
from changelake.connectors.kafka.source_options import SOURCE_OPTIONS, KafkaSourceOptions
from changelake.connectors.registry import ConnectorContext, ConnectorFactory, Endpoint

if TYPE_CHECKING:
    from changelake.connectors.kafka.sink import KafkaPipelineSink
    from changelake.connectors.kafka.source import KafkaPipelineSource

__all__ = ["FACTORY", "consumer_group"]

_FORMAT_PREFIX = "<value.format>.*"


def consumer_group(pipeline: str) -> str:
    """The consumer group of a pipeline's Kafka source: ``changelake-<pipeline>`` (advisory commits, lag)."""
    return f"changelake-{pipeline}"


def _validate_source(raw: Mapping[str, Any], context: ConnectorContext) -> KafkaSourceOptions:
    return KafkaSourceOptions.from_options(raw)


def _build_source(options: KafkaSourceOptions, context: ConnectorContext) -> "KafkaPipelineSource":
    from changelake.connectors.kafka.source import KafkaPipelineSource

    return KafkaPipelineSource(options, group_id=consumer_group(context.pipeline))


def _validate_sink(raw: Mapping[str, Any], context: ConnectorContext) -> KafkaSinkOptions:
    return KafkaSinkOptions.from_options(raw, context.pipeline)


def _build_sink(options: KafkaSinkOptions, context: ConnectorContext) -> "KafkaPipelineSink":
    from changelake.connectors.kafka.sink import KafkaPipelineSink

    return KafkaPipelineSink(options, context.pipeline)


#: The ``kafka`` factory (registered in :mod:`changelake.connectors.registry`).
FACTORY = ConnectorFactory(
    IDENTIFIER,
    source=Endpoint(
        required=(BOOTSTRAP_SERVERS,),
        optional=(*SOURCE_OPTIONS, PROPERTIES_PREFIX + "*", _FORMAT_PREFIX),
        validate=_validate_source,
        build=_build_source,
        partitioned=True,
        connection="kafka",
    ),
    sink=Endpoint(
        required=(BOOTSTRAP_SERVERS,),
        optional=(*SINK_OPTIONS, PROPERTIES_PREFIX + "*", _FORMAT_PREFIX),
        validate=_validate_sink,
        build=_build_sink,
        connection="kafka",
        progress="topics",
    ),
    description="Change events on Kafka topics (Flink CDC's Kafka pipeline sink; Kafka YAML source).",
)
