"""Record keys of Flink CDC's Kafka pipeline sink: the TableId, then the primary key, as JSON or CSV.

Byte-exact with Flink CDC's key serializers (``serialization/JsonSerializationSchema`` /
``CsvSerializationSchema`` of flink-cdc-pipeline-connector-kafka), which write the TableId first,
then the primary-key columns in key order, taken from the before-image for a delete and the
after-image otherwise:

- ``json``: compact JSON ``{"TableId":"kafka_test.customers","id":4}`` (UTF-8, no spaces);
- ``csv``: the same fields as one CSV line ``kafka_test.customers,4`` (``,`` delimiter, ``"`` quote
  only when needed, null as the empty field).

A table without a primary key gets ``{"TableId":"db.t"}``, so hash-by-key puts the whole table in
one partition. Column values are written as the value formats write them (Flink's JSON
converters, :mod:`changelake.formats.json_values`: DECIMAL a plain number, TIMESTAMP
``yyyy-MM-dd HH:mm:ss[.fff]``...), so murmur2 partitioning agrees with Flink's for the same rows.

Example::

    encode_event_key(event)                  # b'{"TableId":"kafka_test.customers","id":4}'
    encode_event_key(event, KeyFormat.CSV)   # b'kafka_test.customers,4'
"""

from __future__ import annotations

import csv
import enum
import io
from typing import Any, Callable, Mapping

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema
from changelake.formats import json_values

__all__ = ["KeyFormat", "key_fields", "encode_table_key", "table_key_encoder", "encode_event_key"]


class KeyFormat(enum.Enum):
    """``key.format`` of the Kafka pipeline sink (Flink CDC's ``KeyFormat``)."""

    JSON = "json"  #: ``{"TableId":…, <pk>…}`` as compact JSON
    CSV = "csv"  #: the same fields as one CSV line


def key_fields(table_text: str, schema: Schema | None, row: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """``[("TableId", table_text), (pk column, JSON-ready value)...]`` of one row image.

    Raises:
        EncodeError: a key value does not fit its column type (names the column).
    """
    fields: list[tuple[str, Any]] = [("TableId", table_text)]
    if schema is None or not schema.primary_key or row is None:
        return fields
    for name, encode in _key_encoders(schema):
        fields.append((name, encode(row.get(name))))
    return fields


#: id(schema) -> (schema, encoders); the schema is held, so its id is not reused while cached
_KEY_ENCODERS: dict[int, tuple[Schema, list[tuple[str, Callable[[Any], Any]]]]] = {}


def _key_encoders(schema: Schema) -> list[tuple[str, Callable[[Any], Any]]]:
    """(pk column, converter) in key order; the converters equal ``to_json_value`` for the
    column's type (``json_encoder_for``), built once per schema object."""
    hit = _KEY_ENCODERS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_KEY_ENCODERS) >= 1024:
        _KEY_ENCODERS.clear()
    encoders = [(name, json_values.json_encoder_for(schema.column(name).type, name)) for name in schema.primary_key]
    _KEY_ENCODERS[id(schema)] = (schema, encoders)
    return encoders


def _compact(obj: Any) -> str:
    return json_values.dumps(obj).decode("utf-8")


def encode_table_key(table_text: str, schema: Schema | None, row: Mapping[str, Any] | None,
                     key_format: KeyFormat = KeyFormat.JSON) -> bytes:
    """Key bytes of one row image of table ``table_text`` (``db.table``; see the module docstring).

    ``row`` None (a truncate) or a schema without primary key gives the TableId alone. The json
    key is written by orjson (compiled) where that gives :func:`json_values.dumps`' exact bytes
    (:func:`json_values.dumps_envelope`), else by ``dumps``.
    Raises EncodeError for a key value that does not fit its column type.
    """
    fields = key_fields(table_text, schema, row)
    if key_format is KeyFormat.JSON:
        obj = dict(fields)
        return json_values.dumps_envelope(obj, (obj,))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(["" if v is None else v if isinstance(v, str) else _compact(v) for _, v in fields])
    return buf.getvalue().encode("utf-8")


def table_key_encoder(table_text: str, schema: Schema | None,
                      key_format: KeyFormat = KeyFormat.JSON) -> Callable[[Mapping[str, Any] | None], bytes]:
    """``lambda row: encode_table_key(table_text, schema, row, key_format)`` with the per-table
    work done once, for the many rows of one table: the same bytes and the same EncodeError.

    A json key of one integer primary-key column (the common case) is the fixed text
    ``{"TableId":"<table>","<pk>":`` followed by the integer, as :func:`json_values.dumps` and
    orjson both write an ``int``; any other value goes through :func:`encode_table_key`'s path.
    """
    if key_format is not KeyFormat.JSON or schema is None or not schema.primary_key:
        return lambda row: encode_table_key(table_text, schema, row, key_format)
    encoders = _key_encoders(schema)
    dumps_envelope = json_values.dumps_envelope

    def general(row: Mapping[str, Any] | None) -> bytes:
        if row is None:
            return encode_table_key(table_text, schema, row, key_format)
        obj: dict[str, Any] = {"TableId": table_text}
        for name, encode in encoders:
            obj[name] = encode(row.get(name))
        return dumps_envelope(obj, (obj,))

    if len(encoders) != 1:
        return general
    (pk, encode_pk), = encoders
    if not schema.column(pk).type.is_integer:
        return general
    sample = general({pk: 0})
    if not sample.endswith(b":0}"):
        return general
    prefix = sample[:-2]  # b'{"TableId":"<table>","<pk>":'

    def one_int(row: Mapping[str, Any] | None) -> bytes:
        if row is None:
            return general(row)
        value = encode_pk(row.get(pk))
        if type(value) is int:
            return prefix + int.__repr__(value).encode("ascii") + b"}"
        obj = {"TableId": table_text, pk: value}
        return dumps_envelope(obj, (obj,))

    return one_int


def encode_event_key(event: DataChangeEvent, key_format: KeyFormat = KeyFormat.JSON,
                     table_text: str | None = None) -> bytes:
    """Key bytes of a change event: the before-image for a delete, the after-image otherwise.

    Args:
        event: the event; ``event.schema.primary_key`` names the key columns (none: TableId only).
        key_format: json (default) or csv.
        table_text: the ``TableId`` text; default ``str(event.table)`` (the routed table).
    """
    row = event.before if event.op is Op.DELETE else event.after
    return encode_table_key(table_text or str(event.table), event.schema, row, key_format)
