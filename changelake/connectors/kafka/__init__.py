"""The Kafka pipeline connector: Pipeline 1's sink (change events -> topics) and Pipeline 2's source.

Public entry points:

- :class:`KafkaPipelineSink` / :class:`KafkaSinkOptions` (Flink CDC ``sink: {type: kafka}``);
- :class:`KafkaPipelineSource` / :class:`KafkaSourceOptions` / :class:`SourceRecord` (Alibaba's Kafka
  YAML source);
- :class:`KafkaProducer` (the producer every Kafka sink writes with) and :class:`TopicNamer`
  (topic per table). Record keys and values are encoded by :mod:`changelake.formats` (keys:
  :mod:`changelake.formats.json_values`).
"""

from changelake.connectors.kafka.sink import KafkaPipelineSink, KafkaProducer, read_stored_position
from changelake.connectors.kafka.sink_options import (
    DeliveryGuarantee,
    KafkaSinkOptions,
    KeyFormat,
    PartitionStrategy,
    ValueFormat,
)
from changelake.connectors.kafka.source import KafkaPipelineSource, SourceRecord
from changelake.connectors.kafka.source_options import BoundedMode, KafkaSourceOptions, StartupMode
from changelake.connectors.kafka.topics import TopicCreationError, TopicCreator, TopicNamer

__all__ = [
    "BoundedMode",
    "DeliveryGuarantee",
    "KafkaPipelineSink",
    "KafkaPipelineSource",
    "KafkaProducer",
    "KafkaSinkOptions",
    "KafkaSourceOptions",
    "KeyFormat",
    "PartitionStrategy",
    "SourceRecord",
    "StartupMode",
    "TopicCreationError",
    "TopicCreator",
    "TopicNamer",
    "ValueFormat",
    "read_stored_position",
]
