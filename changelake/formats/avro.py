"""The ``avro`` format: one row <-> one schemaless Avro binary record (Flink's ``avro``).

The Avro schema is derived from the table schema as Flink's ``AvroSchemaConverter`` derives it
(see :func:`avro_schema_for`); fastavro writes and reads the binary encoding. Values are converted
to Avro's physical types here (so MySQL TIME beyond 24 h or negative survives, and DECIMAL never
passes through float):

=======================  =====================================================================
type                     Avro
=======================  =====================================================================
BOOLEAN                  boolean
TINYINT/SMALLINT/INT     int
BIGINT                   long
FLOAT / DOUBLE           float / double
DECIMAL(p, s)            bytes, logicalType decimal (two's-complement big-endian unscaled value)
CHAR/VARCHAR/STRING      string
BINARY/VARBINARY/BYTES   bytes
DATE                     int, logicalType date (days since 1970-01-01)
TIME(p)                  int time-millis (p <= 3, as Flink; |value| < 596 h) / long time-micros
                         (p > 3); signed, may exceed 24 h (MySQL's +-838:59:59 needs p > 3)
TIMESTAMP(p)             long timestamp-millis/-micros (Flink's legacy mapping, the default) or
                         local-timestamp-millis/-micros (``timestamp_mapping.legacy=false``);
                         the wall clock counted as if it were UTC
TIMESTAMP_LTZ(p)         long timestamp-millis (p <= 3) / timestamp-micros (p > 3), UTC instant
nullable columns         union ["null", T] with default null
=======================  =====================================================================

Every decoded row is ``+I``.
"""

from __future__ import annotations

import copy
import datetime as dt
import io
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping

import fastavro

from changelake.changelog.decimals import from_unscaled
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import INSERT_ONLY, RowKind
from changelake.changelog.schema import Schema
from changelake.changelog.types import DataType, TypeRoot
from changelake.formats.base import Format
from changelake.formats.errors import DecodeError, EncodeError, FormatOptionError, FormatSchemaError
from changelake.formats.json_values import _decimal
from changelake.options import key, option_field

__all__ = ["AvroFormat", "AvroOptions", "avro_schema_for", "AvroCodec"]

RECORD_NAME = "record"
RECORD_NAMESPACE = "org.apache.flink.avro.generated"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DATE = dt.date(1970, 1, 1)


@dataclass(frozen=True)
class AvroOptions:
    """Options of the ``avro`` format (Flink's ``AvroFormatOptions``)."""

    timestamp_mapping_legacy: bool = option_field(
        key("timestamp_mapping.legacy").bool_type().default_value(True)
        .with_description("true: TIMESTAMP -> timestamp-millis/micros (Flink's default); false: local-timestamp-millis/micros.")
    )
    encoding: str = option_field(
        key("encoding").string_type().default_value("binary")
        .with_description("Avro encoding; only 'binary' is supported.")
    )


def _millis(dtype: DataType) -> bool:
    default = 0 if dtype.root is TypeRoot.TIME else 6
    return (dtype.precision if dtype.precision is not None else default) <= 3


def _avro_type(dtype: DataType, *, legacy: bool, logical: bool = True) -> Any:
    root = dtype.root
    t: Any
    if root is TypeRoot.BOOLEAN:
        t = "boolean"
    elif root in (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT):
        t = "int"
    elif root is TypeRoot.BIGINT:
        t = "long"
    elif root is TypeRoot.FLOAT:
        t = "float"
    elif root is TypeRoot.DOUBLE:
        t = "double"
    elif root is TypeRoot.DECIMAL:
        t = {"type": "bytes", "logicalType": "decimal", "precision": dtype.precision or 10, "scale": dtype.scale or 0}
    elif dtype.is_string:
        t = "string"
    elif dtype.is_binary:
        t = "bytes"
    elif root is TypeRoot.DATE:
        t = {"type": "int", "logicalType": "date"}
    elif root is TypeRoot.TIME:
        t = {"type": "int", "logicalType": "time-millis"} if _millis(dtype) else {"type": "long", "logicalType": "time-micros"}
    elif root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        unit = "millis" if _millis(dtype) else "micros"
        local = "local-" if root is TypeRoot.TIMESTAMP and not legacy else ""
        t = {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    else:  # pragma: no cover - every TypeRoot is handled above
        raise FormatSchemaError(f"no Avro type for {dtype}", format="avro")
    if not logical and isinstance(t, dict):
        t = t["type"]
    return ["null", t] if dtype.nullable else t


def avro_schema_for(schema: Schema, *, legacy_timestamp_mapping: bool = True, logical: bool = True) -> dict[str, Any]:
    """The Avro record schema of a table schema, as Flink's ``AvroSchemaConverter.convertToSchema``.

    Returns a JSON-able dict ``{"type": "record", "name": "record", "namespace":
    "org.apache.flink.avro.generated", "fields": [...]}``; ``logical=False`` drops the logical
    types (the physical schema, same binary encoding).

    Raises:
        FormatSchemaError: a column name is not a valid Avro name.
    """
    fields = []
    for col in schema.columns:
        if not _NAME_RE.match(col.name):
            raise FormatSchemaError(
                f"column name {col.name!r} is not a valid Avro name ([A-Za-z_][A-Za-z0-9_]*)", format="avro"
            )
        f: dict[str, Any] = {"name": col.name, "type": _avro_type(col.type, legacy=legacy_timestamp_mapping, logical=logical)}
        if col.type.nullable:
            f["default"] = None
        fields.append(f)
    return {"type": "record", "name": RECORD_NAME, "namespace": RECORD_NAMESPACE, "fields": fields}


def strip_logical_types(avro_schema: Any) -> Any:
    """A copy of an Avro schema without ``logicalType`` annotations (the physical schema)."""
    if isinstance(avro_schema, list):
        return [strip_logical_types(s) for s in avro_schema]
    if isinstance(avro_schema, dict):
        out = {k: strip_logical_types(v) for k, v in avro_schema.items() if k not in ("logicalType", "precision", "scale")}
        if "logicalType" in avro_schema and set(out) == {"type"} and isinstance(out["type"], str):
            return out["type"]
        return out
    return copy.copy(avro_schema)


# -- value conversion ------------------------------------------------------------------------------
def _unscaled_bytes(value: Decimal) -> bytes:
    sign, digits, _ = value.as_tuple()
    n = int("".join(map(str, digits)) or "0")
    n = -n if sign else n
    return n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)


def _us(delta: dt.timedelta) -> int:
    return delta // dt.timedelta(microseconds=1)


def to_avro_value(value: Any, dtype: DataType, field: str, format: str = "avro") -> Any:
    """Physical Avro value of a changelog value. Raises EncodeError naming the field."""
    if value is None:
        return None
    root = dtype.root
    try:
        if root is TypeRoot.DECIMAL:
            return _unscaled_bytes(_decimal(value, dtype))
        if root is TypeRoot.DATE and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return (value - _EPOCH_DATE).days
        if root is TypeRoot.TIME and isinstance(value, (dt.timedelta, dt.time)):
            if isinstance(value, dt.time):
                value = dt.timedelta(hours=value.hour, minutes=value.minute, seconds=value.second, microseconds=value.microsecond)
            us = _us(value)
            if not _millis(dtype):
                return us
            if not -(2**31) <= us // 1000 < 2**31:
                raise ValueError(
                    "does not fit Avro time-millis (int32 ms, about +-596 h); "
                    "declare the column TIME(4..6) to write time-micros"
                )
            return us // 1000
        if root is TypeRoot.TIMESTAMP and isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                raise ValueError("a TIMESTAMP value must be a naive (wall-clock) datetime")
            us = _us(value - _EPOCH)
            return us // 1000 if _millis(dtype) else us
        if root is TypeRoot.TIMESTAMP_LTZ and isinstance(value, dt.datetime):
            if value.tzinfo is None:
                raise ValueError("a TIMESTAMP_LTZ value must be an aware datetime (UTC)")
            us = _us(value - _EPOCH_UTC)
            return us // 1000 if _millis(dtype) else us
        if root is TypeRoot.BOOLEAN and isinstance(value, bool):
            return value
        if dtype.is_integer and isinstance(value, int) and not isinstance(value, bool):
            return value
        if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE) and isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return float(value)
        if dtype.is_string and isinstance(value, str):
            return value
        if dtype.is_binary and isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise EncodeError(f"{exc} (type {dtype})", format=format, field=field, value=value) from exc
    raise EncodeError(f"a {type(value).__name__} value does not suit type {dtype}", format=format, field=field, value=value)


def from_avro_value(value: Any, dtype: DataType, field: str, format: str = "avro") -> Any:
    """Changelog value of a physical Avro value. Raises DecodeError naming the field."""
    if value is None:
        return None
    root = dtype.root
    try:
        if root is TypeRoot.DECIMAL:
            if isinstance(value, Decimal):
                return _decimal(value, dtype)
            return from_unscaled(int.from_bytes(value, "big", signed=True), dtype.scale or 0)
        if root is TypeRoot.DATE:
            return value if isinstance(value, dt.date) else _EPOCH_DATE + dt.timedelta(days=value)
        if root is TypeRoot.TIME:
            return dt.timedelta(milliseconds=value) if _millis(dtype) else dt.timedelta(microseconds=value)
        if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
            delta = dt.timedelta(milliseconds=value) if _millis(dtype) else dt.timedelta(microseconds=value)
            return (_EPOCH + delta) if root is TypeRoot.TIMESTAMP else (_EPOCH_UTC + delta)
        if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
            return float(value)
        if dtype.is_binary:
            return bytes(value)
        return value
    except (ValueError, TypeError, OverflowError, ArithmeticError) as exc:
        raise DecodeError(f"cannot read Avro value as {dtype}: {exc}", format=format, field=field) from exc


class AvroCodec:
    """Schemaless Avro binary encoding of rows of one table schema (shared by avro and avro-confluent).

    Args:
        schema: the table schema.
        legacy_timestamp_mapping: Flink's ``avro.timestamp_mapping.legacy`` (default true).
        format: format name for error messages.
    """

    def __init__(self, schema: Schema, *, legacy_timestamp_mapping: bool = True, format: str = "avro") -> None:
        self.table_schema = schema
        self.format = format
        self.avro_schema = avro_schema_for(schema, legacy_timestamp_mapping=legacy_timestamp_mapping)
        self._physical = fastavro.parse_schema(strip_logical_types(self.avro_schema))

    def encode_values(self, values: Mapping[str, Any]) -> bytes:
        record = {c.name: to_avro_value(values.get(c.name), c.type, c.name, self.format) for c in self.table_schema.columns}
        buf = io.BytesIO()
        try:
            fastavro.schemaless_writer(buf, self._physical, record)
        except (ValueError, TypeError, OverflowError) as exc:
            raise EncodeError(str(exc), format=self.format) from exc
        return buf.getvalue()

    def decode_values(self, body: bytes, writer_schema: Any = None, *, excerpt: bytes | None = None) -> dict[str, Any]:
        """Values of one record; ``writer_schema`` (an Avro schema) when it differs from ours (schema
        resolution as Avro's). Raises DecodeError."""
        writer = self._physical if writer_schema is None else fastavro.parse_schema(strip_logical_types(writer_schema))
        buf = io.BytesIO(body)
        try:
            record = fastavro.schemaless_reader(buf, writer, self._physical)
        except Exception as exc:  # fastavro raises EOFError, ValueError, SchemaResolutionError, ...
            raise DecodeError(f"malformed Avro record: {exc!r}", format=self.format, excerpt=excerpt or body) from exc
        if buf.tell() != len(body):
            raise DecodeError(
                f"{len(body) - buf.tell()} trailing bytes after the Avro record", format=self.format, excerpt=excerpt or body
            )
        assert isinstance(record, dict)
        out = {}
        for col in self.table_schema.columns:
            try:
                out[col.name] = from_avro_value(record.get(col.name), col.type, col.name, self.format)
            except DecodeError as exc:
                raise DecodeError(exc.reason, format=self.format, field=col.name, excerpt=excerpt or body) from exc
        return out


class AvroFormat(Format):
    """Flink's ``avro`` format (insert-only, needs a schema). See the module docstring."""

    name = "avro"
    changelog_mode = INSERT_ONLY
    Options = AvroOptions
    options: AvroOptions

    def _validate(self) -> None:
        assert self.schema is not None
        if self.options.encoding != "binary":
            raise FormatOptionError(
                f"Unsupported value '{self.options.encoding}' for encoding. Supported values are [binary].",
                format=self.name,
                option="encoding",
            )
        self.codec = AvroCodec(self.schema, legacy_timestamp_mapping=self.options.timestamp_mapping_legacy)

    def encode(self, row: ChangelogRow) -> bytes:
        """The row as one schemaless Avro binary record. Raises EncodeError."""
        return self.codec.encode_values(row.values)

    def decode(self, data: bytes | None) -> list[ChangelogRow]:
        """One ``+I`` row ([] for a null/empty message). Raises DecodeError."""
        if not data:
            return []
        return [ChangelogRow(RowKind.INSERT, self.codec.decode_values(data))]
