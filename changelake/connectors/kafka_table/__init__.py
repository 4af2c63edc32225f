"""Flink's plain ``kafka`` SQL connector: options, source, sink (changelog mode = the format's).

Example::

    from changelake.connectors.kafka_table import create_sink, create_source
"""

from changelake.connectors.kafka_table.factory import (
    build_formats,
    create_sink,
    create_sink_from_ddl,
    create_source,
)
from changelake.connectors.kafka_table.options import (
    IDENTIFIER,
    DeliveryGuarantee,
    KafkaTableOptions,
    ScanBoundedMode,
    ScanStartupMode,
    SinkPartitioner,
    ValueFieldsInclude,
    parse_options,
)
from changelake.connectors.kafka_table.sink import KafkaTableSink
from changelake.connectors.kafka_table.source import KafkaTableSource

__all__ = [
    "IDENTIFIER",
    "DeliveryGuarantee",
    "KafkaTableOptions",
    "KafkaTableSink",
    "KafkaTableSource",
    "ScanBoundedMode",
    "ScanStartupMode",
    "SinkPartitioner",
    "ValueFieldsInclude",
    "build_formats",
    "create_sink",
    "create_sink_from_ddl",
    "create_source",
    "parse_options",
]
