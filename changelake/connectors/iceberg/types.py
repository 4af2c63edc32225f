"""Type mapping changelake -> Iceberg -> Arrow, and changelake Python values -> Arrow arrays.

=============================  ======================  ==================================
changelake type                Iceberg type            Arrow type (as pyiceberg writes)
=============================  ======================  ==================================
BOOLEAN                        boolean                 bool
TINYINT / SMALLINT / INT       int                     int32
BIGINT                         long                    int64
FLOAT                          float                   float32
DOUBLE                         double                  float64
DECIMAL(p, s), p <= 38         decimal(p, s)           decimal128(p, s)
DECIMAL(p, s), p > 38          string (plain text)     large_string
CHAR / VARCHAR / STRING        string                  large_string
BINARY / VARBINARY / BYTES     binary                  large_binary
DATE                           date                    date32
TIME(p)                        string                  large_string, ``[-]HH:mm:ss[.f]``
TIMESTAMP(p)                   timestamp (µs)          timestamp[us]
TIMESTAMP_LTZ(p)               timestamptz (µs)        timestamp[us, tz=UTC]
=============================  ======================  ==================================

MySQL TIME ranges over -838:59:59..838:59:59, which Iceberg's ``time`` (a time of day) cannot
hold, so it is stored as the text Flink's JSON format writes. BIGINT UNSIGNED arrives as
DECIMAL(20, 0). Fractional seconds beyond microseconds do not exist in MySQL and are truncated.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, Mapping, Sequence

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from changelake.changelog.schema import Schema
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.iceberg.errors import IcebergTypeError

__all__ = [
    "MAX_DECIMAL_PRECISION",
    "to_iceberg_type",
    "to_arrow_type",
    "arrow_type_of_iceberg",
    "format_time",
    "to_arrow_value",
    "to_arrow_array",
    "schema_to_arrow",
    "rows_to_arrow",
]

#: Largest DECIMAL precision Iceberg stores as ``decimal``; wider ones become exact text.
MAX_DECIMAL_PRECISION = 38

_SIMPLE: dict[TypeRoot, PrimitiveType] = {
    TypeRoot.BOOLEAN: BooleanType(),
    TypeRoot.TINYINT: IntegerType(),
    TypeRoot.SMALLINT: IntegerType(),
    TypeRoot.INT: IntegerType(),
    TypeRoot.BIGINT: LongType(),
    TypeRoot.FLOAT: FloatType(),
    TypeRoot.DOUBLE: DoubleType(),
    TypeRoot.CHAR: StringType(),
    TypeRoot.VARCHAR: StringType(),
    TypeRoot.STRING: StringType(),
    TypeRoot.BINARY: BinaryType(),
    TypeRoot.VARBINARY: BinaryType(),
    TypeRoot.BYTES: BinaryType(),
    TypeRoot.DATE: DateType(),
    TypeRoot.TIME: StringType(),
    TypeRoot.TIMESTAMP: TimestampType(),
    TypeRoot.TIMESTAMP_LTZ: TimestamptzType(),
}


def to_iceberg_type(data_type: DataType) -> PrimitiveType:
    """The Iceberg type storing ``data_type`` (see the module table). Nullability is not part of it.

    Raises:
        IcebergTypeError: DECIMAL without a precision.
    """
    if data_type.root is TypeRoot.DECIMAL:
        precision = data_type.precision if data_type.precision is not None else 10
        scale = data_type.scale or 0
        if precision > MAX_DECIMAL_PRECISION:
            return StringType()
        return DecimalType(precision, scale)
    return _SIMPLE[data_type.root]


def to_arrow_type(data_type: DataType) -> pa.DataType:
    """The Arrow type pyiceberg reads and writes for ``data_type``, e.g. ``decimal128(20, 0)``."""
    return arrow_type_of_iceberg(to_iceberg_type(data_type))


def arrow_type_of_iceberg(iceberg_type: IcebergType) -> pa.DataType:
    """The Arrow type pyiceberg uses for an Iceberg primitive type (``string`` -> ``large_string``)."""
    return schema_to_pyarrow(iceberg_type, include_field_ids=False)


def format_time(value: dt.timedelta, precision: int | None = None) -> str:
    """MySQL TIME as Flink's JSON writes it: ``[-]HH:mm:ss[.f]`` (hours may exceed 24).

    Args:
        value: the signed duration since midnight.
        precision: fractional-second digits (0..6). ``None`` prints the microseconds with trailing
            zeros removed, and nothing when they are 0. Digits beyond ``precision`` are truncated.

    Example: ``format_time(timedelta(hours=-838, minutes=-59, seconds=-59)) == "-838:59:59"``.
    """
    total_us = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    seconds, micros = divmod(total_us, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    if precision is None:
        frac = f"{micros:06d}".rstrip("0") if micros else ""
    else:
        frac = f"{micros:06d}"[: max(0, min(precision, 6))]
    return f"{text}.{frac}" if frac else text


def to_arrow_value(value: Any, data_type: DataType) -> Any:
    """Convert one changelake Python value to what ``pa.array`` takes for :func:`to_arrow_type`.

    TIME ``timedelta`` -> text (:func:`format_time`); DECIMAL wider than 38 digits -> plain text;
    everything else is returned unchanged. ``None`` stays ``None``.
    """
    if value is None:
        return None
    if data_type.root is TypeRoot.TIME and isinstance(value, dt.timedelta):
        return format_time(value, data_type.precision)
    if data_type.root is TypeRoot.DECIMAL and isinstance(to_iceberg_type(data_type), StringType):
        return format(value, "f") if isinstance(value, Decimal) else str(value)
    return value


def to_arrow_array(
    values: Sequence[Any],
    data_type: DataType | None,
    arrow_type: pa.DataType,
    *,
    table: str | None = None,
    column: str | None = None,
) -> pa.Array:
    """Build an Arrow array of ``arrow_type`` from changelake Python values of ``data_type``.

    Args:
        values: one Python value per row (``None`` = NULL).
        data_type: the values' changelake type, or ``None`` when the column is absent from the
            incoming schema (then every value must be ``None``).
        arrow_type: the target Arrow type (the lake column's, which may be wider than ``data_type``).
        table, column: named in errors.

    Raises:
        IcebergTypeError: a value does not fit (overflow, DECIMAL scale loss, wrong Python type).
    """
    converted = list(values) if data_type is None else [to_arrow_value(v, data_type) for v in values]
    try:
        return pa.array(converted, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as exc:
        raise IcebergTypeError(
            f"cannot store column {column!r} of table {table!r} as {arrow_type}: {exc}",
            table=table,
            column=column,
        ) from exc


def schema_to_arrow(schema: Schema) -> pa.Schema:
    """The Arrow schema of a changelake schema as the lake stores it (NOT NULL -> non-nullable)."""
    return pa.schema([pa.field(c.name, to_arrow_type(c.type), nullable=c.type.nullable) for c in schema.columns])


def rows_to_arrow(rows: Sequence[Mapping[str, Any]], schema: Schema, *, table: str | None = None) -> pa.Table:
    """Arrow table of ``rows`` (column name -> changelake Python value) typed as the lake stores them.

    Use it on both sides of a comparison (e.g. MySQL rows for :func:`changelake.checks.key_state.compare_key_state`)
    so that TIME, wide DECIMAL and timestamps convert exactly as the sink converts them. Missing
    keys are NULL.

    Raises:
        IcebergTypeError: a value does not fit its column's type.
    """
    arrow_schema = schema_to_arrow(schema)
    arrays = [
        to_arrow_array([r.get(c.name) for r in rows], c.type, arrow_schema.field(c.name).type, table=table, column=c.name)
        for c in schema.columns
    ]
    return pa.Table.from_arrays(arrays, schema=arrow_schema)
