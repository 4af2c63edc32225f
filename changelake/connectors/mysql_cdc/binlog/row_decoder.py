"""Per-table compiled row decoder: a rows event's row images straight to changelake values.

The one production reader of binlog *rows*. mysql-replication frames the events and parses the
table maps (and, through :func:`install_framer`, most rows events are framed from the raw packet
without it); reading the rows with the library's generic per-column ``if`` chain was half of the
binlog reader's time. For a table map (the library's ``Table`` columns, reused as long as the
map's bytes do not change, see :mod:`._replication_fixes`) and the table's
:class:`~.schema.tracker.TableSchema`, :func:`decoder_for` builds once a :class:`RowDecoder`:
runs of NOT NULL fixed-width columns are read with one precomputed :class:`struct.Struct`, every
other column by a small closure chosen for its binlog type, and each value comes out as the
changelake value :func:`~changelake.connectors.mysql_cdc.values.convert` gives for the library's
value. The library's reading (:func:`~changelake.connectors.mysql_cdc.values.library_rows`) is
the *test oracle*: ``tests/integration/mysql_cdc/test_mysql_cdc_row_decoder.py`` decodes the same
bytes both ways and requires identical values and types.

Binlog types read: TINY/SHORT/INT24/LONG/LONGLONG, YEAR, FLOAT, DOUBLE, NEWDECIMAL, VARCHAR/STRING
(CHAR, VARCHAR, BINARY, VARBINARY), BLOB (TEXT, BLOB), DATE, TIME2, DATETIME2, TIMESTAMP2, the
pre-5.6 TIME/DATETIME/TIMESTAMP (MariaDB with ``mysql56_temporal_format=OFF`` at CREATE time),
ENUM, SET, BIT, GEOMETRY and MySQL's binary JSON (:mod:`.binary_json`). Facts a table map lacks
without FULL metadata (``binlog_row_metadata=MINIMAL``: names, signedness, charsets, ENUM/SET
labels) come from the schema; BINARY/VARBINARY/BLOB are always their bytes. Events:
WRITE/UPDATE/DELETE_ROWS v1 and v2 and MariaDB's compressed v1 (``log_bin_compress``: the row
images uncompressed by :mod:`.compression`). Where the library was wrong the decoder is not: a
negative pre-5.6 TIME (the library reads it unsigned), a MINIMAL table map's ENUM (None), latin1
text (read as utf-8) and binary columns (text), a compressed event's DECIMALs, a top-level JSON
string or null.

There is no fallback: a column the decoder does not read raises :class:`UndecodableColumnError`
when the decoder is built, bytes it cannot read when the images are read
(:meth:`RowDecoder.diagnose` names the column), and ``EventHandler`` stops with an
``UnsupportedBinlogEventError`` naming the table, the column, the binlog file and position. Not
read, so refused: MariaDB 5.3's TIME(n)/DATETIME(n)/TIMESTAMP(n) with n > 0 created with
``mysql56_temporal_format=OFF`` (another format, with no fsp in the table map: the schema's
precision tells them apart), NEWDATE (never in a binlog), MySQL's PARTIAL_UPDATE_ROWS_EVENT
(``binlog_row_value_options=PARTIAL_JSON``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any, Callable

from changelake.connectors.mysql_cdc.binlog import _replication_fixes, binary_json
from changelake.connectors.mysql_cdc.binlog._replication_fixes import FRACTION_BYTES, decode_time2
from changelake.connectors.mysql_cdc.binlog.compression import CompressedPayloadError, uncompress
from changelake.connectors.mysql_cdc.binlog.framed_events import (GTID_CODE, XID_CODE, FramedMariadbGtid, FramedXid,
                                                              frame_gtid_or_xid)
from changelake.connectors.mysql_cdc.schema.columns import MySqlColumn
from changelake.connectors.mysql_cdc.binlog.geometry import geometry_to_json
from changelake.connectors.mysql_cdc.values import python_codec
from changelake.formats.json_values import float32_shortest

__all__ = ["FRAMED_CODES", "FramedRows", "FramedTableMap", "ROWS_EVENT_KINDS", "RowDecoder", "UndecodableColumnError", "decoder_for",
           "frame_packet", "frame_rows", "framed_classes", "install_framer", "rows_bytes"]

_UTC = dt.timezone.utc

# binlog field types (pymysqlreplication.constants.FIELD_TYPE)
_TINY, _SHORT, _LONG, _FLOAT, _DOUBLE, _LONGLONG, _INT24 = 1, 2, 3, 4, 5, 8, 9
_DATE, _YEAR, _VARCHAR, _NEWDECIMAL, _ENUM, _BLOB, _STRING = 10, 13, 15, 246, 247, 252, 254
_TIMESTAMP2, _DATETIME2, _TIME2 = 17, 18, 19
_BIT, _SET, _GEOMETRY = 16, 248, 255
_TIMESTAMP, _TIME, _DATETIME, _JSON = 7, 11, 12, 245  # the pre-5.6 temporal formats; MySQL's binary JSON

#: fixed-width integer types: (bytes, struct code signed, struct code unsigned); INT24 has no code.
_INTS = {_TINY: (1, "b", "B"), _SHORT: (2, "h", "H"), _LONG: (4, "i", "I"), _LONGLONG: (8, "q", "Q")}
_FIXED = {_FLOAT: (4, "f"), _DOUBLE: (8, "d"), _YEAR: (1, "B")}
_TEXT_KINDS = frozenset({"char", "varchar", "text", "enum"})
_BYTES_KINDS = frozenset({"binary", "varbinary", "blob"})
_DEC_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)

#: one column step: (data, position, null bits of the image, output dict) -> new position
Step = Callable[[bytes, int, int, dict[str, Any]], int]


class _Unsupported(Exception):
    """A column the compiled decoder does not read (becomes an :class:`UndecodableColumnError`)."""


class UndecodableColumnError(ValueError):
    """A column (or row image) the decoder cannot read: the reader stops on it.

    Attributes:
        column: the column's name, or None when the table map does not match the schema at all.
        reason: why (binlog field type, charset, truncated or invalid bytes...).
    """

    def __init__(self, column: str | None, reason: str) -> None:
        self.column, self.reason = column, reason
        super().__init__(f"column {column!r}: {reason}" if column is not None else reason)


def _int_final(col: MySqlColumn) -> Callable[[int], Any] | None:
    """The conversion of :func:`values._integer` for a value read with the column's signedness."""
    if col.kind == "tinyint" and col.width == 1 and not col.unsigned:
        return lambda v: v != 0
    if col.kind == "bigint" and col.unsigned:
        return decimal.Decimal
    if col.kind not in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        raise _Unsupported(col.kind)
    return None


def _fixed_item(lib: Any, col: MySqlColumn) -> tuple[str, Callable[[Any], Any] | None] | None:
    """(struct code, final conversion) of a fixed-width column read in one struct, or None."""
    t = int(lib.type)
    if t in _INTS:
        _, signed, unsigned = _INTS[t]
        # the schema's signedness: a table map without FULL metadata marks every column signed
        return (unsigned if col.unsigned else signed), _int_final(col)
    if t == _FLOAT:
        if col.kind != "float":
            raise _Unsupported(col.kind)
        return "f", float32_shortest
    if t == _DOUBLE:
        if col.kind != "double":
            raise _Unsupported(col.kind)
        return "d", None
    if t == _YEAR:
        if col.kind != "year":
            raise _Unsupported(col.kind)
        return "B", lambda b: 0 if b == 0 else b + 1900  # values._year: the binlog's 0 is YEAR 0000
    return None


def _fsp_reader(fsp: int) -> tuple[int, Callable[[bytes, int], int]]:
    """(bytes, reader) of the fractional seconds that follow DATETIME2/TIMESTAMP2 (microseconds)."""
    n = FRACTION_BYTES[fsp]
    scale = 10 ** (6 - fsp)
    odd = fsp % 2 == 1

    def read(data: bytes, pos: int) -> int:
        v = int.from_bytes(data[pos:pos + n], "big", signed=True)
        if odd:
            v = int(v / 10)
        return int(v * scale)

    return n, read


def _string_step(name: str, lib: Any, col: MySqlColumn, index: int, nullable: bool) -> Step:
    t = int(lib.type)
    if t == _BLOB:
        size = int(lib.length_size)
    else:
        size = 2 if int(lib.max_length) > 255 else 1
    # the codec of the column's charset: the table map's (FULL metadata) as the library reads it,
    # else the schema's (binlog_row_metadata=MINIMAL maps carry no charset)
    charset = getattr(lib, "character_set_name", None)
    kind = col.kind
    if kind in _TEXT_KINDS:
        codec = _codec_or_none(_library_encoding(str(charset))) if charset is not None else None
        if codec is None:
            codec = python_codec(col.charset)
            if _codec_or_none(codec) is None:
                raise _Unsupported(f"character set {col.charset!r} has no Python codec")
        strip = kind == "char"
        text = True
    elif kind in _BYTES_KINDS:  # binary charset: the bytes, whatever the table map says
        codec, strip, text = "", False, False
    else:
        raise _Unsupported(f"{kind} column in a string field (binlog type {t})")
    pad = int(col.length or 0) if kind == "binary" else 0
    bit = 1 << index

    if size == 1:
        def length(data: bytes, pos: int) -> int:
            return data[pos]
    elif size == 2:
        def length(data: bytes, pos: int) -> int:
            return data[pos] | (data[pos + 1] << 8)
    else:
        def length(data: bytes, pos: int) -> int:
            return int.from_bytes(data[pos:pos + size], "little")

    if text and size == 1 and strip:
        def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            if nulls & bit:
                out[name] = None
                return pos
            n = data[pos]
            pos += 1
            out[name] = data[pos:pos + n].decode(codec).rstrip(" ")
            return pos + n
    elif text:
        def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            if nulls & bit:
                out[name] = None
                return pos
            n = length(data, pos)
            pos += size
            v = data[pos:pos + n].decode(codec)
            out[name] = v.rstrip(" ") if strip else v
            return pos + n
    else:
        def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            if nulls & bit:
                out[name] = None
                return pos
            n = length(data, pos)
            pos += size
            v = bytes(data[pos:pos + n])
            if pad and len(v) < pad:
                v = v.ljust(pad, b"\x00")  # the binlog drops BINARY(N)'s trailing zeros
            out[name] = v
            return pos + n
    return step


def _library_encoding(charset: str) -> str:
    from pymysqlreplication.row_event import RowsEvent  # patched by _replication_fixes.apply()

    return str(RowsEvent.charset_to_encoding(charset))


def _codec_or_none(enc: str) -> str | None:
    import codecs

    try:
        codecs.lookup(enc)
    except LookupError:
        return None  # the library keeps the bytes ("binary", unknown charsets)
    return enc


def _decimal_step(name: str, lib: Any, col: MySqlColumn, index: int) -> Step:
    if col.kind != "decimal":
        raise _Unsupported(col.kind)
    precision, decimals = int(lib.precision), int(lib.decimals)
    integral = precision - decimals
    uncomp_int, comp_int = divmod(integral, 9)
    uncomp_frac, comp_frac = divmod(decimals, 9)
    size_int, size_frac = _DEC_BYTES[comp_int], _DEC_BYTES[comp_frac]
    total = size_int + 4 * (uncomp_int + uncomp_frac) + size_frac
    bit = 1 << index
    wide = (col.precision or 10) > 38  # values._decimal: DECIMAL(p > 38) as its plain text

    def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
        if nulls & bit:
            out[name] = None
            return pos
        # RowsEvent.__read_new_decimal, on the bytes with the sign bit flipped
        raw = bytearray(data[pos:pos + total])
        first = raw[0]
        if first & 0x80:
            parts, mask = [""], 0
        else:
            parts, mask = ["-"], -1
        raw[0] = first ^ 0x80
        p = 0
        if size_int:
            parts.append(str(int.from_bytes(raw[0:size_int], "big", signed=True) ^ mask))
            p = size_int
        for _ in range(uncomp_int):
            parts.append(f"{int.from_bytes(raw[p:p + 4], 'big', signed=True) ^ mask:09d}")
            p += 4
        parts.append(".")
        for _ in range(uncomp_frac):
            parts.append(f"{int.from_bytes(raw[p:p + 4], 'big', signed=True) ^ mask:09d}")
            p += 4
        if size_frac:
            parts.append(f"{int.from_bytes(raw[p:p + size_frac], 'big', signed=True) ^ mask:0{comp_frac}d}")
        # exactly `decimals` fraction digits already (values._decimal's quantize is a no-op on them)
        value = decimal.Decimal("".join(parts))
        out[name] = format(value, "f") if wide else value
        return pos + total

    return step


def _temporal_step(name: str, lib: Any, col: MySqlColumn, index: int) -> Step:
    t = int(lib.type)
    bit = 1 << index
    if t == _DATE:
        if col.kind != "date":
            raise _Unsupported(col.kind)

        def date_step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            if nulls & bit:
                out[name] = None
                return pos
            v = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
            y, m, d = (v >> 9) & 0x7FFF, (v >> 5) & 0xF, v & 0x1F
            out[name] = None if (y == 0 or m == 0 or d == 0) else dt.date(y, m, d)  # zero/partial -> None
            return pos + 3

        return date_step
    if t in (_TIME, _DATETIME, _TIMESTAMP):
        return _old_temporal_step(name, t, col, bit)
    fsp = int(getattr(lib, "fsp", 0) or 0)
    nfrac, frac = _fsp_reader(fsp)
    if t == _TIME2:
        if col.kind != "time":
            raise _Unsupported(col.kind)
        width = 3 + nfrac

        def time_step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            if nulls & bit:
                out[name] = None
                return pos
            out[name] = decode_time2(data[pos:pos + width], fsp)
            return pos + width

        return time_step
    if t == _DATETIME2:
        if col.kind != "datetime":
            raise _Unsupported(col.kind)

        def datetime_step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            if nulls & bit:
                out[name] = None
                return pos
            v = int.from_bytes(data[pos:pos + 5], "big")
            ym = (v >> 22) & 0x1FFFF
            try:
                value: dt.datetime | None = dt.datetime(ym // 13, ym % 13, (v >> 17) & 0x1F, (v >> 12) & 0x1F,
                                                        (v >> 6) & 0x3F, v & 0x3F)
            except ValueError:  # zero or partial date: mysql-replication returns None
                value = None
            if value is not None and nfrac:
                micros = frac(data, pos + 5)
                if micros > 0:
                    value = value.replace(microsecond=micros)
            out[name] = value
            return pos + 5 + nfrac

        return datetime_step
    if t == _TIMESTAMP2:
        if col.kind != "timestamp":
            raise _Unsupported(col.kind)

        def timestamp_step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            if nulls & bit:
                out[name] = None
                return pos
            seconds = int.from_bytes(data[pos:pos + 4], "big", signed=True)
            micros = frac(data, pos + 4) if nfrac else 0
            if seconds == 0 and micros == 0:
                out[name] = None  # the zero TIMESTAMP is stored as epoch 0 (values.convert)
            else:
                value = dt.datetime.fromtimestamp(seconds, _UTC)
                out[name] = value.replace(microsecond=micros) if micros > 0 else value
            return pos + 4 + nfrac

        return timestamp_step
    raise _Unsupported(f"binlog type {t}")


def _old_temporal_step(name: str, t: int, col: MySqlColumn, bit: int) -> Step:
    """The pre-5.6 formats (MySQL < 5.6, MariaDB with ``mysql56_temporal_format=OFF`` at CREATE
    time), as MariaDB's ``Field_time`` / ``Field_datetime`` / ``Field_timestamp`` store them:
    TIME = 3-byte signed little-endian ``[-]HHMMSS``; DATETIME = 8-byte little-endian
    ``YYYYMMDDhhmmss``; TIMESTAMP = 4-byte little-endian seconds since the epoch. Same values as
    ``values.convert`` of the library's, except a negative TIME, which the library reads unsigned."""
    kind = {_TIME: "time", _DATETIME: "datetime", _TIMESTAMP: "timestamp"}[t]
    if col.kind != kind:
        raise _Unsupported(col.kind)
    if col.precision:  # MariaDB 5.3's TIME(n)/DATETIME(n)/TIMESTAMP(n) ("hires") formats
        raise _Unsupported(f"MariaDB's pre-5.6 {kind.upper()}({col.precision}) format is not decoded")
    if t == _TIME:
        def time_step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            if nulls & bit:
                out[name] = None
                return pos
            v = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
            if v >= 0x800000:
                v -= 0x1000000
            a = -v if v < 0 else v
            delta = dt.timedelta(hours=a // 10000, minutes=a // 100 % 100, seconds=a % 100)
            out[name] = -delta if v < 0 else delta
            return pos + 3

        return time_step
    if t == _DATETIME:
        def datetime_step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            if nulls & bit:
                out[name] = None
                return pos
            if pos + 8 > len(data):
                raise ValueError("DATETIME value truncated")
            v = int.from_bytes(data[pos:pos + 8], "little")
            d, t_ = divmod(v, 1000000)
            y, m, day = d // 10000, d // 100 % 100, d % 100
            if y == 0 or m == 0 or day == 0:  # zero or partial date -> None (as DATE)
                out[name] = None
            else:
                out[name] = dt.datetime(y, m, day, t_ // 10000, t_ // 100 % 100, t_ % 100)
            return pos + 8

        return datetime_step

    def timestamp_step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
        if nulls & bit:
            out[name] = None
            return pos
        if pos + 4 > len(data):
            raise ValueError("TIMESTAMP value truncated")
        seconds = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16) | (data[pos + 3] << 24)
        # the zero TIMESTAMP is stored as epoch 0 (values.convert)
        out[name] = None if seconds == 0 else dt.datetime.fromtimestamp(seconds, _UTC)
        return pos + 4

    return timestamp_step


def _length_prefixed_step(name: str, lib: Any, index: int, what: str, convert: Callable[[bytes], Any]) -> Step:
    """A value stored as a ``lib.length_size``-byte little-endian length and that many bytes
    (JSON, GEOMETRY) -> ``convert(bytes)``; a short image raises ``ValueError("<what> value truncated")``."""
    size = int(lib.length_size)
    bit = 1 << index

    def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
        if nulls & bit:
            out[name] = None
            return pos
        n = int.from_bytes(data[pos:pos + size], "little")
        pos += size
        raw = bytes(data[pos:pos + n])
        if len(raw) != n:
            raise ValueError(f"{what} value truncated")
        out[name] = convert(raw)
        return pos + n

    return step


def _json_step(name: str, lib: Any, col: MySqlColumn, index: int) -> Step:
    """MySQL's binary JSON: a ``lib.length_size``-byte length and the document
    (:mod:`.binary_json`) -> its text; length 0 -> None (as the library)."""
    if col.kind != "json":
        raise _Unsupported(col.kind)
    return _length_prefixed_step(name, lib, index, "JSON", lambda raw: binary_json.to_text(raw) if raw else None)


def _int24_step(name: str, lib: Any, col: MySqlColumn, index: int) -> Step:
    final = _int_final(col)
    unsigned = bool(col.unsigned)
    bit = 1 << index

    def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
        if nulls & bit:
            out[name] = None
            return pos
        v = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
        if not unsigned and v >= 0x800000:
            v -= 0x1000000
        out[name] = final(v) if final is not None else v
        return pos + 3

    return step


def _enum_step(name: str, lib: Any, col: MySqlColumn, index: int) -> Step:
    values = getattr(lib, "enum_values", None)  # FULL metadata: [""] + labels, as the library has them
    if col.kind != "enum":
        raise _Unsupported(col.kind)
    if values and all(isinstance(v, str) for v in values):
        labels = tuple(values)
    elif col.labels:  # no labels in the table map (binlog_row_metadata MINIMAL): the schema's
        labels = ("",) + tuple(col.labels)
    else:
        raise _Unsupported("ENUM without labels in the table map or the schema")
    size = int(lib.size)
    bit = 1 << index

    def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
        if nulls & bit:
            out[name] = None
            return pos
        out[name] = labels[int.from_bytes(data[pos:pos + size], "little")]
        return pos + size

    return step


def _set_step(name: str, lib: Any, col: MySqlColumn, index: int) -> Step:
    """SET: the member bitmask (``lib.size`` bytes, little-endian) -> ``values._set`` of the
    library's member set; no member -> '' (the library's None with its "empty set" source)."""
    values = getattr(lib, "set_values", None)
    if col.kind != "set":
        raise _Unsupported(col.kind)
    if values and all(isinstance(v, str) for v in values):
        members = tuple(values)
    elif col.labels:  # no labels in the table map (binlog_row_metadata MINIMAL): the schema's
        members = tuple(col.labels)
    else:
        raise _Unsupported("SET without labels in the table map or the schema")
    size = int(lib.size)
    bit = 1 << index
    cache: dict[int, str] = {}

    def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
        if nulls & bit:
            out[name] = None
            return pos
        mask = int.from_bytes(data[pos:pos + size], "little")
        text = cache.get(mask)
        if text is None:
            text = ",".join(v for i, v in enumerate(members) if mask & (1 << i))  # definition order
            if len(cache) < 4096:
                cache[mask] = text
        out[name] = text
        return pos + size

    return step


def _bit_step(name: str, lib: Any, col: MySqlColumn, index: int) -> Step:
    """BIT(n): ``lib.bytes`` big-endian bytes, the first one holding the top ``n % 8`` bits (as
    ``RowsEvent.__read_bit``) -> ``values._bit`` (bool for BIT(1), else little-endian bytes)."""
    if col.kind != "bit":
        raise _Unsupported(col.kind)
    nbytes, nbits = int(lib.bytes), int(lib.bits)
    if nbytes < 1 or nbits < 1:
        raise _Unsupported("bit")
    end = nbits if nbytes == 1 else (nbits % 8 or 8)
    top_mask = (1 << end) - 1
    bits = col.precision or 1
    out_len = (bits + 7) // 8
    bit = 1 << index

    def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
        if nulls & bit:
            out[name] = None
            return pos
        raw = data[pos:pos + nbytes]
        if len(raw) != nbytes:
            raise ValueError("BIT value truncated")
        value = ((raw[0] & top_mask) << (8 * (nbytes - 1))) | int.from_bytes(raw[1:], "big")
        out[name] = value != 0 if bits == 1 else value.to_bytes(out_len, "little")
        return pos + nbytes

    return step


def _geometry_step(name: str, lib: Any, col: MySqlColumn, index: int) -> Step:
    """GEOMETRY: a ``lib.length_size``-byte length and the SRID + WKB bytes -> ``geometry_to_json``."""
    if col.kind != "geometry":
        raise _Unsupported(col.kind)
    return _length_prefixed_step(name, lib, index, "GEOMETRY", geometry_to_json)


def _fixed_run(items: list[tuple[str, str, Callable[[Any], Any] | None]]) -> Step:
    """NOT NULL fixed-width columns next to each other: one struct unpack for all of them."""
    packer = struct.Struct("<" + "".join(code for _, code, _ in items))
    unpack_from, width = packer.unpack_from, packer.size
    names = tuple(n for n, _, _ in items)
    finals = tuple(f for _, _, f in items)
    if not any(finals):
        if len(names) == 1:
            only = names[0]

            def one(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
                out[only] = unpack_from(data, pos)[0]
                return pos + width

            return one

        def plain(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
            out.update(zip(names, unpack_from(data, pos)))
            return pos + width

        return plain

    def converted(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
        for n, f, v in zip(names, finals, unpack_from(data, pos)):
            out[n] = f(v) if f is not None else v
        return pos + width

    return converted


def _nullable_fixed(name: str, code: str, final: Callable[[Any], Any] | None, index: int) -> Step:
    packer = struct.Struct("<" + code)
    unpack_from, width = packer.unpack_from, packer.size
    bit = 1 << index

    def step(data: bytes, pos: int, nulls: int, out: dict[str, Any]) -> int:
        if nulls & bit:
            out[name] = None
            return pos
        v = unpack_from(data, pos)[0]
        out[name] = final(v) if final is not None else v
        return pos + width

    return step


class RowDecoder:
    """Reads the row images of one table's full-image rows events (see module doc).

    Attributes:
        columns: number of columns of an image (= bits of its null bitmap).
    """

    def __init__(self, steps: tuple[Step, ...], columns: int, names: tuple[tuple[str, ...], ...] = ()) -> None:
        self._steps = steps
        self.columns = columns
        self._null_bytes = (columns + 7) // 8
        self._names = names  # the column names each step reads (for the error of diagnose)

    def image(self, data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        """One row image at ``data[pos:]``: (column name -> changelake value, position after it).

        Raises:
            IndexError, ValueError, UnicodeDecodeError, struct.error: unreadable bytes.
        """
        nb = self._null_bytes
        nulls = int.from_bytes(data[pos:pos + nb], "little")
        pos += nb
        out: dict[str, Any] = {}
        for step in self._steps:
            pos = step(data, pos, nulls, out)
        return out, pos

    def images(self, data: bytes, pos: int, end: int, per_row: int) -> list[dict[str, Any]]:
        """Every image in ``data[pos:end]`` (``per_row`` = 2 for update events: before, after).

        Raises:
            ValueError: the images do not end exactly at ``end`` (and the errors of :meth:`image`).
        """
        out: list[dict[str, Any]] = []
        image = self.image
        while pos < end:
            for _ in range(per_row):
                values, pos = image(data, pos)
                out.append(values)
        if pos != end:
            raise ValueError(f"row images overran the rows event by {pos - end} bytes")
        return out

    def diagnose(self, data: bytes, pos: int, end: int, per_row: int) -> UndecodableColumnError:
        """After :meth:`images` failed on these bytes: the error naming the column (and row
        image) whose bytes could not be read. Slow; only on the error path."""
        nb = self._null_bytes
        image = 0
        try:
            while pos < end:
                for _ in range(per_row):
                    image += 1
                    nulls = int.from_bytes(data[pos:pos + nb], "little")
                    if pos + nb > end:
                        return UndecodableColumnError(None, f"row image {image}: null bitmap past the event's end")
                    pos += nb
                    out: dict[str, Any] = {}
                    for step, names in zip(self._steps, self._names):
                        try:
                            pos = step(data, pos, nulls, out)
                        except Exception as exc:  # noqa: BLE001 - reported, with the column
                            return UndecodableColumnError(",".join(names), f"row image {image}: "
                                                          f"{type(exc).__name__}: {exc}")
                        if pos > end:
                            return UndecodableColumnError(",".join(names), f"row image {image}: value past the "
                                                          "event's end")
        except Exception as exc:  # noqa: BLE001
            return UndecodableColumnError(None, f"row image {image}: {type(exc).__name__}: {exc}")
        if pos != end:
            return UndecodableColumnError(None, f"row images end {pos - end} bytes off the event's end")
        return UndecodableColumnError(None, "row images unreadable")


def build_decoder(lib_columns: list[Any], columns: tuple[MySqlColumn, ...]) -> RowDecoder:
    """Compile the decoder of a table map's columns (library ``Column`` objects, in order) and
    the table's :class:`MySqlColumn` s.

    Raises:
        UndecodableColumnError: a column the decoder cannot read (names the column and why), or
            a table map whose columns are not the schema's.
    """
    if len(lib_columns) != len(columns) or not columns:
        raise UndecodableColumnError(None, f"the table map has {len(lib_columns)} columns, the schema {len(columns)}")
    steps: list[Step] = []
    names: list[tuple[str, ...]] = []
    run: list[tuple[str, str, Callable[[Any], Any] | None]] = []
    for i, (lib, col) in enumerate(zip(lib_columns, columns)):
        name = col.name
        lib_name = getattr(lib, "name", None)  # None without FULL metadata
        if lib_name is not None and str(lib_name) != name:
            raise UndecodableColumnError(name, f"the table map names column {i + 1} {lib_name!r}")
        t = int(lib.type)
        try:
            fixed = _fixed_item(lib, col)
            if fixed is not None and not col.nullable:
                run.append((name, fixed[0], fixed[1]))
                continue
            if run:
                steps.append(_fixed_run(run))
                names.append(tuple(n for n, _, _ in run))
                run = []
            if fixed is not None:
                steps.append(_nullable_fixed(name, fixed[0], fixed[1], i))
            elif t == _INT24:
                steps.append(_int24_step(name, lib, col, i))
            elif t in (_VARCHAR, _STRING, _BLOB):
                steps.append(_string_step(name, lib, col, i, col.nullable))
            elif t == _NEWDECIMAL:
                steps.append(_decimal_step(name, lib, col, i))
            elif t in (_DATE, _TIME2, _DATETIME2, _TIMESTAMP2, _TIME, _DATETIME, _TIMESTAMP):
                steps.append(_temporal_step(name, lib, col, i))
            elif t == _ENUM:
                steps.append(_enum_step(name, lib, col, i))
            elif t == _SET:
                steps.append(_set_step(name, lib, col, i))
            elif t == _BIT:
                steps.append(_bit_step(name, lib, col, i))
            elif t == _GEOMETRY:
                steps.append(_geometry_step(name, lib, col, i))
            elif t == _JSON:
                steps.append(_json_step(name, lib, col, i))
            else:
                raise _Unsupported(f"binlog field type {t} is not decoded")
        except _Unsupported as exc:
            reason = str(exc)
            if reason == col.kind:
                reason = f"binlog field type {t} does not hold a {col.kind} column"
            raise UndecodableColumnError(name, reason) from None
        names.append((name,))
    if run:
        steps.append(_fixed_run(run))
        names.append(tuple(n for n, _, _ in run))
    return RowDecoder(tuple(steps), len(columns), tuple(names))


_DECODERS: dict[int, tuple[Any, Any, RowDecoder]] = {}
_DECODERS_MAX = 4096


def decoder_for(lib_columns: list[Any], columns: tuple[MySqlColumn, ...]) -> RowDecoder:
    """:func:`build_decoder`, cached by the identity of the library's column list (reused while
    the table map's bytes are unchanged) and of the schema's columns tuple.

    Raises:
        UndecodableColumnError: as :func:`build_decoder` (not cached).
    """
    hit = _DECODERS.get(id(lib_columns))
    if hit is not None and hit[0] is lib_columns and hit[1] is columns:
        return hit[2]
    decoder = build_decoder(lib_columns, columns)
    if len(_DECODERS) >= _DECODERS_MAX:
        _DECODERS.clear()
    _DECODERS[id(lib_columns)] = (lib_columns, columns, decoder)
    return decoder


def rows_bytes(event: Any) -> tuple[bytes, int, int] | None:
    """(buffer, start, end) of a rows event's unread row images, without consuming them; None
    when the event is incomplete or holds pushed-back bytes it should not (the caller stops on
    it). A MariaDB compressed rows event framed by the library (``_replication_fixes``, item 3)
    holds its uncompressed row images pushed back: those are returned."""
    if isinstance(event, FramedRows):
        return event.data, event.start, event.end
    wrapper = event.packet
    if not getattr(event, "complete", True):
        return None
    pushed = getattr(wrapper, "_BinLogPacketWrapper__data_buffer", b"")
    if pushed:
        if int(event.event_type) in _ROWS_COMPRESSED:
            return bytes(pushed), 0, len(pushed)
        return None
    raw = getattr(wrapper, "packet", None)
    data, start = getattr(raw, "_data", None), getattr(raw, "_position", None)
    if data is None or start is None:
        return None
    end = start + int(event.event_size) - int(wrapper.read_bytes)
    if end > len(data):
        return None
    return data, start, end


# -- framing rows events of compiled tables from the raw packet ------------------------------

_ROWS_V1 = {0x17: 1, 0x18: 2, 0x19: 1}  # WRITE/UPDATE/DELETE_ROWS_EVENT_V1 -> images per row
_ROWS_V2 = {0x1E: 1, 0x1F: 2, 0x20: 1}  # ... _V2
_ROWS_COMPRESSED = {0xA6: 1, 0xA7: 2, 0xA8: 1}  # MariaDB's WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT_V1
_HEADER = struct.Struct("<IBIIIH")  # after the OK byte: timestamp, type, server id, size, next pos, flags
_V2_EXTRA = struct.Struct("<H")

#: mysql-replication's ``BinLogPacketWrapper`` (the library's framing), set by :func:`install_framer`.
_library_wrapper: Any = None
#: False: every event is framed by the library (the test oracle switches framing off).
framing_enabled = True
#: False: tables without a compiled decoder are framed too (tests only).
framing_requires_decoder = True


class FramedRows:
    """A WRITE/UPDATE/DELETE_ROWS v1/v2 event of a compiled table, framed by :func:`frame_rows`
    from the raw packet with no object of mysql-replication's: the header fields the reader reads
    and the span of its row images (``data[start:end]``). It answers the attributes
    :class:`~.event_handler.EventHandler` and the library's ``BinLogStreamReader.fetchone`` read
    (``packet`` and ``event`` are the object itself, ``event_size`` the whole event's bytes as
    the library's packet wrapper has it). :meth:`library_event` (and :attr:`rows`) hand the same
    packet to the library: the test oracle (``values.library_rows``); production reads :attr:`data`."""

    __slots__ = ("event_type", "timestamp", "log_pos", "event_size", "table_id", "schema", "table", "primary_key",
                 "columns", "number_of_columns", "columns_present_bitmap", "columns_present_bitmap2", "per_row",
                 "data", "start", "end", "_library_args", "_library")
    event_type: int
    timestamp: int
    log_pos: int
    event_size: int
    table_id: int
    schema: str
    table: str
    primary_key: Any
    columns: list[Any]
    number_of_columns: int
    columns_present_bitmap: bytes
    columns_present_bitmap2: bytes | None
    per_row: int
    data: bytes
    start: int
    end: int
    _library_args: tuple[Any, Any, tuple[Any, ...]] | None
    _library: Any
    table_map_missing = False

    @property
    def packet(self) -> "FramedRows":
        return self

    @property
    def event(self) -> "FramedRows":
        return self

    def library_event(self) -> Any:
        """The library's event for the same packet (built once): the test oracle's."""
        if self._library is None:
            if self._library_args is None:
                raise ValueError("a rows event framed outside the stream reader has no packet for the library")
            pkt, table_map, args = self._library_args
            if isinstance(pkt, (bytes, bytearray)):  # framed by reader.stream_events from the payload bytes
                from pymysql.protocol import MysqlPacket

                pkt = MysqlPacket(bytes(pkt), "utf8")
            pkt._position = 0
            self._library = _library_wrapper(pkt, table_map, *args).event
        return self._library

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The library's rows (the test oracle; the compiled decoder reads :attr:`data`)."""
        return list(self.library_event().rows)


class FramedWriteRows(FramedRows):
    __slots__ = ()


class FramedUpdateRows(FramedRows):
    __slots__ = ()


class FramedDeleteRows(FramedRows):
    __slots__ = ()


_FRAMED_CLASS = {1: FramedWriteRows, 2: FramedUpdateRows, 3: FramedDeleteRows}
#: the other packets the framer reads itself: table maps (:func:`frame_table_map`), MariaDB GTID and XID
#: events (:mod:`.framed_events`)
_OWN_HEADERS = frozenset({0x13, GTID_CODE, XID_CODE})
_KIND = {0x17: 1, 0x1E: 1, 0xA6: 1, 0x18: 2, 0x1F: 2, 0xA7: 2, 0x19: 3, 0x20: 3, 0xA8: 3}
#: rows-event type code -> (row images per row, 1 write / 2 update / 3 delete): the events the
#: compiled decoder reads (every WRITE/UPDATE/DELETE_ROWS event but MySQL's PARTIAL_UPDATE_ROWS).
ROWS_EVENT_KINDS = {code: (2 if kind == 2 else 1, kind) for code, kind in _KIND.items()}


def _compiled(columns: Any) -> bool:
    hit = _DECODERS.get(id(columns))
    return hit is not None and hit[0] is columns and hit[2] is not None


def frame_rows(data: bytes, table_map: dict[int, Any], use_checksum: bool,
               post_header_lengths: Any = None, require_compiled: bool = True) -> FramedRows | None:
    """Frame the rows event in a binlog packet (``data``: the OK byte, the 19-byte event header,
    the body, the CRC32 when ``use_checksum``) as mysql-replication's ``RowsEvent.__init__``
    would read it; None when the framer does not read it exactly (not a v1/v2 rows event, a
    table id without its table map, a table without a compiled decoder when
    ``require_compiled``, a post-header length other than the known one, v2 extra data,
    250 columns or more, truncated bytes) - the caller then leaves the packet to the library."""
    if len(data) < 30 or data[0] != 0:
        return None
    code = data[5]
    per_row = _ROWS_V1.get(code) or _ROWS_V2.get(code) or _ROWS_COMPRESSED.get(code)
    if per_row is None:
        return None
    timestamp, _, _, event_size, log_pos, _ = _HEADER.unpack_from(data, 1)
    end = 1 + event_size - (4 if use_checksum else 0)
    if end > len(data) or event_size < 19:
        return None
    known = 10 if code in _ROWS_V2 else 8
    if post_header_lengths and code - 1 < len(post_header_lengths) and post_header_lengths[code - 1] != known:
        return None
    table_id = int.from_bytes(data[20:26], "little")
    table = table_map.get(table_id)
    if table is None or (require_compiled and not _compiled(table.columns)):
        return None
    pos = 28
    if known == 10:
        if _V2_EXTRA.unpack_from(data, 28)[0] != 2:  # extra data (NDB, partition ids): the library's
            return None
        pos = 30
    n = data[pos]
    if n >= 251:
        return None
    pos += 1
    size = (n + 7) // 8
    ev = _FRAMED_CLASS[_KIND[code]]()
    ev.columns_present_bitmap = data[pos:pos + size]
    pos += size
    if per_row == 2:
        ev.columns_present_bitmap2 = data[pos:pos + size]
        pos += size
    else:
        ev.columns_present_bitmap2 = None
    if pos > end:
        return None
    ev.event_type, ev.timestamp, ev.log_pos, ev.event_size = code, timestamp, log_pos, event_size
    ev.table_id, ev.schema, ev.table, ev.primary_key = table_id, table.schema, table.table, table.primary_key
    ev.columns, ev.number_of_columns, ev.per_row = table.columns, n, per_row
    if code in _ROWS_COMPRESSED:  # the row images are one zlib envelope (.compression)
        try:
            data = uncompress(bytes(data[pos:end]))
        except CompressedPayloadError:
            return None  # the library frames it (and its error stands)
        pos, end = 0, len(data)
    ev.data, ev.start, ev.end = data, pos, end
    ev._library, ev._library_args = None, None
    return ev


class FramedTableMap:
    """A TABLE_MAP_EVENT whose body bytes the library already parsed once (the table-map cache of
    :mod:`._replication_fixes`, item 5): the cached attributes, with no library object built for
    the packet. It answers what the reader and ``BinLogStreamReader.fetchone`` read of a
    ``TableMapEvent`` (``table_id``, ``schema``, ``table``, ``columns``, ``table_obj``,
    ``get_table()``, ``cache_key``, ``packet`` / ``event``, the header fields)."""

    __slots__ = ("event_type", "timestamp", "log_pos", "event_size", "cache_key", "_attrs")
    event_type: int
    timestamp: int
    log_pos: int
    event_size: int
    cache_key: bytes
    _attrs: dict[str, Any]
    table_map_missing = False  # read by the event handler of every event (without it, __getattr__ raises)

    @property
    def packet(self) -> "FramedTableMap":
        return self

    @property
    def event(self) -> "FramedTableMap":
        return self

    def __getattr__(self, name: str) -> Any:  # the parsed attributes (table_id, schema, table, ...)
        try:
            return self._attrs[name]
        except KeyError:
            raise AttributeError(name) from None

    def get_table(self) -> Any:
        return self._attrs["table_obj"]


def frame_table_map(data: bytes, table_map: dict[int, Any], use_checksum: bool,
                    post_header_lengths: Any = None) -> FramedTableMap | None:
    """A table-map packet whose body bytes are in the table-map cache, as a :class:`FramedTableMap`
    (and its table put into ``table_map``, as the library does); None otherwise."""
    if len(data) < 28 or data[0] != 0 or data[5] != 0x13:
        return None
    if post_header_lengths and len(post_header_lengths) > 0x12 and post_header_lengths[0x12] != 8:
        return None
    timestamp, _, _, event_size, log_pos, _ = _HEADER.unpack_from(data, 1)
    end = 1 + event_size - (4 if use_checksum else 0)
    if end > len(data) or event_size < 19:
        return None
    key = bytes(data[20:end])
    attrs = _replication_fixes.cached_table_map(key)
    if attrs is None:
        return None
    ev = FramedTableMap()
    ev.event_type, ev.timestamp, ev.log_pos, ev.event_size = 0x13, timestamp, log_pos, event_size
    ev.cache_key, ev._attrs = key, attrs
    table_map[attrs["table_id"]] = attrs["table_obj"]
    return ev


#: the type codes :func:`frame_packet` reads (rows events, table maps, MariaDB GTID and XID events)
FRAMED_CODES = frozenset(_KIND) | _OWN_HEADERS


def frame_packet(data: bytes, table_map: dict[int, Any], use_checksum: bool,
                 post_header_lengths: Any = None) -> Any:
    """The binlog packet ``data`` (the OK byte, the event header, the body, the CRC32 when
    ``use_checksum``) framed without the library: a :class:`FramedRows` (:func:`frame_rows`, of
    a table with a compiled decoder unless ``framing_requires_decoder`` is off), a
    :class:`FramedTableMap` (:func:`frame_table_map`), a MariaDB GTID or XID event
    (:func:`~.framed_events.frame_gtid_or_xid`); None for any other packet, or one these do not
    read exactly (the library frames it)."""
    code = data[5]
    if code == GTID_CODE or code == XID_CODE:
        return frame_gtid_or_xid(data, use_checksum)
    if code == 0x13:
        return frame_table_map(data, table_map, use_checksum, post_header_lengths)
    if code in _KIND:
        return frame_rows(data, table_map, use_checksum, post_header_lengths, framing_requires_decoder)
    return None


def install_framer() -> None:
    """Put :func:`frame_rows` in front of mysql-replication's packet framing
    (``binlogstream.BinLogPacketWrapper``, built by ``BinLogStreamReader.fetchone`` for every
    packet): a rows event of a table with a compiled decoder becomes a :class:`FramedRows`, a
    table map already parsed a :class:`FramedTableMap`, a MariaDB GTID or XID event a
    :class:`~.framed_events.FramedMariadbGtid` / :class:`~.framed_events.FramedXid`, every other
    packet is framed by the library as before (idempotent). Only for a stream reader whose ``only_events`` hold
    :func:`framed_classes` (``fetchone`` drops the events of any other class) and that asks for
    no table/schema filter and no checksum verification (the binlog reader asks neither); any
    other stream reader in the process is framed by the library alone."""
    global _library_wrapper
    from pymysqlreplication import binlogstream

    current = binlogstream.BinLogPacketWrapper
    if getattr(current, "_changelake_framer", False):
        return
    _library_wrapper = library = current

    def wrapper(pkt: Any, table_map: Any, *args: Any) -> Any:
        # args: ctl_connection, mysql_version, use_checksum, allowed_events, only_tables, ignored_tables,
        # only_schemas, ignored_schemas, freeze_schema, ignore_decode_errors, verify_checksum, ... (fetchone's order)
        data = pkt._data
        code = data[5] if len(data) > 5 else 0
        # only for a stream reader that allows the framed classes (others would drop them)
        if code in FRAMED_CODES and framing_enabled and len(args) >= 15 and pkt._position == 0 \
                and FramedWriteRows in args[3] and args[4] is None and args[5] is None and args[6] is None \
                and args[7] is None and not args[10]:
            framed = frame_packet(data, table_map, bool(args[2]), args[14])
            if framed is not None:
                if isinstance(framed, FramedRows):
                    framed._library_args = (pkt, table_map, args)
                return framed
        return library(pkt, table_map, *args)

    setattr(wrapper, "_changelake_framer", True)
    binlogstream.BinLogPacketWrapper = wrapper


def framed_classes() -> tuple[type, ...]:
    """The classes the framer builds (to add to the stream reader's ``only_events``)."""
    return (FramedWriteRows, FramedUpdateRows, FramedDeleteRows, FramedTableMap, FramedMariadbGtid, FramedXid)
