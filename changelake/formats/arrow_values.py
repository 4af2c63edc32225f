"""Arrow's JSON reader with an explicit schema, value by value as exact as the per-message decoders
(the columnar lanes of ``debezium-json`` and ``json``): the read type of each column, the casts of
date/time text, and the checks of what the reader takes but the decoders refuse."""

from __future__ import annotations

import re
from typing import Any

from changelake.changelog.types import DataType, TypeRoot

__all__ = ["arrow_decimals_fit", "has_nan_or_inf_token", "read_json_lines"]

#: a NaN / Inf(inity) token after ``:``, ``,`` or ``[``: Arrow's JSON reader reads ``Inf`` (and
#: ``NaN``, ``Infinity``), which are not JSON; the per-message decoders refuse ``Inf``
_NAN_OR_INF_TOKEN = re.compile(rb"[:,\[]\s*[-+]?(?:NaN|Inf)")


def has_nan_or_inf_token(joined: bytes) -> bool:
    """True when ``joined`` (messages joined by newlines) may hold a NaN / Inf(inity) token, so a
    columnar read must hand it to the per-message decoder (also seen inside a text value: rare,
    and the per-message result is exact)."""
    return (b"NaN" in joined or b"Inf" in joined) and _NAN_OR_INF_TOKEN.search(joined) is not None


def _arrow_read_type(dtype: DataType) -> Any:
    """The Arrow type pyarrow's JSON reader reads a column as, chosen so that every value it
    accepts decodes exactly as the per-message decoder would (anything else makes it fail, and
    the group falls back to the per-message decoder): integers as int64 (range checked after),
    FLOAT/DOUBLE as float64 (Python floats, as the per-message decoder gives), DECIMAL as
    decimal128 of the column (the reader refuses a value that needs more scale; :func:`arrow_decimals_fit` checks the precision),
    strings and booleans as themselves; DATE, TIME, TIMESTAMP(_LTZ) and binary as the JSON text,
    converted after by the per-message value decoders (pyarrow reads no date32 from text and keeps
    base64 as text)."""
    import pyarrow as pa

    root = dtype.root
    if dtype.is_integer:
        return pa.int64()
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        return pa.float64()
    if root is TypeRoot.BOOLEAN:
        return pa.bool_()
    if root is TypeRoot.DECIMAL:
        precision = dtype.precision if dtype.precision is not None else 38
        return pa.decimal128(precision, dtype.scale or 0) if precision <= 38 else None
    return pa.string()


def arrow_decimals_fit(array: Any, dtype: Any) -> bool:
    """True when every value of a decimal128 ``array`` read by Arrow's JSON reader fits the
    column's DECIMAL precision as the per-message decoder's quantize checks it (under the
    column's context, ``changelog.decimals``): Arrow's reader refuses a value needing more scale,
    but not one with more digits left of the point."""
    import decimal

    import pyarrow.compute as pc

    bound = decimal.Decimal(10) ** (dtype.precision - dtype.scale)
    bounds = pc.min_max(array).as_py()
    return bounds["min"] is None or (-bound < bounds["min"] and bounds["max"] < bound)


#: The text of a TIMESTAMP / DATE that Arrow's cast parses exactly as the per-message decoder does.
_TEMPORAL_TEXT = {TypeRoot.TIMESTAMP: r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?$",
                  TypeRoot.DATE: r"^\d{4}-\d{2}-\d{2}$"}


def _temporal_in_arrow(array: Any, dtype: DataType, target: Any) -> Any | None:
    """A TIMESTAMP or DATE text column cast by Arrow, when every value is plain
    ``yyyy-MM-dd[( |T)HH:mm:ss[.f]]`` text of a year from 1 (what the value decoder reads the same
    way); None otherwise (then the value decoder converts it value by value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pattern = _TEMPORAL_TEXT.get(dtype.root)
    if pattern is None:
        return None
    if array.null_count == len(array):
        return pa.nulls(len(array), target)
    if not pc.all(pc.match_substring_regex(array, pattern)).as_py():
        return None
    try:
        out = array.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    first = pc.min(pc.year(out)).as_py()
    return out if first is not None and first >= 1 else None


def read_json_lines(joined: bytes, read_schema: Any, lines: int) -> Any | None:
    """``joined`` (``lines`` compact JSON objects, one per line) as ONE ``pyarrow.Table`` of
    ``read_schema`` (pyarrow's JSON reader with an explicit schema, fields not in it ignored),
    or None when it cannot be read exactly that way: a NaN/Inf token (:func:`has_nan_or_inf_token`),
    anything Arrow refuses, another row count, invalid UTF-8 (Arrow's reader does not check it)."""
    if has_nan_or_inf_token(joined):
        return None
    import io

    import pyarrow as pa
    import pyarrow.json as pj

    try:
        table = pj.read_json(
            io.BytesIO(joined),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, 2 * len(joined))),
            parse_options=pj.ParseOptions(explicit_schema=read_schema, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows != lines:
        return None
    try:
        table.validate(full=True)
    except pa.ArrowInvalid:
        return None
    return table
