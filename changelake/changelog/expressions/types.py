"""Flink CDC's type rules for transform expressions, and the Arrow types expressions evaluate in.

Result types follow Calcite's standard inference as Flink CDC configures it (``FlinkCdcTypeSystem``:
``transform.decimal.precision.mode`` ``UP_TO_19`` (default) or ``UP_TO_38`` caps DECIMAL precision):

- exact numerics widen TINYINT < SMALLINT < INT < BIGINT < DECIMAL; with FLOAT/DOUBLE the result is
  approximate; an integer in DECIMAL arithmetic counts as DECIMAL(3|5|10|19, 0);
- ``+``/``-``: DECIMAL(max(p1-s1, p2-s2) + max(s1, s2) + 1, max(s1, s2));
  ``*``: DECIMAL(p1 + p2, s1 + s2); ``/``: scale max(6, s1 + p2 + 1), integer digits p1 - s1 + s2;
  integer ``/`` integer is integer division (Java); all capped at the mode's precision;
- CASE, COALESCE, IF, IN lists: the least restrictive common type (CHAR/VARCHAR/STRING widen to the
  longest, DATE with TIMESTAMP gives TIMESTAMP);
- string literals are CHAR(n), integer literals INT (BIGINT when they need it), ``1.50`` is
  DECIMAL(3, 2), ``1e3`` DOUBLE.

Evaluation types (:func:`arrow_type`): BOOLEAN bool, TINYINT..BIGINT int8..int64, FLOAT float32,
DOUBLE float64, DECIMAL decimal128 (decimal256 past 38 digits), strings string, binaries binary,
DATE date32, TIME duration[us] (MySQL TIME may be negative or past 24 h), TIMESTAMP timestamp[us],
TIMESTAMP_LTZ timestamp[us, UTC].
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Iterable, Sequence

import pyarrow as pa

from changelake.changelog.expressions.errors import ExpressionError
from changelake.changelog.types import DataType, TypeRoot

__all__ = [
    "arrow_type", "to_arrow_array", "normalise", "least_restrictive", "exact_digits", "is_numeric",
    "is_exact", "decimal_add", "decimal_multiply", "decimal_divide", "decimal_mod", "STRING",
    "BOOLEAN", "INT", "BIGINT", "DOUBLE",
]

STRING = DataType(TypeRoot.STRING)
BOOLEAN = DataType(TypeRoot.BOOLEAN)
INT = DataType(TypeRoot.INT)
BIGINT = DataType(TypeRoot.BIGINT)
DOUBLE = DataType(TypeRoot.DOUBLE)

_INT_ORDER = [TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT]
_INT_DIGITS = {TypeRoot.TINYINT: 3, TypeRoot.SMALLINT: 5, TypeRoot.INT: 10, TypeRoot.BIGINT: 19}
_ARROW = {
    TypeRoot.BOOLEAN: pa.bool_(), TypeRoot.TINYINT: pa.int8(), TypeRoot.SMALLINT: pa.int16(),
    TypeRoot.INT: pa.int32(), TypeRoot.BIGINT: pa.int64(), TypeRoot.FLOAT: pa.float32(),
    TypeRoot.DOUBLE: pa.float64(), TypeRoot.CHAR: pa.string(), TypeRoot.VARCHAR: pa.string(),
    TypeRoot.STRING: pa.string(), TypeRoot.BINARY: pa.binary(), TypeRoot.VARBINARY: pa.binary(),
    TypeRoot.BYTES: pa.binary(), TypeRoot.DATE: pa.date32(), TypeRoot.TIME: pa.duration("us"),
    TypeRoot.TIMESTAMP: pa.timestamp("us"), TypeRoot.TIMESTAMP_LTZ: pa.timestamp("us", tz="UTC"),
}


def arrow_type(dtype: DataType) -> pa.DataType:
    """The Arrow type an expression of ``dtype`` evaluates in (see the module docstring)."""
    if dtype.root is TypeRoot.DECIMAL:
        p, s = dtype.precision or 10, dtype.scale or 0
        return pa.decimal128(p, s) if p <= 38 else pa.decimal256(p, s)
    return _ARROW[dtype.root]


def to_arrow_array(values: Sequence[Any], dtype: DataType) -> pa.Array:
    """Python values of a changelog column (see :mod:`changelake.changelog.types`) as an Arrow array.

    Raises:
        ExpressionError: a value does not fit the type (names the type and the value's index).
    """
    target = arrow_type(dtype)
    try:
        return pa.array(values, type=target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        for i, v in enumerate(values):
            try:
                pa.array([v], type=target)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
                raise ExpressionError(f"value {v!r} does not fit column type {dtype}: {exc}", row=i) from None
        raise


def normalise(array: pa.Array | pa.ChunkedArray, dtype: DataType) -> pa.Array:
    """A batch column as the evaluation type of ``dtype`` (large_string -> string, time64 -> duration, ...)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    target = arrow_type(dtype)
    if array.type == target:
        return array
    if pa.types.is_time(array.type) and pa.types.is_duration(target):
        micros = array.cast(pa.time64("us")).cast(pa.int64())
        return micros.cast(pa.duration("us"))
    if pa.types.is_string(target) and not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        return array  # e.g. TIME kept as text by a lake: leave as is
    return array.cast(target)


def is_numeric(dtype: DataType | None) -> bool:
    return dtype is not None and (dtype.is_integer or dtype.root in (TypeRoot.DECIMAL, TypeRoot.FLOAT, TypeRoot.DOUBLE))


def is_exact(dtype: DataType) -> bool:
    return dtype.is_integer or dtype.root is TypeRoot.DECIMAL


def exact_digits(dtype: DataType) -> tuple[int, int]:
    """(precision, scale) of an exact numeric type as DECIMAL (INT is DECIMAL(10, 0))."""
    if dtype.root is TypeRoot.DECIMAL:
        return dtype.precision or 10, dtype.scale or 0
    return _INT_DIGITS[dtype.root], 0


def _cap(p: int, s: int, max_precision: int) -> DataType:
    """Calcite's cap: precision and scale each limited to the type system's maximum."""
    p = min(p, max_precision)
    return DataType.decimal(p, min(s, p))


def decimal_add(a: DataType, b: DataType, max_precision: int) -> DataType:
    (p1, s1), (p2, s2) = exact_digits(a), exact_digits(b)
    s = max(s1, s2)
    return _cap(max(p1 - s1, p2 - s2) + s + 1, s, max_precision)


def decimal_multiply(a: DataType, b: DataType, max_precision: int) -> DataType:
    (p1, s1), (p2, s2) = exact_digits(a), exact_digits(b)
    return _cap(p1 + p2, s1 + s2, max_precision)


def decimal_divide(a: DataType, b: DataType, max_precision: int) -> DataType:
    (p1, s1), (p2, s2) = exact_digits(a), exact_digits(b)
    whole = min(p1 - s1 + s2, max_precision)
    scale = min(max(6, s1 + p2 + 1), max_precision - whole)
    return DataType.decimal(whole + scale, scale)


def decimal_mod(a: DataType, b: DataType, max_precision: int) -> DataType:
    (p1, s1), (p2, s2) = exact_digits(a), exact_digits(b)
    s = max(s1, s2)
    return _cap(min(p1 - s1, p2 - s2) + s, s, max_precision)


def _string_len(t: DataType) -> int | None:
    return None if t.root is TypeRoot.STRING else t.length


def least_restrictive(types: Iterable[DataType | None], what: str) -> DataType:
    """Calcite's least restrictive common type of ``types`` (None stands for the NULL literal).

    Raises:
        ExpressionError: the types have no common type (``what`` names the construct).
    """
    known = [t for t in types if t is not None]
    if not known:
        return STRING
    nullable = True
    first = known[0]
    if all(t.root is TypeRoot.BOOLEAN for t in known):
        return BOOLEAN
    if all(is_numeric(t) for t in known):
        if any(t.root in (TypeRoot.FLOAT, TypeRoot.DOUBLE) for t in known):
            root = TypeRoot.DOUBLE if any(t.root is TypeRoot.DOUBLE for t in known) else TypeRoot.FLOAT
            return DataType(root, nullable)
        if all(t.is_integer for t in known):
            return DataType(max((t.root for t in known), key=_INT_ORDER.index), nullable)
        digits = [exact_digits(t) for t in known]
        s = max(d[1] for d in digits)
        whole = max(d[0] - d[1] for d in digits)
        return DataType.decimal(min(38, whole + s), s, nullable)
    if all(t.is_string for t in known):
        lengths = [_string_len(t) for t in known]
        if any(n is None for n in lengths):
            return DataType(TypeRoot.STRING, nullable)
        root = TypeRoot.CHAR if all(t.root is TypeRoot.CHAR for t in known) else TypeRoot.VARCHAR
        return DataType(root, nullable, length=max(n for n in lengths if n is not None))
    if all(t.is_binary for t in known):
        return DataType(TypeRoot.BYTES, nullable)
    roots = {t.root for t in known}
    if roots <= {TypeRoot.DATE, TypeRoot.TIMESTAMP}:
        prec = max((t.precision or 0) for t in known if t.root is TypeRoot.TIMESTAMP)
        return DataType(TypeRoot.TIMESTAMP, nullable, precision=prec)
    if len(roots) == 1 and first.is_temporal:
        prec = max((t.precision or 0) for t in known)
        return DataType(first.root, nullable, precision=prec if first.root is not TypeRoot.DATE else None)
    raise ExpressionError(f"{what}: types {', '.join(str(t) for t in known)} have no common type")


def python_now(tz: _dt.tzinfo) -> _dt.datetime:
    """The current instant (UTC-aware), as Flink's processing time."""
    return _dt.datetime.now(_dt.timezone.utc)
