"""MySQL's binary JSON (binlog type 245) read by the row decoder (binlog/binary_json.py), against
mysql-replication's parser as the oracle, on documents built here per MySQL's spec
(``sql/json_binary.h``): every value type - literals, int16/uint16/int32/uint32/int64/uint64,
double, string, opaque DECIMAL/DATE/TIME/DATETIME -, small and large objects and arrays, nesting.
MariaDB never writes binary JSON (its JSON is LONGTEXT), so no server can produce these bytes.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from types import SimpleNamespace

import pytest
from pymysqlreplication.json_binary import parse_json

from changelake.connectors.mysql_cdc.binlog import binary_json
from changelake.connectors.mysql_cdc.binlog.row_decoder import UndecodableColumnError, build_decoder
from changelake.connectors.mysql_cdc.schema.columns import MySqlColumn
from changelake.connectors.mysql_cdc.values import convert

# -- an encoder per the spec ---------------------------------------------------------------------

_INLINE_ALWAYS = {0x04, 0x05, 0x06}


class T:
    """A value with an explicit binary JSON type (int16 ... uint64, large containers, opaque)."""

    def __init__(self, type_: int, value, field_type: int | None = None) -> None:
        self.type, self.value, self.field_type = type_, value, field_type


def _var_len(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _scalar(v) -> tuple[int, bytes]:
    if isinstance(v, T) and v.type <= 0x03:
        return v.type, _container(v.value, is_object=v.type in (0, 1), large=v.type in (1, 3))
    if isinstance(v, T):
        codes = {0x05: "<h", 0x06: "<H", 0x07: "<i", 0x08: "<I", 0x09: "<q", 0x0A: "<Q", 0x0B: "<d"}
        if v.type in codes:
            return v.type, struct.pack(codes[v.type], v.value)
        assert v.type == 0x0F
        return 0x0F, bytes([v.field_type]) + _var_len(len(v.value)) + v.value
    if v is None:
        return 0x04, b"\x00"
    if v is True:
        return 0x04, b"\x01"
    if v is False:
        return 0x04, b"\x02"
    if isinstance(v, int):
        return (0x05, struct.pack("<h", v)) if -32768 <= v < 32768 else (0x09, struct.pack("<q", v))
    if isinstance(v, float):
        return 0x0B, struct.pack("<d", v)
    if isinstance(v, str):
        data = v.encode("utf-8")
        return 0x0C, _var_len(len(data)) + data
    if isinstance(v, dict):
        return 0x00, _container(v, is_object=True, large=False)
    if isinstance(v, list):
        return 0x02, _container(v, is_object=False, large=False)
    raise TypeError(v)


def _container(items, *, is_object: bool, large: bool) -> bytes:
    osz = 4 if large else 2
    o = "<I" if large else "<H"
    pairs = list(items.items()) if is_object else [(None, v) for v in items]
    n = len(pairs)
    header = 2 * osz + n * ((osz + 2) if is_object else 0) + n * (1 + osz)
    keys = b"".join(k.encode("utf-8") for k, _ in pairs) if is_object else b""
    key_entries, off = b"", header
    for k, _ in pairs if is_object else ():
        kb = k.encode("utf-8")
        key_entries += struct.pack(o, off) + struct.pack("<H", len(kb))
        off += len(kb)
    value_entries, values, off = b"", b"", header + len(keys)
    for _, v in pairs:
        t, payload = _scalar(v)
        if t in _INLINE_ALWAYS or (large and t in (0x07, 0x08)):
            value_entries += bytes([t]) + payload.ljust(osz, b"\x00")[:osz]
        else:
            value_entries += bytes([t]) + struct.pack(o, off)
            values += payload
            off += len(payload)
    body = key_entries + value_entries + keys + values
    return struct.pack(o, n) + struct.pack(o, 2 * osz + len(body)) + body


def doc(v) -> bytes:
    t, payload = _scalar(v)
    return bytes([t]) + payload


def _decimal_bin(text: str, p: int, s: int) -> bytes:
    """MySQL's decimal2bin of ``text`` as DECIMAL(p, s)."""
    sizes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    neg = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    whole, frac = whole.rjust(p - s, "0"), frac.ljust(s, "0")
    out = bytearray()
    lead = (p - s) % 9
    if lead:
        out += int(whole[:lead]).to_bytes(sizes[lead], "big")
    for i in range(lead, p - s, 9):
        out += int(whole[i:i + 9]).to_bytes(4, "big")
    for i in range(0, s - s % 9, 9):
        out += int(frac[i:i + 9]).to_bytes(4, "big")
    if s % 9:
        out += int(frac[s - s % 9:]).to_bytes(sizes[s % 9], "big")
    if neg:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def _dec(text: str, p: int, s: int) -> T:
    return T(0x0F, bytes([p, s]) + _decimal_bin(text, p, s), 246)


def _packed_datetime(y, m, d, h=0, mi=0, s=0, us=0) -> bytes:
    ymd = ((y * 13 + m) << 5) | d
    return struct.pack("<q", ((((ymd << 17) | (h << 12) | (mi << 6) | s)) << 24) + us)


def _packed_time(h, m, s, us=0, negative=False) -> bytes:
    v = ((((h << 12) | (m << 6) | s)) << 24) + us
    return struct.pack("<q", -v if negative else v)


# -- the oracle comparison -----------------------------------------------------------------------

def _plain(lib):
    """The library's parse with its representation choices mapped onto ours (bytes -> str,
    datetime.time -> timedelta); values unchanged."""
    if isinstance(lib, bytes):
        return lib.decode("utf-8")
    if isinstance(lib, dict):
        return {_plain(k): _plain(v) for k, v in lib.items()}
    if isinstance(lib, list):
        return [_plain(v) for v in lib]
    if isinstance(lib, dt.time):
        return dt.timedelta(hours=lib.hour, minutes=lib.minute, seconds=lib.second, microseconds=lib.microsecond)
    return lib


def _library(data: bytes):
    return _plain(parse_json(data[0], data[1:]))


SCALARS = [
    None, True, False, 0, -1, 32767, -32768, T(0x06, 65535), T(0x07, -2147483648), T(0x08, 4294967295),
    T(0x09, -9223372036854775808), T(0x0A, 18446744073709551615), 1.5, -0.0, 1e300, "", "héllo €", "a" * 200,
]
DOCS = {
    "literals and ints": [None, True, False, 1, -2, T(0x06, 40000)],
    "every scalar in a small array": SCALARS,
    "every scalar in a small object": {f"k{i}": v for i, v in enumerate(SCALARS)},
    "every scalar in a large array": T(0x03, SCALARS),
    "every scalar in a large object": T(0x01, {f"k{i}": v for i, v in enumerate(SCALARS)}),
    "nesting": {"a": [1, {"b": [True, None, "x"], "c": T(0x01, {"d": [T(0x03, [1, 2, "z"])]})}], "é": {}, "e": []},
    "deep": [[[[[[{"x": [[[1]]]}]]]]]],
    "large strings past 64 KiB": T(0x03, ["s" * 70000, {"k": "t" * 300}]),
    "top-level string": "just a string",
    "top-level int64": T(0x09, 1 << 40),
    "top-level double": 2.25,
    "top-level literal": None,
    "opaque decimals": [_dec("1.50", 10, 2), _dec("-12345678901234567890.123456789012", 40, 12), _dec("0", 5, 0),
                        _dec("-0.001", 4, 3)],
    "opaque datetimes": [T(0x0F, _packed_datetime(2024, 2, 29, 23, 59, 58, 123456), 12),
                         T(0x0F, _packed_datetime(1000, 1, 1), 18)],
    "opaque times": [T(0x0F, _packed_time(12, 34, 56, 789), 11), T(0x0F, _packed_time(0, 0, 0), 19)],
}


@pytest.mark.parametrize("name", list(DOCS))
def test_documents_parse_as_the_library(name):
    data = doc(DOCS[name])
    assert binary_json.parse(data) == _library(data)


def test_opaque_date_is_a_date_the_library_a_datetime_at_midnight():
    data = doc([T(0x0F, _packed_datetime(2024, 1, 31), 10)])
    (ours,), (lib,) = binary_json.parse(data), _library(data)
    assert ours == dt.date(2024, 1, 31) and type(ours) is dt.date
    assert lib == dt.datetime(2024, 1, 31)
    assert binary_json.to_text(data) == '["2024-01-31"]'


def test_negative_and_long_opaque_time_keep_their_sign_and_hours():
    """The library drops a TIME's sign (and fails past 23 h); MySQL's packed TIME is negative."""
    data = doc([T(0x0F, _packed_time(1, 2, 3, 500000, negative=True), 11)])
    assert binary_json.parse(data) == [-dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=500000)]
    assert _library(data) == [dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=500000)]
    assert binary_json.to_text(data) == '["-01:02:03.500000"]'
    long_time = doc(T(0x0F, _packed_time(838, 59, 59), 11))
    assert binary_json.to_text(long_time) == '"838:59:59.000000"'


_LIBRARY_TEXT_DEFECTS = ("top-level string", "top-level literal")


@pytest.mark.parametrize("name", [n for n in DOCS if not n.startswith("opaque") and n not in _LIBRARY_TEXT_DEFECTS])
def test_document_text_is_the_engine_value_of_the_library_path(name):
    """The decoder's text equals values.convert of the library's parse (the former binlog path)."""
    data = doc(DOCS[name])
    col = MySqlColumn(name="j", kind="json")
    assert binary_json.to_text(data) == convert(col, parse_json(data[0], data[1:]), from_binlog=True)


def test_top_level_string_and_null_documents_are_json_text():
    """The library path turned a top-level JSON string into its bare text and the JSON null
    literal into SQL NULL; the decoder gives the document text, as MySQL prints it."""
    col = MySqlColumn(name="j", kind="json")
    text, null = doc("just a string"), doc(None)
    assert binary_json.to_text(text) == '"just a string"'
    assert convert(col, parse_json(text[0], text[1:]), from_binlog=True) == "just a string"
    assert binary_json.to_text(null) == "null"
    assert convert(col, parse_json(null[0], null[1:]), from_binlog=True) is None


def test_opaque_text_as_mysql_prints_it():
    data = doc({"d": _dec("-1.50", 10, 2), "t": T(0x0F, _packed_datetime(2024, 2, 29, 1, 2, 3, 4), 12),
                "b": T(0x0F, b"\x00\x01", 252)})
    assert binary_json.to_text(data) == '{"d": -1.50, "t": "2024-02-29 01:02:03.000004", "b": "base64:type252:AAE="}'


@pytest.mark.parametrize("bad", [b"", b"\x0d", b"\x00\x05\x00\xff\x00", b"\x0c\x05ab", b"\x04\x07"])
def test_not_binary_json_raises(bad):
    with pytest.raises((ValueError, IndexError, struct.error)):
        binary_json.parse(bad)


# -- through the row decoder ----------------------------------------------------------------------

def _json_image(docs: list[bytes | None]) -> bytes:
    nulls = sum(1 << (i + 1) for i, d in enumerate(docs) if d is None)
    out = bytearray(nulls.to_bytes((len(docs) + 1 + 7) // 8, "little"))
    out += struct.pack("<i", 7)
    for d in docs:
        if d is not None:
            out += struct.pack("<I", len(d)) + d
    return bytes(out)


def test_json_columns_through_the_row_decoder():
    lib = [SimpleNamespace(type=3, name="id", unsigned=False)] + [
        SimpleNamespace(type=245, name=f"j{i}", length_size=4) for i in range(3)]
    cols = (MySqlColumn("id", "int", nullable=False),) + tuple(MySqlColumn(f"j{i}", "json") for i in range(3))
    decoder = build_decoder(lib, cols)
    a, b = doc(DOCS["nesting"]), doc(DOCS["every scalar in a large object"])
    data = _json_image([a, None, b])
    (row,) = decoder.images(data, 0, len(data), 1)
    assert row == {"id": 7, "j0": binary_json.to_text(a), "j1": None, "j2": binary_json.to_text(b)}


def test_unreadable_json_names_the_column():
    lib = [SimpleNamespace(type=3, name="id", unsigned=False), SimpleNamespace(type=245, name="j", length_size=4)]
    decoder = build_decoder(lib, (MySqlColumn("id", "int", nullable=False), MySqlColumn("j", "json")))
    data = _json_image([b"\x0d\x00"])
    with pytest.raises(ValueError):
        decoder.images(data, 0, len(data), 1)
    err = decoder.diagnose(data, 0, len(data), 1)
    assert err.column == "j" and "row image 1" in err.reason


def test_columns_the_decoder_does_not_read_name_the_column():
    lib = [SimpleNamespace(type=3, name="id", unsigned=False), SimpleNamespace(type=14, name="nd")]  # NEWDATE
    with pytest.raises(UndecodableColumnError) as err:
        build_decoder(lib, (MySqlColumn("id", "int", nullable=False), MySqlColumn("nd", "date")))
    assert err.value.column == "nd" and "14" in err.value.reason
    lib = [SimpleNamespace(type=3, name="id", unsigned=False), SimpleNamespace(type=245, name="j", length_size=4)]
    with pytest.raises(UndecodableColumnError) as err:
        build_decoder(lib, (MySqlColumn("id", "int", nullable=False), MySqlColumn("j", "text")))
    assert err.value.column == "j" and "245" in err.value.reason
