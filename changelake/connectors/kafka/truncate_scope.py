"""A TRUNCATE on a ``hash-by-key`` topic: one ordered event per table, whatever the partitioning.

Pipeline 1 writes a truncate into every partition of the table's topic, because the table's keys
are spread over all of them (:meth:`KafkaPipelineSink._truncate_records`). If Pipeline 2 applied
each copy to the whole lake table, the copy read last would delete the rows written after the
truncate in the partitions read first (Debezium DBZ-8455). So each copy carries, in headers, how
many partitions the topic had and the key format::

    changelake.truncate.partitions: 3
    changelake.truncate.key-format: json

and the copy read from partition ``p`` stands for "delete every row whose Kafka key murmur2 places
in ``p``" (:class:`TruncateScope`): those rows were written through ``p`` and nowhere else, so the
copy is ordered with exactly the rows it must delete and the rows it must keep. Each Pipeline 2
worker applies the copies of its own partitions; together they delete every row once.

A truncate without the headers (one partition, ``all-to-zero``, a foreign topic) deletes every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from changelake.changelog.schema import Schema
from changelake.connectors.upsert_kafka.partitioner import partition_for
from changelake.formats.json_values import KeyFormat, encode_table_key

__all__ = ["PARTITIONS_HEADER", "KEY_FORMAT_HEADER", "SCHEMA_CHANGE_HEADER", "TruncateScope", "truncate_scope_headers",
           "scope_of", "schema_change_of"]

PARTITIONS_HEADER = "changelake.truncate.partitions"
KEY_FORMAT_HEADER = "changelake.truncate.key-format"
#: on a truncate record that stands for a ``DROP TABLE``: ``drop.table`` (Flink CDC's event type
#: name); the payload stays the format's truncate, so Flink's readers see a truncate.
SCHEMA_CHANGE_HEADER = "changelake.schema-change"


def schema_change_of(headers: list[tuple[str, bytes]]) -> str | None:
    """The ``changelake.schema-change`` header of a record, None without it."""
    for k, v in headers:
        if k == SCHEMA_CHANGE_HEADER and v is not None:
            return bytes(v).decode("utf-8")
    return None


def truncate_scope_headers(partitions: int, key_format: KeyFormat) -> list[tuple[str, bytes]]:
    """The headers of a truncate copy written to each of ``partitions`` partitions."""
    return [(PARTITIONS_HEADER, str(partitions).encode("ascii")), (KEY_FORMAT_HEADER, key_format.value.encode("ascii"))]


@dataclass(frozen=True)
class TruncateScope:
    """The share of a table one truncate copy deletes: rows whose key hashes to ``partition``.

    Attributes:
        table: the source TableId text the keys were written with (``"db.t"``).
        schema: the source table's schema (primary key and types the key was encoded with); None
            when the record named none (the lake sink then uses the table's last known schema).
        partition: the partition the copy was read from.
        partitions: the topic's partition count when the copy was written.
        key_format: Pipeline 1's ``key.format``.
    """

    table: str
    schema: Schema | None
    partition: int
    partitions: int
    key_format: KeyFormat

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The source primary-key columns the Kafka key holds."""
        return tuple(self.schema.primary_key) if self.schema is not None else ()

    def covers(self, row: Mapping[str, Any]) -> bool:
        """True when Pipeline 1 wrote the row (its key columns in ``row``) to :attr:`partition`."""
        key = encode_table_key(self.table, self.schema, row, self.key_format)
        return partition_for(key, self.partitions) == self.partition


def scope_of(headers: list[tuple[str, bytes]], table: str, schema: Schema | None, partition: int) -> TruncateScope | None:
    """The scope of a truncate record read from ``partition`` (None: it covers every row).

    Raises:
        ValueError: a header is present but unreadable (the caller names topic/partition/offset).
    """
    found = {k: v for k, v in headers if k in (PARTITIONS_HEADER, KEY_FORMAT_HEADER)}
    raw = found.get(PARTITIONS_HEADER)
    if raw is None:
        return None
    partitions = int(bytes(raw).decode("ascii"))
    if partitions <= 1:
        return None
    key_format = KeyFormat(bytes(found.get(KEY_FORMAT_HEADER, b"json")).decode("ascii"))
    return TruncateScope(table, schema, partition, partitions, key_format)
