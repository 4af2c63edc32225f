"""One value conversion for both paths: text-protocol raws and mysql-replication raws (no server)."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import pytest

from changelake.changelog.types import TypeRoot
from changelake.connectors.mysql_cdc.binlog._replication_fixes import FRACTION_BYTES, decode_time2
from changelake.connectors.mysql_cdc.schema.columns import MySqlColumn, column_from_information_schema, parse_labels, to_data_type
from changelake.connectors.mysql_cdc.binlog.geometry import geometry_to_json
from changelake.connectors.mysql_cdc.values import EMPTY_SET, convert, parse_time
from changelake.formats.json_values import float32_shortest

UTC = dt.timezone.utc


def col(kind, **kw):
    return MySqlColumn(name="c", kind=kind, **kw)


# (column, text-protocol raw, mysql-replication raw, expected Python value)
PAIRS = [
    (col("decimal", precision=10, scale=2), "-12.34", Decimal("-12.34"), Decimal("-12.34")),
    (col("decimal", precision=5, scale=5), "0.00001", Decimal("0.00001"), Decimal("0.00001")),
    (col("decimal", precision=10, scale=2), "0.00", Decimal("0"), Decimal("0.00")),
    (col("bigint", unsigned=True), "18446744073709551615", 18446744073709551615, Decimal(18446744073709551615)),
    (col("bigint", unsigned=True), "18446744073709551615", -1, Decimal(18446744073709551615)),  # read as signed
    (col("int", unsigned=True), "4294967295", -1, 4294967295),
    (col("tinyint", unsigned=True), "255", -1, 255),
    (col("tinyint", width=1), "1", 1, True),
    (col("tinyint", width=1), "0", 0, False),
    (col("tinyint", width=4), "7", 7, 7),
    (col("float"), "5.150000095367432", 5.150000095367432, 5.15),
    (col("double"), "0.1", 0.1, 0.1),
    (col("bit", precision=1), b"\x01", "1", True),
    (col("bit", precision=10), b"\x02\x01", "1000000001", b"\x01\x02"),
    (col("year"), "0000", 1900, 0),
    (col("year"), "2024", 2024, 2024),
    (col("date"), "0000-00-00", None, None),
    (col("date"), "2015-05-00", None, None),
    (col("date"), "2024-02-29", dt.date(2024, 2, 29), dt.date(2024, 2, 29)),
    (col("time", precision=6), "-00:00:01.500000", dt.timedelta(seconds=-1.5), dt.timedelta(seconds=-1.5)),
    (col("time"), "838:59:59", dt.timedelta(hours=838, minutes=59, seconds=59), dt.timedelta(hours=838, minutes=59, seconds=59)),
    (col("datetime", precision=3), "2018-05-29 17:36:19.700", dt.datetime(2018, 5, 29, 17, 36, 19, 700000), dt.datetime(2018, 5, 29, 17, 36, 19, 700000)),
    (col("datetime"), "0000-00-00 00:00:00", None, None),
    (col("timestamp", precision=1), "2018-05-29 17:36:19.7", dt.datetime(2018, 5, 29, 17, 36, 19, 700000), dt.datetime(2018, 5, 29, 17, 36, 19, 700000, tzinfo=UTC)),
    (col("timestamp"), "0000-00-00 00:00:00", dt.datetime(1970, 1, 1), None),
    (col("char"), "ab", "ab  ", "ab"),
    (col("varchar"), "a😀b", "a😀b", "a😀b"),
    (col("binary", length=4), b"ab\x00\x00", b"ab", b"ab\x00\x00"),
    (col("varbinary"), b"\xff\x00", b"\xff\x00", b"\xff\x00"),
    (col("enum", labels=("x", "y")), "", "", ""),
    (col("set", labels=("a", "b", "c")), "a,c", {"c", "a"}, "a,c"),
    (col("text"), '{"b":1, "a":[true,null]}', '{"b":1, "a":[true,null]}', '{"b":1, "a":[true,null]}'),
]


@pytest.mark.parametrize(("column", "text", "binlog", "expected"), PAIRS)
def test_both_raw_forms_give_the_same_value(column, text, binlog, expected):
    from_text = convert(column, text)
    from_binlog = convert(column, binlog, from_binlog=True)
    assert from_text == expected and type(from_text) is type(expected)
    assert from_binlog == expected and type(from_binlog) is type(expected)


def test_decimal_keeps_the_column_scale_exactly():
    value = convert(col("decimal", precision=10, scale=2), Decimal("0"), from_binlog=True)
    assert str(value) == "0.00"
    assert str(convert(col("decimal", precision=65, scale=30), "1.5")) == "1.5"  # p > 38: text


def test_mysql_latin1_is_cp1252_with_c1_controls():
    from changelake.connectors.mysql_cdc.values import python_codec

    assert b"caf\xe9 \x80 \x81".decode(python_codec("latin1")) == "café € \x81"
    assert convert(col("varchar", charset="latin1"), b"\x80") == "€"


def test_empty_set_and_null():
    s = col("set", labels=("a",))
    assert convert(s, None, from_binlog=True, none_source=EMPTY_SET) == ""
    assert convert(s, None, from_binlog=True, none_source="null") is None


def test_mysql_binary_json_is_rendered_as_text():
    j = col("json")
    assert convert(j, {b"a": [True, None, b"x"]}, from_binlog=True) == '{"a": [true, null, "x"]}'


def test_bad_value_names_the_column():
    with pytest.raises(ValueError, match="column 'c' \\(int\\)"):
        convert(col("int"), "abc")


@pytest.mark.parametrize(("value", "expected"), [(5.150000095367432, "5.15"), (0.10000000149011612, "0.1"),
                                                  (3.4028234663852886e38, "3.4028235e+38"), (1.401298464324817e-45, "1e-45")])
def test_float32_shortest(value, expected):
    assert repr(float32_shortest(value)) == expected


def test_parse_time():
    assert parse_time("-838:59:59.000000") == -dt.timedelta(hours=838, minutes=59, seconds=59)
    with pytest.raises(ValueError):
        parse_time("12h")


def _encode_time2(delta: dt.timedelta, fsp: int) -> bytes:
    """MySQL's TIME2 encoder (my_time_packed_to_binary), written independently of the decoder."""
    negative = delta < dt.timedelta(0)
    total = abs(delta)
    secs = total.days * 86400 + total.seconds
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    hms = (h << 12) | (m << 6) | s
    packed = (hms << 24) + total.microseconds  # MY_PACKED_TIME_MAKE
    if negative:
        packed = -packed
    nfrac = FRACTION_BYTES[fsp]
    intpart = packed >> 24  # arithmetic shift (floor)
    frac_us = packed - (intpart << 24) if packed >= 0 else -((-packed) % (1 << 24))  # C remainder
    if nfrac == 0:
        return struct.pack(">I", 0x800000 + intpart)[1:]
    if nfrac == 3:
        return struct.pack(">Q", packed + 0x800000000000)[2:]
    unit = 10000 if nfrac == 1 else 100
    frac = int(frac_us / unit)  # C division truncates
    head = struct.pack(">I", 0x800000 + intpart)[1:]
    return head + (frac & (0xFF if nfrac == 1 else 0xFFFF)).to_bytes(nfrac, "big")


@pytest.mark.parametrize("fsp", range(7))
@pytest.mark.parametrize("text", ["00:00:00", "-00:00:01.5", "-00:00:00.25", "12:34:56.789", "-838:59:58.999999",
                                  "838:59:59", "-01:00:00", "-12:00:00.5", "00:00:00.000001"])
def test_time2_decoder_round_trips_every_precision(fsp, text):
    value = parse_time(text)
    micros = value.days * 86400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = -1 if micros < 0 else 1
    step = 10 ** (6 - fsp)
    value = dt.timedelta(microseconds=sign * (abs(micros) // step * step))  # what a TIME(fsp) column holds
    assert decode_time2(_encode_time2(value, fsp), fsp) == value


def test_geometry_point_and_collection():
    point = struct.pack("<I", 4326) + struct.pack("<BIdd", 1, 1, 1.0, 2.0)
    assert geometry_to_json(point) == '{"coordinates":[1.0,2.0],"type":"Point","srid":4326}'
    line = struct.pack("<BII", 1, 2, 2) + struct.pack("<dddd", 0, 0, 1, 1)
    coll = struct.pack("<I", 0) + struct.pack("<BII", 1, 7, 1) + line
    assert geometry_to_json(coll) == '{"geometries":[{"type":"LineString","coordinates":[[0.0,0.0],[1.0,1.0]]}],"type":"GeometryCollection","srid":0}'


@pytest.mark.parametrize(
    ("column_type", "data_type", "expected"),
    [
        ("tinyint(1)", "tinyint", "BOOLEAN"), ("tinyint(1) unsigned", "tinyint", "SMALLINT"), ("tinyint(4)", "tinyint", "TINYINT"),
        ("smallint(5) unsigned", "smallint", "INT"), ("mediumint(8) unsigned", "mediumint", "INT"),
        ("int(10) unsigned", "int", "BIGINT"), ("bigint(20) unsigned", "bigint", "DECIMAL(20, 0)"), ("bigint(20)", "bigint", "BIGINT"),
        ("decimal(10,2)", "decimal", "DECIMAL(10, 2)"), ("decimal(65,30)", "decimal", "STRING"),
        ("float", "float", "FLOAT"), ("double", "double", "DOUBLE"), ("bit(1)", "bit", "BOOLEAN"), ("bit(10)", "bit", "BINARY(2)"),
        ("year(4)", "year", "INT"), ("date", "date", "DATE"), ("time(3)", "time", "TIME(3)"),
        ("datetime(6)", "datetime", "TIMESTAMP(6)"), ("timestamp(3)", "timestamp", "TIMESTAMP_LTZ(3)"),
        ("varchar(10)", "varchar", "STRING"), ("longtext", "longtext", "STRING"), ("json", "json", "STRING"),
        ("enum('a','b')", "enum", "STRING"), ("set('a')", "set", "STRING"), ("point", "point", "STRING"),
        ("binary(16)", "binary", "BYTES"), ("varbinary(3)", "varbinary", "BYTES"), ("mediumblob", "mediumblob", "BYTES"),
    ],
)
def test_type_mapping_from_information_schema(column_type, data_type, expected):
    row = {"COLUMN_NAME": "c", "DATA_TYPE": data_type, "COLUMN_TYPE": column_type, "IS_NULLABLE": "YES",
           "DATETIME_PRECISION": column_type[column_type.find("(") + 1] if data_type in ("time", "datetime", "timestamp") else None}
    assert to_data_type(column_from_information_schema(row)).to_sql() == expected


def test_primary_key_columns_are_not_null_and_enum_labels_parse():
    row = {"COLUMN_NAME": "id", "DATA_TYPE": "int", "COLUMN_TYPE": "int(11)", "IS_NULLABLE": "NO"}
    assert to_data_type(column_from_information_schema(row, primary_key=True)).nullable is False
    assert parse_labels("enum('a','it''s','x,y')") == ("a", "it's", "x,y")
    assert to_data_type(col("tinyint", width=1)).root is TypeRoot.BOOLEAN
