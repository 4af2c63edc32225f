"""The one JSON value codec of json, debezium-json, canal-json and maxwell-json, and the record key
of the Kafka pipeline sink (``{"TableId": "db.t", <key columns as these JSON values>}``, below).

Values are written as Flink's JSON encoders (``RowDataToJsonConverters``) write them, with the
choices fixed in DESIGN.md ("Change events on Kafka"):

==============================  ==================================================================
type                            JSON value
==============================  ==================================================================
BOOLEAN                         ``true`` / ``false``
TINYINT .. BIGINT               integer (range-checked)
FLOAT                           shortest decimal that round-trips through float32 (``5.15``)
DOUBLE                          shortest round-trip double (``repr``); NaN/Infinity as strings
DECIMAL(p, s)                   plain number with exactly ``s`` fraction digits, never exponent,
                                never via float (``-12.34``, ``0.00``, ``18446744073709551615``)
CHAR / VARCHAR / STRING         string (unicode written as UTF-8)
BINARY / VARBINARY / BYTES      base64 string
DATE                            ``yyyy-MM-dd``
TIME                            ``[-]HH:mm:ss[.f]`` (negative and > 24 h kept, zeros stripped)
TIMESTAMP                       ``yyyy-MM-dd HH:mm:ss[.f]`` (``T`` instead of the space with
                                ``timestamp-format.standard=ISO-8601``), fraction zeros stripped
TIMESTAMP_LTZ                   the same in UTC plus ``Z`` (``2024-01-01 02:00:00.12Z``)
==============================  ==================================================================

Decoding accepts what Flink's ``JsonToRowDataConverters`` accept (numbers or numeric strings,
``"true"``/``"false"``, both timestamp spellings) plus ``0``/``1`` for BOOLEAN (Canal and Maxwell
write TINYINT(1) that way; Flink would read them as false). JSON numbers are parsed as
``Decimal`` so DECIMAL never passes through float.
"""

from __future__ import annotations

import base64
import binascii
import csv
import datetime as dt
import enum
import io
import json
import math
import re
import struct
from decimal import Context, Decimal, InvalidOperation
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, Callable, Iterable, Mapping

import orjson

from changelake.changelog.decimals import column_context, quantize
from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema
from changelake.changelog.temporal import format_time, fraction
from changelake.changelog.types import DataType, TypeRoot
from changelake.formats.errors import DecodeError, EncodeError
from changelake.formats.options import TimestampFormat

__all__ = [
    "to_json_value",
    "from_json_value",
    "json_encoder_for",
    "json_decoder_for",
    "to_json_untyped",
    "to_plain",
    "dumps",
    "loads",
    "format_time",
    "format_timestamp",
    "parse_time",
    "parse_timestamp",
    "float32_shortest",
    "KeyFormat",
    "key_fields",
    "encode_table_key",
    "table_key_encoder",
    "encode_event_key",
]

_INT_RANGES = {
    TypeRoot.TINYINT: (-(2**7), 2**7 - 1),
    TypeRoot.SMALLINT: (-(2**15), 2**15 - 1),
    TypeRoot.INT: (-(2**31), 2**31 - 1),
    TypeRoot.BIGINT: (-(2**63), 2**63 - 1),
}
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


# -- text forms of temporal values --------------------------------------------------------------------
def format_timestamp(value: dt.datetime, *, iso: bool = False, zone: bool = False) -> str:
    """``yyyy-MM-dd HH:mm:ss[.f]`` (``T`` separator when ``iso``), ``Z`` appended when ``zone``.

    The value is printed as given (callers convert TIMESTAMP_LTZ values to UTC first).
    """
    sep = "T" if iso else " "
    text = (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}{sep}"
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}{fraction(value.microsecond)}"
    )
    return text + "Z" if zone else text


_TIME_RE = re.compile(r"^(-)?(\d{1,3}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")
_TS_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?$"
)


def _micros(fraction: str | None) -> int:
    # digits beyond microseconds are truncated (Python datetimes hold microseconds)
    return int((fraction or "").ljust(6, "0")[:6]) if fraction else 0


def parse_time(text: str) -> dt.timedelta:
    """Parse ``[-]HH:mm:ss[.f]`` (hours up to 3 digits) into a timedelta. Raises ValueError."""
    m = _TIME_RE.match(text)
    if not m:
        raise ValueError(f"expected [-]HH:mm:ss[.fraction], got {text!r}")
    minutes, seconds = int(m.group(3)), int(m.group(4))
    if minutes > 59 or seconds > 59:
        raise ValueError(f"minutes and seconds must be < 60, got {text!r}")
    value = dt.timedelta(hours=int(m.group(2)), minutes=minutes, seconds=seconds, microseconds=_micros(m.group(5)))
    return -value if m.group(1) else value


def parse_timestamp(text: str, *, ltz: bool) -> dt.datetime:
    """Parse ``yyyy-MM-dd[ T]HH:mm:ss[.f][Z|±hh:mm]``.

    Returns a naive datetime for TIMESTAMP (``ltz`` False; a zone suffix is an error) and an aware
    UTC datetime for TIMESTAMP_LTZ (a missing zone is read as UTC). Raises ValueError.

    The common zone-less ``yyyy-MM-dd HH:mm:ss[.f]`` text goes through the C
    ``datetime.fromisoformat`` (same result, about 5× faster); anything else through the pattern.
    """
    if (
        len(text) >= 19 and text[4] == "-" and text[7] == "-" and text[10] in " T" and text[13] == ":"
        and text[16] == ":" and (len(text) == 19 or (text[19] == "." and 20 < len(text) <= 29 and text[20:].isdigit()))
    ):
        try:
            fast = dt.datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            return fast.replace(tzinfo=dt.timezone.utc) if ltz else fast
    m = _TS_RE.match(text)
    if not m:
        raise ValueError(f"expected yyyy-MM-dd HH:mm:ss[.fraction]{'Z' if ltz else ''}, got {text!r}")
    y, mo, d, h, mi, s, fraction, zone = m.groups()
    value = dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), _micros(fraction))
    if not ltz:
        if zone:
            raise ValueError(f"a TIMESTAMP (without time zone) value has no zone suffix, got {text!r}")
        return value
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        return (value - sign * offset).replace(tzinfo=dt.timezone.utc)
    return value.replace(tzinfo=dt.timezone.utc)


_FLT_MAX = 3.4028234663852886e38
_FLT_ROUND_LIMIT = 3.4028235677973366e38  # FLT_MAX + half an ulp: larger magnitudes overflow


def _to_float32(value: float) -> float:
    if _FLT_MAX < abs(value) < _FLT_ROUND_LIMIT:
        return math.copysign(_FLT_MAX, value)  # IEEE round-to-nearest gives FLT_MAX; struct refuses
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def float32_shortest(value: float) -> float:
    """The double whose ``repr`` is the shortest decimal that reads back as the same float32.

    ``float32_shortest(5.150000095367432) == 5.15`` (as Java's ``Float.toString`` / Debezium), so
    MySQL FLOAT 5.15 is written ``5.15``. NaN and infinities are returned unchanged; a magnitude
    beyond float32's range (it cannot come from a FLOAT column) is returned unchanged too.
    """
    if not math.isfinite(value):
        return value
    if abs(value) >= _FLT_ROUND_LIMIT:
        return value
    f32 = _to_float32(value)
    for digits in range(1, 10):
        candidate = float(f"{f32:.{digits}g}")
        if abs(candidate) < _FLT_ROUND_LIMIT and _to_float32(candidate) == f32:
            return candidate
    return f32


# -- typed values ------------------------------------------------------------------------------------
def _non_finite(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _decimal(value: Any, dtype: DataType) -> Decimal:
    """Quantize to the column's scale (HALF_UP, as Flink's DecimalData) and check the precision."""
    if isinstance(value, Decimal):
        d = value
    elif isinstance(value, int) and not isinstance(value, bool):
        d = Decimal(value)
    elif isinstance(value, float):
        d = Decimal(repr(value))
    elif isinstance(value, str):
        d = Decimal(value.strip())
    else:
        raise TypeError(f"expected Decimal, got {type(value).__name__}")
    return quantize(d, dtype.precision if dtype.precision is not None else 38, dtype.scale or 0)


def to_json_value(
    value: Any,
    dtype: DataType,
    field: str | None = None,
    *,
    timestamp_format: TimestampFormat = TimestampFormat.SQL,
    format: str = "json",
) -> Any:
    """Convert a changelog value of type ``dtype`` to its JSON value (see the module table).

    Returns None, bool, int, float, str or Decimal (written by :func:`dumps` as a plain number).

    Raises:
        EncodeError: the Python value does not suit the type (names ``field`` and the value's type).
    """
    if value is None:
        return None
    root = dtype.root
    try:
        if root is TypeRoot.BOOLEAN:
            if isinstance(value, bool):
                return value
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
        elif dtype.is_integer:
            if isinstance(value, int) and not isinstance(value, bool):
                lo, hi = _INT_RANGES[root]
                if not lo <= value <= hi:
                    raise ValueError(f"{value} is out of range for {root.value}")
                return value
        elif root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
            if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
                f = float(value)
                if not math.isfinite(f):
                    return _non_finite(f)
                return float32_shortest(f) if root is TypeRoot.FLOAT else f
        elif root is TypeRoot.DECIMAL:
            return _decimal(value, dtype)
        elif dtype.is_string:
            if isinstance(value, str):
                return value
        elif dtype.is_binary:
            if isinstance(value, (bytes, bytearray, memoryview)):
                return base64.b64encode(bytes(value)).decode("ascii")
        elif root is TypeRoot.DATE:
            if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
                return value.isoformat()
        elif root is TypeRoot.TIME:
            if isinstance(value, (dt.timedelta, dt.time)):
                return format_time(value)
        elif root is TypeRoot.TIMESTAMP:
            if isinstance(value, dt.datetime):
                if value.tzinfo is not None:
                    raise ValueError("a TIMESTAMP value must be a naive (wall-clock) datetime")
                return format_timestamp(value, iso=timestamp_format is TimestampFormat.ISO_8601)
        elif root is TypeRoot.TIMESTAMP_LTZ:
            if isinstance(value, dt.datetime):
                if value.tzinfo is None:
                    raise ValueError("a TIMESTAMP_LTZ value must be an aware datetime (UTC)")
                utc = value.astimezone(dt.timezone.utc)
                return format_timestamp(utc, iso=timestamp_format is TimestampFormat.ISO_8601, zone=True)
    except (ValueError, TypeError, InvalidOperation, ArithmeticError) as exc:
        raise EncodeError(f"{exc} (type {dtype})", format=format, field=field, value=value) from exc
    raise EncodeError(
        f"a {type(value).__name__} value does not suit type {dtype}", format=format, field=field, value=value
    )


def to_json_untyped(value: Any, *, timestamp_format: TimestampFormat = TimestampFormat.SQL) -> Any:
    """JSON value of a Python value without a declared type (schema-less formats).

    Decimal stays Decimal (a plain number), datetime/date/timedelta/bytes as in the module
    table (an aware datetime is written in UTC with ``Z``), mappings and sequences recursively.
    Raises TypeError for other objects.
    """
    iso = timestamp_format is TimestampFormat.ISO_8601
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if isinstance(value, Decimal):
        return value if value.is_finite() else str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return format_timestamp(value, iso=iso)
        return format_timestamp(value.astimezone(dt.timezone.utc), iso=iso, zone=True)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (dt.timedelta, dt.time)):
        return format_time(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): to_json_untyped(v, timestamp_format=timestamp_format) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [to_json_untyped(v, timestamp_format=timestamp_format) for v in items]
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


def _quantize_fast(value: Any, exp: Decimal, ctx: Context) -> Decimal | None:
    """:func:`_decimal` for the common case (a finite ``Decimal`` or an int), else None (the caller
    then takes the general path, which raises the errors)."""
    tp = type(value)
    if tp is Decimal:
        if not value.is_finite():
            return None
    elif tp is int:
        value = Decimal(value)
    else:
        return None
    try:
        # under the column's context: InvalidOperation past the precision (decimals.column_context)
        q: Decimal = value.quantize(exp, context=ctx)
    except ArithmeticError:
        return None
    return q


def json_encoder_for(
    dtype: DataType,
    field: str | None = None,
    *,
    timestamp_format: TimestampFormat = TimestampFormat.SQL,
    format: str = "json",
) -> Callable[[Any], Any]:
    """A converter equal to ``to_json_value(value, dtype, field, timestamp_format=..., format=...)``
    with the type dispatch done once, for encoding many values of one column.

    The returned function takes a fast path for the common Python type of ``dtype`` (``int`` for
    integers, ``str``, ``Decimal``, naive ``datetime``, ...) and hands every other value to
    :func:`to_json_value`, so results and errors (EncodeError naming ``field``) are the same.
    """

    def general(value: Any) -> Any:
        return to_json_value(value, dtype, field, timestamp_format=timestamp_format, format=format)

    root = dtype.root
    if dtype.is_integer:
        lo, hi = _INT_RANGES[root]

        def encode_int(value: Any) -> Any:
            if type(value) is int and lo <= value <= hi:
                return value
            return None if value is None else general(value)

        return encode_int
    if dtype.is_string:

        def encode_str(value: Any) -> Any:
            if type(value) is str or value is None:
                return value
            return general(value)

        return encode_str
    if root is TypeRoot.BOOLEAN:

        def encode_bool(value: Any) -> Any:
            if value is True or value is False or value is None:
                return value
            return general(value)

        return encode_bool
    if root is TypeRoot.DOUBLE:
        isfinite = math.isfinite

        def encode_double(value: Any) -> Any:
            if type(value) is float and isfinite(value):
                return value
            return None if value is None else general(value)

        return encode_double
    if root is TypeRoot.DECIMAL:
        exp = Decimal(1).scaleb(-(dtype.scale or 0))
        ctx = column_context(dtype.precision if dtype.precision is not None else 38)

        def encode_decimal(value: Any) -> Any:
            if value is None:
                return None
            q = _quantize_fast(value, exp, ctx)
            return general(value) if q is None else q

        return encode_decimal
    if root is TypeRoot.DATE:

        def encode_date(value: Any) -> Any:
            if type(value) is dt.date:
                return value.isoformat()
            return None if value is None else general(value)

        return encode_date
    if root is TypeRoot.TIMESTAMP:
        sep = "T" if timestamp_format is TimestampFormat.ISO_8601 else " "
        datetime = dt.datetime

        def encode_timestamp(value: Any) -> Any:
            # isoformat: yyyy-MM-dd<sep>HH:mm:ss[.ffffff]; strip fraction zeros as format_timestamp
            if type(value) is datetime and value.tzinfo is None:
                return value.isoformat(sep).rstrip("0") if value.microsecond else value.isoformat(sep)
            return None if value is None else general(value)

        return encode_timestamp

    def encode_other(value: Any) -> Any:
        return None if value is None else general(value)

    return encode_other


def json_decoder_for(dtype: DataType, field: str, *, format: str = "json") -> Callable[[Any], Any]:
    """A converter equal to ``from_json_value(json_value, dtype, field, format=format)`` with the
    type dispatch done once, for decoding many values of one column.

    The returned function takes a fast path for the JSON value :func:`loads` gives for the common
    case (``int``, ``str``, ``Decimal``, timestamp text) and hands every other value, and every
    value the fast path cannot take, to :func:`from_json_value`, so results and errors
    (DecodeError naming ``format`` and ``field``) are the same.
    """

    def general(json_value: Any) -> Any:
        return from_json_value(json_value, dtype, field, format=format)

    root = dtype.root
    if dtype.is_integer:
        lo, hi = _INT_RANGES[root]

        def decode_int(v: Any) -> Any:
            if type(v) is int and lo <= v <= hi:
                return v
            return None if v is None else general(v)

        return decode_int
    if dtype.is_string:

        def decode_str(v: Any) -> Any:
            if type(v) is str or v is None:
                return v
            return general(v)

        return decode_str
    if root is TypeRoot.BOOLEAN:

        def decode_bool(v: Any) -> Any:
            if v is True or v is False or v is None:
                return v
            return general(v)

        return decode_bool
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):

        def decode_float(v: Any) -> Any:
            tp = type(v)
            if tp is Decimal or tp is int or tp is float:
                return float(v)
            return None if v is None else general(v)

        return decode_float
    if root is TypeRoot.DECIMAL:
        exp = Decimal(1).scaleb(-(dtype.scale or 0))
        ctx = column_context(dtype.precision if dtype.precision is not None else 38)

        def decode_decimal(v: Any) -> Any:
            if v is None:
                return None
            q = _quantize_fast(v, exp, ctx)
            return general(v) if q is None else q

        return decode_decimal
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        ltz = root is TypeRoot.TIMESTAMP_LTZ

        def decode_timestamp(v: Any) -> Any:
            if type(v) is str:
                try:
                    return parse_timestamp(v, ltz=ltz)
                except Exception:  # noqa: BLE001 - the general path raises the DecodeError
                    pass
            return None if v is None else general(v)

        return decode_timestamp

    def decode_other(v: Any) -> Any:
        return None if v is None else general(v)

    return decode_other


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) else None


def from_json_value(json_value: Any, dtype: DataType, field: str, *, format: str = "json") -> Any:
    """Convert a parsed JSON value (numbers as int/Decimal, see :func:`loads`) to type ``dtype``.

    Returns the Python value of :mod:`changelake.changelog.types` (None for JSON null).

    Raises:
        DecodeError: the value does not parse as ``dtype``; names ``format`` and ``field``.
    """
    if json_value is None:
        return None
    root = dtype.root
    v = json_value
    try:
        if root is TypeRoot.BOOLEAN:
            if isinstance(v, bool):
                return v
            if isinstance(v, int) and v in (0, 1):
                return bool(v)
            t = _text(v)
            if t is not None and t.lower() in ("true", "false", "1", "0"):
                return t.lower() in ("true", "1")
        elif dtype.is_integer:
            n: int | None = None
            if isinstance(v, int) and not isinstance(v, bool):
                n = v
            elif isinstance(v, Decimal) and v.is_finite() and v == v.to_integral_value():
                n = int(v)
            elif isinstance(v, str):
                d = Decimal(v.strip())
                if d.is_finite() and d == d.to_integral_value():
                    n = int(d)
            if n is not None:
                lo, hi = _INT_RANGES[root]
                if not lo <= n <= hi:
                    raise ValueError(f"{n} is out of range for {root.value}")
                return n
        elif root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
            if isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
                return float(v)
            t = _text(v)
            if t is not None:
                return float(t)
        elif root is TypeRoot.DECIMAL:
            if isinstance(v, (int, Decimal)) and not isinstance(v, bool):
                return _decimal(v, dtype)
            if isinstance(v, float):
                return _decimal(v, dtype)
            if isinstance(v, str):
                return _decimal(v, dtype)
        elif dtype.is_string:
            if isinstance(v, str):
                return v
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, (int, Decimal, float)):
                return str(v)
            return dumps(v).decode("utf-8")  # objects/arrays are stringified, as Flink
        elif dtype.is_binary:
            if isinstance(v, str):
                return base64.b64decode(v, validate=True)
        elif root is TypeRoot.DATE:
            if isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
                return dt.date.fromisoformat(v)
            if isinstance(v, str):
                raise ValueError(f"expected yyyy-MM-dd, got {v!r}")
        elif root is TypeRoot.TIME:
            if isinstance(v, str):
                return parse_time(v)
        elif root is TypeRoot.TIMESTAMP:
            if isinstance(v, str):
                return parse_timestamp(v, ltz=False)
        elif root is TypeRoot.TIMESTAMP_LTZ:
            if isinstance(v, str):
                return parse_timestamp(v, ltz=True)
    except (ValueError, TypeError, InvalidOperation, ArithmeticError, binascii.Error) as exc:
        raise DecodeError(
            f"Failed to deserialize JSON value {_short(v)} as {dtype}: {exc}", format=format, field=field
        ) from exc
    raise DecodeError(
        f"Failed to deserialize JSON value {_short(v)} as {dtype}: unexpected JSON {type(v).__name__}",
        format=format,
        field=field,
    )


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, Decimal) else format(value, "f")
    return text if len(text) <= 60 else text[:57] + "..."


def to_plain(value: Any) -> Any:
    """Parsed JSON with Decimal numbers turned into float (schema-less decoding); ints stay ints."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


# -- whole documents ---------------------------------------------------------------------------------
def _constant(name: str) -> float:
    return float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[name])


_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_constant)
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def loads(data: bytes | str) -> Any:
    """Parse JSON with numbers that have a fraction or exponent as ``Decimal`` (exact).

    Same result and errors as ``json.loads(data, parse_float=Decimal, ...)`` (bytes in UTF-8,
    UTF-16 or UTF-32, as :func:`json.detect_encoding`), with one decoder for every call.

    Raises ValueError (json.JSONDecodeError or UnicodeDecodeError) on malformed input.
    """
    if type(data) is bytes and data[:1] == b"{" and (len(data) < 2 or data[1]):
        # what json.detect_encoding answers for such bytes
        text = data.decode("utf-8", "surrogatepass")
        try:
            obj, end = _SCAN(text, 0)
        except StopIteration:
            end = -1
        if end == len(text):
            return obj
        return _DECODER.decode(text)  # trailing whitespace, extra data: as json.loads
    if type(data) is str and not data.startswith("\ufeff"):
        return _DECODER.decode(data)
    return json.loads(data, parse_float=Decimal, parse_constant=_constant)


def _write(obj: Any, out: list[str], enc: Any) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, str):
        out.append(enc(obj))
    elif isinstance(obj, int):
        out.append(int.__repr__(obj))
    elif isinstance(obj, float):
        out.append(float.__repr__(obj) if math.isfinite(obj) else enc(_non_finite(obj)))
    elif isinstance(obj, Decimal):
        out.append(format(obj, "f") if obj.is_finite() else enc(str(obj)))
    elif isinstance(obj, Mapping):
        out.append("{")
        first = True
        for key, item in obj.items():
            if not first:
                out.append(",")
            first = False
            out.append(enc(str(key)))
            out.append(":")
            _write(item, out, enc)
        out.append("}")
    elif isinstance(obj, (list, tuple)):
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _write(item, out, enc)
        out.append("]")
    else:
        raise TypeError(f"cannot write a {type(obj).__name__} as JSON")


def dumps(obj: Any) -> bytes:
    """Compact JSON (as ``separators=(",", ":")``), UTF-8, key order kept, Decimal as a plain number.

    A string that is not valid UTF-8 text (lone surrogates) makes the whole document ASCII-escaped
    instead. Raises TypeError for values that are not JSON (see :func:`to_json_untyped`).
    """
    out: list[str] = []
    _write(obj, out, encode_basestring)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError:
        out = []
        _write(obj, out, encode_basestring_ascii)
        return "".join(out).encode("ascii")


# -- orjson fast path ----------------------------------------------------------------------------------
#: orjson hands these to ``default`` (which refuses them, so :func:`dumps` decides), instead of
#: writing them its own way: datetimes, dataclasses and subclasses of str/int/dict/list.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
_INF = math.inf


def _orjson_default(obj: Any) -> Any:
    if type(obj) is Decimal:
        # as _write: a plain number (never an exponent), non-finite values as strings
        return orjson.Fragment(format(obj, "f").encode("ascii")) if obj.is_finite() else str(obj)
    raise TypeError(type(obj).__name__)


def _orjson_spells_as_dumps(values: Iterable[Any]) -> bool:
    """True when orjson writes every one of ``values`` as :func:`dumps` does: no nested containers,
    and floats only where orjson's shortest repr equals Python's (zero, or finite with magnitude
    >= 1e-4; below it Python writes ``1e-05`` and orjson ``0.00001``)."""
    for v in values:
        t = type(v)
        if t is float:
            if not (v == 0.0 or 1e-4 <= abs(v) < _INF):
                return False
        elif t is dict or t is list or t is tuple:
            return False
    return True


def dumps_envelope(obj: Any, rows: Iterable[Mapping[str, Any] | None]) -> bytes:
    """:func:`dumps` of a change-event envelope (debezium-json, canal-json), the same bytes, written
    by orjson (compiled) when that is certain to give them.

    ``rows`` are the flat row images inside ``obj``; everything else in ``obj`` must be strings,
    ints, None, booleans and dicts/lists of those (the envelope fields). orjson is used when every
    image value is written alike (:func:`_orjson_spells_as_dumps`); Decimals are written by
    ``default`` as plain numbers. Anything orjson refuses (a lone surrogate, an int beyond 64 bits,
    a datetime, a subclass) falls back to :func:`dumps`, whose result or TypeError then stands.
    """
    for row in rows:
        if row is not None and (type(row) is not dict or not _orjson_spells_as_dumps(row.values())):
            return dumps(obj)
    try:
        return orjson.dumps(obj, default=_orjson_default, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return dumps(obj)


# -- record keys of Flink CDC's Kafka pipeline sink: the TableId, then the primary key (json or csv) --
# Byte-exact with Flink CDC's key serializers (``serialization/JsonSerializationSchema`` /
# ``CsvSerializationSchema`` of flink-cdc-pipeline-connector-kafka), which write the TableId first,
# then the primary-key columns in key order, taken from the before-image for a delete and the
# after-image otherwise:
#
# - ``json``: compact JSON ``{"TableId":"kafka_test.customers","id":4}`` (UTF-8, no spaces);
# - ``csv``: the same fields as one CSV line ``kafka_test.customers,4`` (``,`` delimiter, ``"`` quote
#   only when needed, null as the empty field).
#
# A table without a primary key gets ``{"TableId":"db.t"}``, so hash-by-key puts the whole table in
# one partition. Column values are written as the value formats write them (Flink's JSON
# converters, above: DECIMAL a plain number, TIMESTAMP
# ``yyyy-MM-dd HH:mm:ss[.fff]``...), so murmur2 partitioning agrees with Flink's for the same rows.
#
# Example::
#
#     encode_event_key(event)                  # b'{"TableId":"kafka_test.customers","id":4}'
#     encode_event_key(event, KeyFormat.CSV)   # b'kafka_test.customers,4'


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
    encoders = [(name, json_encoder_for(schema.column(name).type, name)) for name in schema.primary_key]
    _KEY_ENCODERS[id(schema)] = (schema, encoders)
    return encoders


def _compact(obj: Any) -> str:
    return dumps(obj).decode("utf-8")


def encode_table_key(table_text: str, schema: Schema | None, row: Mapping[str, Any] | None,
                     key_format: KeyFormat = KeyFormat.JSON) -> bytes:
    """Key bytes of one row image of table ``table_text`` (``db.table``; see the module docstring).

    ``row`` None (a truncate) or a schema without primary key gives the TableId alone. The json
    key is written by orjson (compiled) where that gives :func:`dumps`' exact bytes
    (:func:`dumps_envelope`), else by ``dumps``.
    Raises EncodeError for a key value that does not fit its column type.
    """
    fields = key_fields(table_text, schema, row)
    if key_format is KeyFormat.JSON:
        obj = dict(fields)
        return dumps_envelope(obj, (obj,))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(["" if v is None else v if isinstance(v, str) else _compact(v) for _, v in fields])
    return buf.getvalue().encode("utf-8")


def table_key_encoder(table_text: str, schema: Schema | None,
                      key_format: KeyFormat = KeyFormat.JSON) -> Callable[[Mapping[str, Any] | None], bytes]:
    """``lambda row: encode_table_key(table_text, schema, row, key_format)`` with the per-table
    work done once, for the many rows of one table: the same bytes and the same EncodeError.

    A json key of one integer primary-key column (the common case) is the fixed text
    ``{"TableId":"<table>","<pk>":`` followed by the integer, as :func:`dumps` and
    orjson both write an ``int``; any other value goes through :func:`encode_table_key`'s path.
    """
    if key_format is not KeyFormat.JSON or schema is None or not schema.primary_key:
        return lambda row: encode_table_key(table_text, schema, row, key_format)
    encoders = _key_encoders(schema)
    envelope = dumps_envelope

    def general(row: Mapping[str, Any] | None) -> bytes:
        if row is None:
            return encode_table_key(table_text, schema, row, key_format)
        obj: dict[str, Any] = {"TableId": table_text}
        for name, encode in encoders:
            obj[name] = encode(row.get(name))
        return envelope(obj, (obj,))

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
        return envelope(obj, (obj,))

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
