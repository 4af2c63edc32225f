"""The lake family's Arrow types, written from the engine's own :class:`~changelake.changelog.types.DataType`.

One mapping for every lake sink (``iceberg``, ``paimon``) and for the key-state check, which
converts MySQL's rows with it so both sides of a comparison hold the values the sinks store:

=============================  ==================================  ===============================
changelake type                Arrow type                          value stored
=============================  ==================================  ===============================
BOOLEAN                        bool
TINYINT / SMALLINT             int32 (``narrow_ints``: int8/int16)
INT / BIGINT                   int32 / int64
FLOAT / DOUBLE                 float32 / float64
DECIMAL(p, s), p <= 38         decimal128(p, s)
DECIMAL(p, s), p > 38          text                                plain text, exact
CHAR / VARCHAR / STRING        text
BINARY / VARBINARY / BYTES     binary
DATE                           date32
TIME(p)                        text                                ``[-]HH:mm:ss[.f]``
TIMESTAMP(p)                   timestamp[us]
TIMESTAMP_LTZ(p)               timestamp[us, tz=UTC]
=============================  ==================================  ===============================

"text" and "binary" are ``large_string``/``large_binary`` in the :data:`ICEBERG` layout (as
pyiceberg reads and writes them) and ``string``/``binary`` in :data:`PAIMON`'s (as pypaimon does);
a lake whose Arrow layout differs declares its own :class:`ArrowLayout`.

MySQL TIME ranges over -838:59:59..838:59:59, which neither lake's time-of-day type can hold, so
it is stored as the text Flink's JSON format writes (:func:`changelake.formats.json_values.format_time`).
BIGINT UNSIGNED arrives as DECIMAL(20, 0). Fractional seconds beyond microseconds do not exist in
MySQL and are truncated.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from changelake.changelog.schema import Schema
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.lake.errors import LakeSinkError
from changelake.formats.json_values import format_time

__all__ = [
    "MAX_DECIMAL_PRECISION",
    "ArrowLayout",
    "ICEBERG",
    "PAIMON",
    "is_text_decimal",
    "decimal_precision_scale",
    "to_arrow_type",
    "to_arrow_value",
    "to_arrow_array",
    "schema_to_arrow",
    "rows_to_arrow",
    "format_time",
]

#: Largest DECIMAL precision the lakes store as ``decimal``; wider ones become exact text.
MAX_DECIMAL_PRECISION = 38
#: DECIMAL without a precision (Flink's default).
_DEFAULT_PRECISION = 10


@dataclass(frozen=True)
class ArrowLayout:
    """How a lake's library lays out the Arrow types of :func:`to_arrow_type`.

    Attributes:
        large: text and binary as ``large_string``/``large_binary`` (64-bit offsets).
        narrow_ints: TINYINT/SMALLINT as ``int8``/``int16`` instead of ``int32``.
    """

    large: bool = True
    narrow_ints: bool = False

    @property
    def text(self) -> pa.DataType:
        return pa.large_string() if self.large else pa.string()

    @property
    def binary(self) -> pa.DataType:
        return pa.large_binary() if self.large else pa.binary()


#: pyiceberg's layout (the default: the key-state check compares in it).
ICEBERG = ArrowLayout(large=True, narrow_ints=False)
#: pypaimon's layout.
PAIMON = ArrowLayout(large=False, narrow_ints=True)

_FIXED: dict[TypeRoot, pa.DataType] = {
    TypeRoot.BOOLEAN: pa.bool_(),
    TypeRoot.INT: pa.int32(),
    TypeRoot.BIGINT: pa.int64(),
    TypeRoot.FLOAT: pa.float32(),
    TypeRoot.DOUBLE: pa.float64(),
    TypeRoot.DATE: pa.date32(),
    TypeRoot.TIMESTAMP: pa.timestamp("us"),
    TypeRoot.TIMESTAMP_LTZ: pa.timestamp("us", tz="UTC"),
}
_TEXT = (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.STRING, TypeRoot.TIME)
_BINARY = (TypeRoot.BINARY, TypeRoot.VARBINARY, TypeRoot.BYTES)
_NARROW = {TypeRoot.TINYINT: pa.int8(), TypeRoot.SMALLINT: pa.int16()}


def decimal_precision_scale(data_type: DataType) -> tuple[int, int]:
    """``(precision, scale)`` of a DECIMAL (precision 10 and scale 0 when not given, as Flink)."""
    precision = data_type.precision if data_type.precision is not None else _DEFAULT_PRECISION
    return precision, data_type.scale or 0


def is_text_decimal(data_type: DataType) -> bool:
    """True for a DECIMAL wider than :data:`MAX_DECIMAL_PRECISION` digits (stored as exact text)."""
    return data_type.root is TypeRoot.DECIMAL and decimal_precision_scale(data_type)[0] > MAX_DECIMAL_PRECISION


def to_arrow_type(data_type: DataType, layout: ArrowLayout = ICEBERG) -> pa.DataType:
    """The Arrow type a lake stores ``data_type`` as (see the module table), e.g. ``decimal128(20, 0)``.

    Nullability is not part of it.
    """
    root = data_type.root
    if root is TypeRoot.DECIMAL:
        return layout.text if is_text_decimal(data_type) else pa.decimal128(*decimal_precision_scale(data_type))
    if root in _NARROW:
        return _NARROW[root] if layout.narrow_ints else pa.int32()
    if root in _TEXT:
        return layout.text
    if root in _BINARY:
        return layout.binary
    return _FIXED[root]


def to_arrow_value(value: Any, data_type: DataType) -> Any:
    """Convert one changelake Python value to what ``pa.array`` takes for :func:`to_arrow_type`.

    TIME ``timedelta`` -> text (:func:`format_time` with the column's precision); DECIMAL wider
    than 38 digits -> plain text; everything else is returned unchanged. ``None`` stays ``None``.
    """
    if value is None:
        return None
    if data_type.root is TypeRoot.TIME and isinstance(value, dt.timedelta):
        return format_time(value, data_type.precision)
    if is_text_decimal(data_type):
        return format(value, "f") if isinstance(value, Decimal) else str(value)
    return value


def to_arrow_array(
    values: Sequence[Any],
    data_type: DataType | None,
    arrow_type: pa.DataType,
    *,
    table: str | None = None,
    column: str | None = None,
    error: Callable[..., Exception] = LakeSinkError,
    lake: str = "",
) -> pa.Array:
    """Build an Arrow array of ``arrow_type`` from changelake Python values of ``data_type``.

    Args:
        values: one Python value per row (``None`` = NULL).
        data_type: the values' changelake type, or ``None`` when the column is absent from the
            incoming schema (then every value must be ``None``).
        arrow_type: the target Arrow type (the lake column's, which may be wider than ``data_type``).
        table, column: named in errors.
        error: the exception class raised (a lake's type error), called as
            ``error(message, table=..., column=...)``.
        lake: the lake's name in the message (``"Paimon "`` gives "of Paimon table ...").

    Raises:
        ``error``: a value does not fit (overflow, DECIMAL scale loss, wrong Python type).
    """
    converted = list(values) if data_type is None else [to_arrow_value(v, data_type) for v in values]
    try:
        return pa.array(converted, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as exc:
        raise error(
            f"cannot store column {column!r} of {lake}table {table!r} as {arrow_type}: {exc}",
            table=table,
            column=column,
        ) from exc


def schema_to_arrow(schema: Schema, layout: ArrowLayout = ICEBERG) -> pa.Schema:
    """The Arrow schema of a changelake schema as a lake stores it (NOT NULL -> non-nullable)."""
    return pa.schema([pa.field(c.name, to_arrow_type(c.type, layout), nullable=c.type.nullable) for c in schema.columns])


def rows_to_arrow(
    rows: Sequence[Mapping[str, Any]], schema: Schema, *, table: str | None = None, layout: ArrowLayout = ICEBERG,
) -> pa.Table:
    """Arrow table of ``rows`` (column name -> changelake Python value) typed as a lake stores them.

    Use it on both sides of a comparison (e.g. MySQL rows for
    :func:`changelake.checks.key_state.compare_key_state`) so that TIME, wide DECIMAL and timestamps
    convert exactly as the sinks convert them. Missing keys are NULL.

    Raises:
        LakeSinkError: a value does not fit its column's type.
    """
    arrow_schema = schema_to_arrow(schema, layout)
    arrays = [
        to_arrow_array([r.get(c.name) for r in rows], c.type, arrow_schema.field(c.name).type, table=table, column=c.name)
        for c in schema.columns
    ]
    return pa.Table.from_arrays(arrays, schema=arrow_schema)
