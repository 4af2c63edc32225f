"""ONE conversion of MySQL values to changelake Python values, for both capture paths.

:func:`convert` accepts either form a value arrives in:

* the snapshot path: PyMySQL's *text protocol* without decoders (``str`` for numbers, temporals and
  text, ``bytes`` for binary-charset data, as the server prints them with ``time_zone='+00:00'``);
* the binlog path: mysql-replication's raw Python values (int, float, Decimal, timedelta, naive
  datetime, bit strings, ``set`` ...), decoded with FULL row metadata.

and returns the value of the column's changelake type (see :mod:`changelake.changelog.types`).
The binlog is read in production by :mod:`.binlog.row_decoder` alone, which gives the same values;
the second form and :func:`library_rows` are its *test oracle* (held to it by
``tests/integration/mysql_cdc/test_mysql_cdc_row_decoder.py``). The snapshot reads with
:func:`convert`:

========================  ==============================================================
MySQL                     Python value
========================  ==============================================================
integers                  ``int`` (unsigned exact; TINYINT(1) -> ``bool``; BIGINT UNSIGNED -> ``Decimal``)
DECIMAL(p, s)             ``Decimal`` with exactly ``s`` fraction digits (``str`` if p > 38)
FLOAT                     ``float`` whose repr is the shortest decimal that round-trips float32 (5.15)
DOUBLE                    ``float``
BIT(1) / BIT(n)           ``bool`` / ``bytes`` of ceil(n/8), little-endian as Debezium's BIT converter
YEAR                      ``int`` (0 for 0000)
DATE                      ``date``; zero or partial dates -> None (Debezium, documented)
TIME(p)                   ``timedelta`` (negative and > 24 h kept)
DATETIME(p)               naive ``datetime`` (wall clock)
TIMESTAMP(p)              aware ``datetime`` in UTC; zero -> None
CHAR/VARCHAR/TEXT         ``str`` (CHAR trailing spaces removed, as MySQL returns it)
BINARY(N)                 ``bytes`` right-padded with 0x00 to N, as MySQL returns it
VARBINARY/BLOB            ``bytes``
ENUM                      ``str`` (``''`` for the invalid index 0)
SET                       ``str``: labels comma-separated in definition order (``''`` when empty)
JSON                      ``str``: the document text (MariaDB keeps JSON as text; MySQL's binary JSON: ``binlog.binary_json``)
GEOMETRY                  ``str``: Flink CDC's GeoJSON-like ``{"coordinates":...,"type":...,"srid":...}``
========================  ==============================================================
"""

from __future__ import annotations

import codecs
import datetime as dt
import decimal
import json
import re
import struct
from typing import Any

from changelake.changelog.decimals import ARITHMETIC
from changelake.changelog.event import Op
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.schema.columns import INTEGER_BITS, MySqlColumn
from changelake.formats.json_values import float32_shortest
from changelake.connectors.mysql_cdc.binlog.geometry import geometry_to_json

__all__ = ["convert", "library_rows", "parse_time", "EMPTY_SET"]

#: mysql-replication's ``none_sources`` marker for an empty SET (which it returns as None).
EMPTY_SET = "empty set"
_UTC = dt.timezone.utc
_TIME_RE = re.compile(r"^(-)?(\d+):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?$")
_DATETIME_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?)?$")


def parse_time(text: str) -> dt.timedelta:
    """Parse MySQL TIME text ``[-]H+:MM:SS[.ffffff]`` into a timedelta (sign applies to the whole)."""
    m = _TIME_RE.match(text.strip())
    if not m:
        raise ValueError(f"not a MySQL TIME value: {text!r}")
    sign, h, mi, s, frac = m.groups()
    micros = int((frac or "").ljust(6, "0")) if frac else 0
    delta = dt.timedelta(hours=int(h), minutes=int(mi), seconds=int(s), microseconds=micros)
    return -delta if sign else delta


def _parse_datetime(text: str) -> dt.datetime | dt.date | None:
    m = _DATETIME_RE.match(text.strip())
    if not m:
        return None
    y, mo, d, h, mi, s, frac = m.groups()
    try:
        if h is None:
            return dt.date(int(y), int(mo), int(d))
        return dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), int((frac or "0").ljust(6, "0")))
    except ValueError:  # zero or partial date such as 0000-00-00 or 2015-00-21
        return None


def _text(raw: Any) -> str:
    return raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else str(raw)


def _decimal(raw: Any, col: MySqlColumn) -> decimal.Decimal | str:
    value = raw if isinstance(raw, decimal.Decimal) else decimal.Decimal(_text(raw))
    scale = col.scale or 0
    if (col.precision or 10) > 38:
        return format(value, "f")
    # MySQL's value has the column's digits already; ARITHMETIC's 80 digits only fix the scale
    return value.quantize(decimal.Decimal(1).scaleb(-scale), context=ARITHMETIC)


def _integer(raw: Any, col: MySqlColumn) -> int | bool | decimal.Decimal:
    value = raw if isinstance(raw, int) else int(_text(raw))
    if col.unsigned and value < 0:  # read as signed (no FULL metadata): undo two's complement
        value += 1 << INTEGER_BITS[col.kind]
    if col.kind == "tinyint" and col.width == 1 and not col.unsigned:
        return value != 0
    if col.kind == "bigint" and col.unsigned:
        return decimal.Decimal(value)
    return value


def _bit(raw: Any, col: MySqlColumn) -> bool | bytes:
    bits = col.precision or 1
    if isinstance(raw, str) and set(raw) <= {"0", "1"} and raw:  # binlog: "1000000001"
        value = int(raw, 2)
    elif isinstance(raw, (bytes, bytearray)):  # text protocol: big-endian bytes
        value = int.from_bytes(raw, "big")
    else:
        value = int(raw)
    if bits == 1:
        return value != 0
    return value.to_bytes((bits + 7) // 8, "little")


def _year(raw: Any, from_binlog: bool) -> int:
    value = raw if isinstance(raw, int) else int(_text(raw))
    # the binlog stores YEAR as (year - 1900) in one byte, 0 meaning 0000; mysql-replication adds 1900.
    return 0 if from_binlog and value == 1900 else value


def _set(raw: Any, col: MySqlColumn) -> str:
    if isinstance(raw, (set, frozenset, list, tuple)):
        members = {str(v) for v in raw}
        if col.labels:
            return ",".join(label for label in col.labels if label in members)
        return ",".join(sorted(members))
    return _text(raw)


def _json_text(raw: Any) -> str:
    if isinstance(raw, (bytes, bytearray)):
        return raw.decode("utf-8")
    if isinstance(raw, str):
        return raw

    def plain(v: Any) -> Any:
        if isinstance(v, (bytes, bytearray)):
            return v.decode("utf-8")
        if isinstance(v, dict):
            return {plain(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    # MySQL's binary JSON (MySQL 8 only): rendered as MySQL prints JSON ("key": value, ", " separators).
    return json.dumps(plain(raw), ensure_ascii=False, separators=(", ", ": "))


def convert(col: MySqlColumn, raw: Any, *, from_binlog: bool = False, none_source: str | None = None) -> Any:
    """Convert one raw value of ``col`` to its changelake Python value (table in the module doc).

    Args:
        col: the column (kind, unsignedness, precision, labels...).
        raw: PyMySQL text-protocol value (str/bytes) or mysql-replication value; None is NULL.
        from_binlog: True for mysql-replication values (YEAR 0000 arrives as 1900).
        none_source: mysql-replication's reason for a None (``"empty set"`` -> ``''``).

    Raises:
        ValueError: the raw value cannot be read as the column's type (names the column).
    """
    if raw is None:
        if none_source == EMPTY_SET and col.kind == "set":
            return ""
        return None
    try:
        return _convert(col, raw, from_binlog)
    except (ValueError, TypeError, ArithmeticError, struct.error) as exc:
        raise ValueError(f"cannot convert value of column {col.name!r} ({col.kind}): {exc}") from exc


def _convert(col: MySqlColumn, raw: Any, from_binlog: bool) -> Any:
    k = col.kind
    if k in INTEGER_BITS:
        return _integer(raw, col)
    if k == "decimal":
        return _decimal(raw, col)
    if k == "float":
        return float32_shortest(raw if isinstance(raw, float) else float(_text(raw)))
    if k == "double":
        return raw if isinstance(raw, float) else float(_text(raw))
    if k == "bit":
        return _bit(raw, col)
    if k == "year":
        return _year(raw, from_binlog)
    if k == "date":
        if isinstance(raw, dt.datetime):
            return raw.date()
        if isinstance(raw, dt.date):
            return raw
        parsed = _parse_datetime(_text(raw))
        return parsed.date() if isinstance(parsed, dt.datetime) else parsed
    if k == "time":
        return raw if isinstance(raw, dt.timedelta) else parse_time(_text(raw))
    if k in ("datetime", "timestamp"):
        if isinstance(raw, dt.datetime):
            value: dt.datetime | None = raw
        else:
            parsed = _parse_datetime(_text(raw))
            value = parsed if isinstance(parsed, dt.datetime) else None
        if value is None:
            return None
        if k == "datetime":
            return value.replace(tzinfo=None)
        if value.tzinfo is None:
            value = value.replace(tzinfo=_UTC)
        if from_binlog and value == dt.datetime(1970, 1, 1, tzinfo=_UTC):
            return None  # the zero TIMESTAMP is stored as epoch 0 (not a valid TIMESTAMP value)
        return value.astimezone(_UTC)
    if k in ("char", "varchar", "text", "enum"):
        text = raw.decode(_python_codec(col.charset)) if isinstance(raw, (bytes, bytearray)) else str(raw)
        return text.rstrip(" ") if k == "char" else text
    if k == "set":
        return _set(raw, col)
    if k == "json":
        return _json_text(raw)
    if k in ("binary", "varbinary", "blob"):
        data = bytes(raw) if isinstance(raw, (bytes, bytearray)) else str(raw).encode("latin-1")
        if k == "binary" and col.length and len(data) < col.length:
            data = data.ljust(col.length, b"\x00")  # the binlog drops BINARY(N)'s trailing zeros
        return data
    if k == "geometry":
        return geometry_to_json(bytes(raw) if isinstance(raw, (bytes, bytearray)) else str(raw).encode("latin-1"))
    return raw


def _mysql_latin1_search(name: str) -> codecs.CodecInfo | None:
    """MySQL's latin1 is cp1252 with the five bytes cp1252 leaves undefined mapped to U+0081 etc."""
    if name not in ("mysql_latin1", "mysql-latin1"):
        return None
    table = "".join(bytes([b]).decode("cp1252", errors="ignore") or chr(b) for b in range(256))
    encoding_table = codecs.charmap_build(table)

    def encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
        return codecs.charmap_encode(text, errors, encoding_table)

    def decode(data: Any, errors: str = "strict") -> tuple[str, int]:
        return codecs.charmap_decode(data, errors, table)

    return codecs.CodecInfo(encode, decode, name="mysql-latin1")


codecs.register(_mysql_latin1_search)

#: MySQL character set -> Python codec (MySQL's latin1 is cp1252 plus 5 C1 controls; utf16/utf32/ucs2 are big-endian).
_CODECS = {
    "utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "latin1": "mysql-latin1", "ascii": "ascii",
    "utf16": "utf-16-be", "ucs2": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be",
    "koi8r": "koi8_r", "koi8u": "koi8_u", "sjis": "shift_jis", "ujis": "euc_jp", "eucjpms": "euc_jp",
    "euckr": "euc_kr", "gb2312": "gb2312", "gbk": "gbk", "gb18030": "gb18030", "big5": "big5", "cp932": "cp932",
    "tis620": "tis_620", "greek": "iso8859_7", "hebrew": "iso8859_8", "latin2": "iso8859_2", "latin5": "iso8859_9",
    "latin7": "iso8859_13", "cp1250": "cp1250", "cp1251": "cp1251", "cp1256": "cp1256", "cp1257": "cp1257",
    "cp850": "cp850", "cp852": "cp852", "cp866": "cp866", "macroman": "mac_roman", "macce": "mac_latin2",
}


def python_codec(charset: str | None) -> str:
    """Python codec for a MySQL character set name (default utf-8)."""
    return _CODECS.get((charset or "utf8mb4").lower(), (charset or "utf-8"))


_python_codec = python_codec


# -- the test oracle of the binlog row decoder --------------------------------------------------


def library_rows(ev: Any, columns: tuple[MySqlColumn, ...]) -> list[tuple[Op, Any, Any]]:
    """The rows of a rows event as mysql-replication reads them, converted by :func:`convert`:
    the *test oracle* of :mod:`~changelake.connectors.mysql_cdc.binlog.row_decoder` (tests
    decode the same bytes both ways and require identical values); no production path reads
    rows this way. ``ev``: the library's rows event, or a framed one (its packet is handed to the
    library). Returns (op, before, after) per row, as ``EventHandler._rows``.

    Raises:
        SourceError: a value :func:`convert` cannot read.
    """
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    if hasattr(ev, "library_event"):  # row_decoder.FramedRows
        ev = ev.library_event()
    out: list[tuple[Op, Any, Any]] = []
    for row in ev.rows:
        if isinstance(ev, UpdateRowsEvent):
            out.append((Op.UPDATE, _values(columns, row["before_values"], row.get("before_none_sources", {})),
                        _values(columns, row["after_values"], row.get("after_none_sources", {}))))
        elif isinstance(ev, WriteRowsEvent):
            out.append((Op.CREATE, None, _values(columns, row["values"], row.get("none_sources", {}))))
        elif isinstance(ev, DeleteRowsEvent):
            out.append((Op.DELETE, _values(columns, row["values"], row.get("none_sources", {})), None))
    return out


#: fast paths of _values: binlog values that are already the changelake value.
_AS_IS_INT, _AS_IS_STR, _RSTRIP = 1, 2, 3
_PLANS: dict[int, tuple[tuple[Any, ...], tuple[tuple[str, int, Any], ...]]] = {}


def _plan(cols: tuple[Any, ...]) -> tuple[tuple[str, int, Any], ...]:
    """Per column: (name, fast path, column). Signed integers other than TINYINT(1) arrive as
    the final int, VARCHAR/TEXT/ENUM as the final str, CHAR as str with trailing spaces to drop;
    everything else goes through :func:`values.convert`."""
    hit = _PLANS.get(id(cols))  # by identity: a schema's columns tuple is shared by its rows
    if hit is not None and hit[0] is cols:
        return hit[1]
    out = []
    for c in cols:
        fast = 0
        if c.kind in ("smallint", "mediumint", "int", "bigint") and not c.unsigned:
            fast = _AS_IS_INT
        elif c.kind == "tinyint" and not c.unsigned and c.width != 1:
            fast = _AS_IS_INT
        elif c.kind in ("varchar", "text", "enum"):
            fast = _AS_IS_STR
        elif c.kind == "char":
            fast = _RSTRIP
        out.append((c.name, fast, c))
    plan = tuple(out)
    if len(_PLANS) > 10_000:
        _PLANS.clear()
    _PLANS[id(cols)] = (cols, plan)
    return plan


def _values(cols: tuple[Any, ...], raw: dict[str, Any], none_sources: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        for name, fast, col in _plan(cols):
            v = raw.get(name)
            if fast == _AS_IS_INT and type(v) is int:
                out[name] = v
            elif fast == _AS_IS_STR and type(v) is str:
                out[name] = v
            elif fast == _RSTRIP and type(v) is str:
                out[name] = v.rstrip(" ")
            else:
                out[name] = convert(col, v, from_binlog=True, none_source=none_sources.get(name))
    except ValueError as exc:
        raise SourceError(str(exc)) from exc
    return out
