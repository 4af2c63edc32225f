"""MySQL's binary JSON (the ``JSON`` column of MySQL 5.7+, binlog type 245) to the document text.

The format is MySQL's ``sql/json_binary.h`` (MariaDB never writes it: its JSON is LONGTEXT)::

    doc        ::= type value
    type       ::= 0x00 small object | 0x01 large object | 0x02 small array | 0x03 large array
                 | 0x04 literal | 0x05 int16 | 0x06 uint16 | 0x07 int32 | 0x08 uint32
                 | 0x09 int64 | 0x0a uint64 | 0x0b double | 0x0c utf8mb4 string | 0x0f opaque
    object     ::= count size key-entry* value-entry* key* value*
    array      ::= count size value-entry* value*
    count/size ::= uint16 (small) | uint32 (large), little-endian
    key-entry  ::= key-offset (uint16 | uint32) key-length (uint16)
    value-entry::= type offset-or-inlined-value (uint16 | uint32)
    string     ::= data-length (7 bits per byte, low first, high bit: more) utf8mb4-data
    opaque     ::= field-type (uint8) data-length utf8mb4-data
    literal    ::= 0x00 null | 0x01 true | 0x02 false

Offsets count from the first byte after the container's type. Literals, int16 and uint16 are
always inlined in the value entry, int32 and uint32 only in large containers. Opaque values of
DECIMAL (precision byte, scale byte, MySQL's binary decimal), DATE / DATETIME / TIMESTAMP and
TIME (MySQL's packed int64: ``(int part << 24) + microseconds``, negative for a negative TIME)
are read as :class:`~decimal.Decimal`, :class:`~datetime.date`, :class:`~datetime.datetime` and
:class:`~datetime.timedelta`; other opaque values as their bytes.

:func:`parse` gives the Python value (dict with str keys in stored order, list, str, int, float,
bool, None, and the opaque values above); :func:`to_text` the document text as
:func:`changelake.connectors.mysql_cdc.values.convert` renders a JSON column (``", "`` and
``": "`` separators, non-ASCII kept); opaque temporals are rendered as MySQL prints them
(``"2024-01-01"``, ``"2024-01-01 12:00:00.000000"``, ``"-01:02:03.000000"``), DECIMAL as the
number, other opaque bytes as MySQL's ``"base64:typeNN:..."``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
from typing import Any

__all__ = ["parse", "to_text", "decode_decimal", "Opaque"]

_DEC_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_INT16, _UINT16, _INT32, _UINT32, _INT64, _UINT64, _DOUBLE = (struct.Struct(c) for c in
                                                            ("<h", "<H", "<i", "<I", "<q", "<Q", "<d"))
# MySQL field types of opaque values read as temporals / decimals
_DECIMALS = frozenset({0, 246})  # DECIMAL, NEWDECIMAL
_DATES = frozenset({10, 14})  # DATE, NEWDATE
_DATETIMES = frozenset({7, 12, 17, 18})  # TIMESTAMP, DATETIME, TIMESTAMP2, DATETIME2
_TIMES = frozenset({11, 19})  # TIME, TIME2


class Opaque(bytes):
    """An opaque value of another MySQL field type (``field_type``), kept as its bytes."""

    field_type: int

    def __new__(cls, data: bytes, field_type: int) -> "Opaque":
        obj = super().__new__(cls, data)
        obj.field_type = field_type
        return obj


def decode_decimal(raw: bytes, precision: int, decimals: int) -> decimal.Decimal:
    """MySQL's binary DECIMAL(precision, decimals) (``decimal2bin`` in ``strings/decimal.c``):
    groups of 9 digits in 4 big-endian bytes, the leftover digits in 1-4 bytes, the sign bit
    flipped, every byte inverted for a negative value."""
    integral = precision - decimals
    uncomp_int, comp_int = divmod(integral, 9)
    uncomp_frac, comp_frac = divmod(decimals, 9)
    size_int, size_frac = _DEC_BYTES[comp_int], _DEC_BYTES[comp_frac]
    total = size_int + 4 * (uncomp_int + uncomp_frac) + size_frac
    if len(raw) < total or total == 0:
        raise ValueError(f"DECIMAL({precision},{decimals}) needs {total} bytes, got {len(raw)}")
    data = bytearray(raw[:total])
    if data[0] & 0x80:
        parts, mask = [""], 0
    else:
        parts, mask = ["-"], -1
    data[0] ^= 0x80
    p = 0
    if size_int:
        parts.append(str(int.from_bytes(data[0:size_int], "big", signed=True) ^ mask))
        p = size_int
    for _ in range(uncomp_int):
        parts.append(f"{int.from_bytes(data[p:p + 4], 'big', signed=True) ^ mask:09d}")
        p += 4
    parts.append(".")
    for _ in range(uncomp_frac):
        parts.append(f"{int.from_bytes(data[p:p + 4], 'big', signed=True) ^ mask:09d}")
        p += 4
    if size_frac:
        parts.append(f"{int.from_bytes(data[p:p + size_frac], 'big', signed=True) ^ mask:0{comp_frac}d}")
    return decimal.Decimal("".join(parts))


def _var_length(data: bytes, pos: int) -> tuple[int, int]:
    """(length, position after it) of a variable-length length (at most 5 bytes)."""
    length = 0
    for i in range(5):
        b = data[pos + i]
        length |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return length, pos + i + 1
    raise ValueError("binary JSON length longer than 5 bytes")


def _packed(data: bytes) -> tuple[bool, int, int]:
    v = _INT64.unpack_from(data, 0)[0]
    negative = v < 0
    v = -v if negative else v
    return negative, v >> 24, v & 0xFFFFFF


def _opaque(field_type: int, data: bytes) -> Any:
    if field_type in _DECIMALS:
        if len(data) < 2:
            raise ValueError("binary JSON DECIMAL without precision and scale")
        return decode_decimal(data[2:], data[0], data[1])
    if field_type in _DATES or field_type in _DATETIMES:
        _, ymdhms, micros = _packed(data)
        ymd, hms = ymdhms >> 17, ymdhms & 0x1FFFF
        ym = ymd >> 5
        y, m, d = ym // 13, ym % 13, ymd & 0x1F
        if field_type in _DATES:
            return dt.date(y, m, d)
        return dt.datetime(y, m, d, hms >> 12, (hms >> 6) & 0x3F, hms & 0x3F, micros)
    if field_type in _TIMES:
        negative, hms, micros = _packed(data)
        delta = dt.timedelta(hours=(hms >> 12) & 0x3FF, minutes=(hms >> 6) & 0x3F, seconds=hms & 0x3F,
                             microseconds=micros)
        return -delta if negative else delta
    return Opaque(data, field_type)


def _value(t: int, data: bytes, pos: int, end: int) -> Any:
    """The value of type ``t`` whose bytes start at ``data[pos]`` (its container ends at ``end``)."""
    if t <= 0x03:
        return _container(data, pos, end, small=t in (0x00, 0x02), is_object=t in (0x00, 0x01))
    if t == 0x04:
        lit = data[pos]
        if lit == 0x00:
            return None
        if lit == 0x01:
            return True
        if lit == 0x02:
            return False
        raise ValueError(f"binary JSON literal 0x{lit:02x}")
    if t == 0x05:
        return _INT16.unpack_from(data, pos)[0]
    if t == 0x06:
        return _UINT16.unpack_from(data, pos)[0]
    if t == 0x07:
        return _INT32.unpack_from(data, pos)[0]
    if t == 0x08:
        return _UINT32.unpack_from(data, pos)[0]
    if t == 0x09:
        return _INT64.unpack_from(data, pos)[0]
    if t == 0x0A:
        return _UINT64.unpack_from(data, pos)[0]
    if t == 0x0B:
        return _DOUBLE.unpack_from(data, pos)[0]
    if t == 0x0C:
        n, pos = _var_length(data, pos)
        if pos + n > end:
            raise ValueError("binary JSON string past its container")
        return data[pos:pos + n].decode("utf-8")
    if t == 0x0F:
        field_type = data[pos]
        n, pos = _var_length(data, pos + 1)
        if pos + n > end:
            raise ValueError("binary JSON opaque value past its container")
        return _opaque(field_type, data[pos:pos + n])
    raise ValueError(f"binary JSON type 0x{t:02x}")


def _container(data: bytes, base: int, end: int, *, small: bool, is_object: bool) -> Any:
    off = _UINT16 if small else _UINT32
    osz = off.size
    count = off.unpack_from(data, base)[0]
    size = off.unpack_from(data, base + osz)[0]
    if base + size > end:
        raise ValueError(f"binary JSON container of {size} bytes past its end")
    stop = base + size
    entries = base + 2 * osz
    values_at = entries + (count * (osz + 2) if is_object else 0)
    vsz = 1 + osz
    if values_at + count * vsz > stop:
        raise ValueError("binary JSON container header larger than the container")
    items = []
    for i in range(count):
        e = values_at + i * vsz
        t = data[e]
        if t in (0x04, 0x05, 0x06) or (not small and t in (0x07, 0x08)):  # inlined
            items.append(_value(t, data, e + 1, e + vsz))
        else:
            items.append(_value(t, data, base + off.unpack_from(data, e + 1)[0], stop))
    if not is_object:
        return items
    out: dict[str, Any] = {}
    for i in range(count):
        e = entries + i * (osz + 2)
        k, n = base + off.unpack_from(data, e)[0], _UINT16.unpack_from(data, e + osz)[0]
        if k + n > stop:
            raise ValueError("binary JSON key past its container")
        out[data[k:k + n].decode("utf-8")] = items[i]
    return out


def parse(data: bytes) -> Any:
    """The Python value of a binary JSON document (``data``: type byte, value).

    Raises:
        ValueError, IndexError, struct.error, UnicodeDecodeError: not a binary JSON document.
    """
    if not data:
        raise ValueError("empty binary JSON document")
    return _value(data[0], data, 1, len(data))


def _text(v: Any) -> str:
    if v is None or v is True or v is False or isinstance(v, (int, float, str)) and not isinstance(v, Opaque):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_text(x) for x in v) + "]"
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        return f'"{v:%Y-%m-%d %H:%M:%S}.{v.microsecond:06d}"'
    if isinstance(v, dt.date):
        return f'"{v:%Y-%m-%d}"'
    if isinstance(v, dt.timedelta):
        micros = abs(v) // dt.timedelta(microseconds=1)
        s, us = divmod(micros, 1_000_000)
        return f'"{"-" if v < dt.timedelta(0) else ""}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{us:06d}"'
    if isinstance(v, Opaque):
        return f'"base64:type{v.field_type}:{base64.b64encode(bytes(v)).decode("ascii")}"'
    raise TypeError(f"not a binary JSON value: {type(v).__name__}")


def to_text(data: bytes) -> str:
    """The document text of a binary JSON document (module doc); errors as :func:`parse`."""
    return _text(parse(data))
