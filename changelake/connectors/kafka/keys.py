"""Record keys of the Kafka pipeline sink, byte-exact with Flink CDC.

Flink CDC's key serializers (``serialization/JsonSerializationSchema``/``CsvSerializationSchema``)
write the TableId first, then the primary-key columns in key order, taken from the before-image
for a delete and the after-image otherwise:

- ``json``: compact JSON ``{"TableId":"kafka_test.customers","id":4}`` (UTF-8, no spaces);
- ``csv``: the same fields as one CSV line ``kafka_test.customers,4``.

A table without a primary key gets ``{"TableId":"db.t"}``, so hash-by-key puts the whole table in one
partition. Column values are encoded as the value formats encode them (Flink's JSON converters:
DECIMAL a plain number, DATETIME ``yyyy-MM-dd HH:mm:ss``…), so that murmur2 partitioning agrees
with Flink's for the same rows.
"""

from __future__ import annotations

import csv
import io
from typing import Any, Mapping

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema
from changelake.connectors.kafka._formats import json_compact, to_json_value
from changelake.connectors.kafka.sink_options import KeyFormat

__all__ = ["key_fields", "encode_key", "encode_key_for_row"]


def key_fields(table_text: str, schema: Schema | None, row: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """``[("TableId", table_text), (pk, json value)…]`` for ``row`` (values JSON-ready)."""
    fields: list[tuple[str, Any]] = [("TableId", table_text)]
    if schema is None or not schema.primary_key or row is None:
        return fields
    for name in schema.primary_key:
        fields.append((name, to_json_value(row.get(name), schema.column(name).type, name)))
    return fields


def encode_key_for_row(table_text: str, schema: Schema | None, row: Mapping[str, Any] | None,
                       key_format: KeyFormat = KeyFormat.JSON) -> bytes:
    """Key bytes for one row image of a table (see module docstring)."""
    fields = key_fields(table_text, schema, row)
    if key_format is KeyFormat.JSON:
        return json_compact(dict(fields)).encode("utf-8")
    # Flink's CSV writer: ',' delimiter, '"' quote only when needed, null as the empty field.
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(["" if v is None else v if isinstance(v, str) else json_compact(v) for _, v in fields])
    return buf.getvalue().encode("utf-8")


def encode_key(event: DataChangeEvent, key_format: KeyFormat = KeyFormat.JSON, table_text: str | None = None) -> bytes:
    """Key bytes of a change event: before-image for deletes, after-image otherwise.

    Args:
        event: the event; its ``schema.primary_key`` names the key columns (none -> TableId only).
        key_format: json (default) or csv.
        table_text: the ``TableId`` text; default ``str(event.table)``.

    Example::

        >>> encode_key(event_for_customer_4)
        b'{"TableId":"kafka_test.customers","id":4}'
    """
    row = event.before if event.op is Op.DELETE else event.after
    return encode_key_for_row(table_text or str(event.table), event.schema, row, key_format)
