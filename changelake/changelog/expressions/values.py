"""Value-level rules of Flink CDC's CAST, DATE_FORMAT and TO_TIMESTAMP (one row at a time).

CAST follows Flink CDC's conversion table (``transform.md``, "Casting Functions"): any type to
STRING; numbers and strings to BOOLEAN (non-zero numbers are TRUE, a string is TRUE when it is
``true`` ignoring case); numbers (and numeric text) to TINYINT..BIGINT (the fraction truncated, as
Java's ``intValue``; out of range is an error), FLOAT, DOUBLE, DECIMAL(p, s) (rounded HALF_UP to
``s``; more than ``p`` digits is an error, where Flink would give NULL); STRING (ISO local date-time),
DATE and TIMESTAMP_LTZ to TIMESTAMP; STRING and TIMESTAMP to DATE; TIMESTAMP and STRING to
TIMESTAMP_LTZ (read in the pipeline's ``local-time-zone``).

STRING output spells values as Flink: ``true``/``false``, integers plainly, DOUBLE as Java's
``Double.toString`` (``1.0E10``), DECIMAL with its scale, DATE ``yyyy-MM-dd``, TIMESTAMP
``yyyy-MM-dd HH:mm:ss[.fff]`` with the type's fractional digits, TIME ``HH:mm:ss``.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import re
from typing import Any, Callable

from changelake.changelog.expressions.errors import ExpressionError
from changelake.changelog.temporal import format_time, fraction
from changelake.changelog.types import DataType, TypeRoot

__all__ = ["cast_value", "to_string", "java_double", "java_date_formatter", "java_date_parser"]

_INT_RANGE = {
    TypeRoot.TINYINT: (-(2**7), 2**7 - 1), TypeRoot.SMALLINT: (-(2**15), 2**15 - 1),
    TypeRoot.INT: (-(2**31), 2**31 - 1), TypeRoot.BIGINT: (-(2**63), 2**63 - 1),
}
_CTX = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_UP)


def java_double(v: float) -> str:
    """``Double.toString``: plain between 1e-3 and 1e7, else ``d.dddE±n``; always a fraction digit."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if str(v).startswith("-") else "0.0"
    d = decimal.Decimal(repr(v))
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + exp  # position of the decimal point from the left of the digits
    if 1e-3 <= abs(v) < 1e7:
        if point <= 0:
            body = "0." + "0" * (-point) + text
        elif point >= len(text):
            body = text + "0" * (point - len(text)) + ".0"
        else:
            body = text[:point] + "." + text[point:]
    else:
        body = text[0] + "." + (text[1:] or "0") + f"E{point - 1}"
    return ("-" if sign else "") + body


def to_string(v: Any, src: DataType, tz: _dt.tzinfo) -> str:
    """The STRING a value of type ``src`` casts to (see the module docstring)."""
    root = src.root
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return java_double(v)
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, _dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(tz).replace(tzinfo=None)
        prec = src.precision if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ) else 0
        return str(v.strftime("%Y-%m-%d %H:%M:%S")) + fraction(v.microsecond, 6 if prec is None else prec)
    if isinstance(v, _dt.date):
        return v.isoformat()
    if isinstance(v, _dt.timedelta):
        return format_time(v, src.precision or 0)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="replace")
    return str(v)


def _truncate_micros(v: _dt.datetime, precision: int | None) -> _dt.datetime:
    p = 6 if precision is None else max(0, min(precision, 6))
    step = 10 ** (6 - p)
    return v.replace(microsecond=v.microsecond - v.microsecond % step)


def _parse_local_datetime(text: str) -> _dt.datetime:
    s = text.strip()
    try:
        return _dt.datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO local date-time (yyyy-MM-ddTHH:mm:ss[.f])") from None


def cast_value(v: Any, src: DataType, dst: DataType, tz: _dt.tzinfo) -> Any:
    """``CAST(v AS dst)`` for a non-NULL ``v`` of type ``src``.

    Raises:
        ValueError: the value cannot be converted (the message says why).
        ExpressionError: the conversion path does not exist in Flink CDC.
    """
    root = dst.root
    if dst.is_string:
        return to_string(v, src, tz)
    if root is TypeRoot.BOOLEAN:
        if isinstance(v, str):
            return v.lower() == "true"
        if isinstance(v, (int, float, decimal.Decimal)):
            return v != 0
    elif dst.is_integer:
        lo, hi = _INT_RANGE[root]
        n: int | None = None
        if isinstance(v, bool):
            n = int(v)
        elif isinstance(v, int):
            n = v
        elif isinstance(v, (float, decimal.Decimal)):
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError(f"{v} is not a number in the range of {root.value}")
            n = int(v)  # truncation toward zero, as Java's intValue
        elif isinstance(v, str):
            n = int(v.strip())
        if n is not None:
            if not lo <= n <= hi:
                raise ValueError(f"{v} is out of the range of {root.value} ({lo} ~ {hi})")
            return n
    elif root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        if isinstance(v, (bool, int, float, decimal.Decimal)):
            return float(v)
        if isinstance(v, str):
            return float(v.strip())
    elif root is TypeRoot.DECIMAL:
        if isinstance(v, (bool, int, float, decimal.Decimal, str)):
            p, s = dst.precision or 10, dst.scale or 0
            d = decimal.Decimal(repr(v)) if isinstance(v, float) else decimal.Decimal(
                int(v) if isinstance(v, bool) else v.strip() if isinstance(v, str) else v)
            q = d.quantize(decimal.Decimal(1).scaleb(-s), context=_CTX)
            if len(q.as_tuple().digits) > p and q != 0:
                raise ValueError(f"{v} does not fit DECIMAL({p}, {s})")
            return q
    elif root is TypeRoot.TIMESTAMP:
        if isinstance(v, str):
            return _truncate_micros(_parse_local_datetime(v).replace(tzinfo=None), dst.precision)
        if isinstance(v, _dt.datetime):
            if v.tzinfo is not None:
                v = v.astimezone(tz).replace(tzinfo=None)
            return _truncate_micros(v, dst.precision)
        if isinstance(v, _dt.date):
            return _dt.datetime(v.year, v.month, v.day)
    elif root is TypeRoot.TIMESTAMP_LTZ:
        if isinstance(v, str):
            v = _parse_local_datetime(v)
        if isinstance(v, _dt.datetime):
            aware = v if v.tzinfo is not None else v.replace(tzinfo=tz)
            return _truncate_micros(aware.astimezone(_dt.timezone.utc), dst.precision)
    elif root is TypeRoot.DATE:
        if isinstance(v, str):
            return _dt.date.fromisoformat(v.strip()[:10])
        if isinstance(v, _dt.datetime):
            return (v.astimezone(tz) if v.tzinfo is not None else v).date()
        if isinstance(v, _dt.date):
            return v
    elif root is TypeRoot.TIME:
        if isinstance(v, _dt.timedelta):
            return v
        if isinstance(v, str):
            t = _dt.time.fromisoformat(v.strip())
            return _dt.timedelta(hours=t.hour, minutes=t.minute, seconds=t.second, microseconds=t.microsecond)
        if isinstance(v, _dt.datetime):
            return _dt.timedelta(hours=v.hour, minutes=v.minute, seconds=v.second, microseconds=v.microsecond)
    elif dst.is_binary:
        if isinstance(v, str):
            return v.encode("utf-8")
        if isinstance(v, (bytes, bytearray)):
            return bytes(v)
    raise ExpressionError(f"cannot CAST a {src} value AS {dst}")


# -- Java SimpleDateFormat patterns ----------------------------------------------------------------
_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|.", re.S)
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _formatter_token(tok: str) -> Callable[[_dt.datetime], str]:
    if tok.startswith("'"):
        lit = tok[1:-1].replace("''", "'") if tok != "''" else "'"
        return lambda d: lit
    c, n = tok[0], len(tok)
    if not c.isalpha():
        return lambda d: tok
    if c == "y":
        return (lambda d: f"{d.year % 100:02d}") if n == 2 else (lambda d: f"{d.year:0{n}d}")
    if c == "M":
        if n >= 4:
            return lambda d: _MONTHS[d.month - 1]
        if n == 3:
            return lambda d: _MONTHS[d.month - 1][:3]
        return lambda d: f"{d.month:0{n}d}"
    simple: dict[str, Callable[[_dt.datetime], int]] = {"d": lambda d: d.day, "H": lambda d: d.hour, "m": lambda d: d.minute, "s": lambda d: d.second,
              "h": lambda d: (d.hour % 12) or 12, "k": lambda d: d.hour or 24, "K": lambda d: d.hour % 12,
              "D": lambda d: d.timetuple().tm_yday}
    if c in simple:
        get: Callable[[_dt.datetime], int] = simple[c]
        return lambda d: f"{get(d):0{n}d}"
    if c == "S":
        return lambda d: f"{d.microsecond // 1000:0{n}d}" if n <= 3 else f"{d.microsecond:06d}"[:n].ljust(n, "0")
    if c == "a":
        return lambda d: "AM" if d.hour < 12 else "PM"
    if c == "E":
        return (lambda d: _DAYS[d.weekday()]) if n >= 4 else (lambda d: _DAYS[d.weekday()][:3])
    raise ExpressionError(f"date format letter {c!r} ({tok!r}) is not supported")


def java_date_formatter(pattern: str) -> Callable[[_dt.datetime], str]:
    """A function formatting a datetime with a Java ``SimpleDateFormat`` pattern (``yyyy-MM-dd HH:mm:ss``).

    Raises:
        ExpressionError: a pattern letter changelake does not support.
    """
    parts = [_formatter_token(m.group(0)) for m in _TOKEN.finditer(pattern)]
    return lambda d: "".join(p(d) for p in parts)


_STRP = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "M": "%m", "dd": "%d", "d": "%d", "HH": "%H", "H": "%H",
         "mm": "%M", "m": "%M", "ss": "%S", "s": "%S", "MMM": "%b", "MMMM": "%B", "a": "%p", "hh": "%I"}


def java_date_parser(pattern: str) -> Callable[[str], _dt.datetime]:
    """A function parsing text with a Java ``SimpleDateFormat`` pattern into a naive datetime.

    Raises:
        ExpressionError: a pattern letter changelake does not support.
    """
    out: list[str] = []
    for m in _TOKEN.finditer(pattern):
        tok = m.group(0)
        if tok.startswith("'"):
            out.append(tok[1:-1].replace("''", "'").replace("%", "%%"))
        elif tok[0] == "S":
            out.append("%f")
        elif tok[0].isalpha():
            if tok not in _STRP:
                raise ExpressionError(f"date format {tok!r} in {pattern!r} is not supported for parsing")
            out.append(_STRP[tok])
        else:
            out.append(tok.replace("%", "%%"))
    fmt = "".join(out)
    return lambda text: _dt.datetime.strptime(text, fmt)
