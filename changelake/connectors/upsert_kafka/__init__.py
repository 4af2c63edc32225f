"""The ``upsert-kafka`` connector: Flink's upsert-kafka source and sink for keyed Kafka topics.

Modules: :mod:`.options` (every option, declared once), :mod:`.ddl` (CREATE TABLE parsing),
:mod:`.factory` (validation and construction), :mod:`.layout` (key/value projections),
:mod:`.partitioner` (Kafka's murmur2), :mod:`.buffer` (ReducingBuffer), :mod:`.sink`,
:mod:`.source`.
"""

from changelake.connectors.upsert_kafka.ddl import TableDeclaration, parse_create_table
from changelake.connectors.upsert_kafka.factory import IDENTIFIER, create_sink, create_source, validate_options
from changelake.connectors.upsert_kafka.options import OPTIONS, UpsertKafkaOptions
from changelake.connectors.upsert_kafka.partitioner import murmur2, partition_for

__all__ = [
    "IDENTIFIER",
    "OPTIONS",
    "TableDeclaration",
    "UpsertKafkaOptions",
    "create_sink",
    "create_source",
    "murmur2",
    "parse_create_table",
    "partition_for",
    "validate_options",
]
