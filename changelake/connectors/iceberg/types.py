"""Type mapping changelake -> Iceberg; the Arrow side is the lake family's one mapping,
:mod:`changelake.connectors.lake.arrow`, in pyiceberg's layout (:data:`~changelake.connectors.lake.arrow.ICEBERG`).

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
``tests/unit/connectors/iceberg/test_iceberg_types.py`` checks that pyiceberg's own Arrow
conversion of :func:`to_iceberg_type` agrees with :func:`to_arrow_type`.
"""

from __future__ import annotations

from functools import partial

from typing import Any, Mapping, Sequence

import pyarrow as pa
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
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
from changelake.connectors.lake import arrow
from changelake.connectors.lake.arrow import MAX_DECIMAL_PRECISION, decimal_precision_scale, format_time, to_arrow_value

__all__ = [
    "MAX_DECIMAL_PRECISION",
    "to_iceberg_type",
    "to_arrow_type",
    "format_time",
    "to_arrow_value",
    "to_arrow_array",
    "schema_to_arrow",
    "rows_to_arrow",
]

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
    """The Iceberg type storing ``data_type`` (see the module table). Nullability is not part of it."""
    if data_type.root is TypeRoot.DECIMAL:
        if arrow.is_text_decimal(data_type):
            return StringType()
        return DecimalType(*decimal_precision_scale(data_type))
    return _SIMPLE[data_type.root]


def to_arrow_type(data_type: DataType) -> pa.DataType:
    """The Arrow type pyiceberg reads and writes for ``data_type``, e.g. ``decimal128(20, 0)``."""
    return arrow.to_arrow_type(data_type, arrow.ICEBERG)


#: :func:`changelake.connectors.lake.arrow.to_arrow_array` raising IcebergTypeError (a value does not fit:
#: overflow, DECIMAL scale loss, wrong Python type; names table and column).
to_arrow_array = partial(arrow.to_arrow_array, error=IcebergTypeError)


def schema_to_arrow(schema: Schema) -> pa.Schema:
    """The Arrow schema of a changelake schema as Iceberg stores it (NOT NULL -> non-nullable)."""
    return arrow.schema_to_arrow(schema, arrow.ICEBERG)


def rows_to_arrow(rows: Sequence[Mapping[str, Any]], schema: Schema, *, table: str | None = None) -> pa.Table:
    """:func:`changelake.connectors.lake.arrow.rows_to_arrow` in pyiceberg's layout."""
    return arrow.rows_to_arrow(rows, schema, table=table, layout=arrow.ICEBERG)
