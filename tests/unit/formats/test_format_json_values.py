"""The shared JSON value codec: the spellings of binlog-types.md and DESIGN.md, both directions."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from changelake.changelog import DataType
from changelake.formats.errors import DecodeError, EncodeError
from changelake.formats.json_values import (
    dumps,
    float32_shortest,
    from_json_value,
    loads,
    to_json_untyped,
    to_json_value,
)
from changelake.formats.options import TimestampFormat

UTC = dt.timezone.utc


def text_of(value, dtype, **kw):
    return dumps(to_json_value(value, dtype, "c", **kw)).decode("utf-8")


@pytest.mark.parametrize(
    "value, dtype, text",
    [
        (Decimal("-12.34"), DataType.decimal(10, 2), "-12.34"),
        (Decimal("0.00"), DataType.decimal(10, 2), "0.00"),
        (Decimal("0"), DataType.decimal(10, 2), "0.00"),
        (Decimal("0.00001"), DataType.decimal(5, 5), "0.00001"),
        (Decimal("-0.12345"), DataType.decimal(5, 5), "-0.12345"),
        (Decimal("1E-9"), DataType.decimal(20, 10), "0.0000000010"),
        (Decimal("18446744073709551615"), DataType.decimal(20, 0), "18446744073709551615"),
        (18446744073709551615, DataType.decimal(20, 0), "18446744073709551615"),
        (Decimal("9223372036854775808"), DataType.decimal(20, 0), "9223372036854775808"),
        (5.150000095367432, DataType.of("FLOAT"), "5.15"),
        (0.10000000149011612, DataType.of("FLOAT"), "0.1"),
        (16777216.0, DataType.of("FLOAT"), "16777216.0"),
        (0.1, DataType.of("DOUBLE"), "0.1"),
        (float("nan"), DataType.of("DOUBLE"), '"NaN"'),
        (True, DataType.of("BOOLEAN"), "true"),
        (dt.date(2024, 2, 29), DataType.of("DATE"), '"2024-02-29"'),
        (dt.date(1, 1, 1), DataType.of("DATE"), '"0001-01-01"'),
        (-dt.timedelta(seconds=1.5), DataType.of("TIME", precision=6), '"-00:00:01.5"'),
        (dt.timedelta(hours=838, minutes=59, seconds=59), DataType.of("TIME"), '"838:59:59"'),
        (dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=789000), DataType.of("TIME", precision=3), '"12:34:56.789"'),
        (-dt.timedelta(hours=1), DataType.of("TIME"), '"-01:00:00"'),
        (-dt.timedelta(hours=838, minutes=59, seconds=59), DataType.of("TIME"), '"-838:59:59"'),
        (dt.datetime(2018, 5, 29, 17, 36, 19, 700000), DataType.of("TIMESTAMP", precision=6), '"2018-05-29 17:36:19.7"'),
        (dt.datetime(2024, 1, 1, 10, 0, 0, 120000), DataType.of("TIMESTAMP", precision=3), '"2024-01-01 10:00:00.12"'),
        (dt.datetime(2024, 1, 1, 10, 0, 0), DataType.of("TIMESTAMP", precision=3), '"2024-01-01 10:00:00"'),
        (dt.datetime(2024, 1, 1, 2, 0, 0, 120000, tzinfo=UTC), DataType.of("TIMESTAMP_LTZ", precision=3), '"2024-01-01 02:00:00.12Z"'),
        (
            dt.datetime(2024, 1, 1, 10, 0, 0, 120000, tzinfo=dt.timezone(dt.timedelta(hours=8))),
            DataType.of("TIMESTAMP_LTZ", precision=3),
            '"2024-01-01 02:00:00.12Z"',
        ),
        (b"\x00" * 15 + b"\x01", DataType.of("VARBINARY", length=16), '"AAAAAAAAAAAAAAAAAAAAAQ=="'),
        (b"\xff\x00\xfe", DataType.of("BYTES"), '"/wD+"'),
        ("a😀b", DataType.of("STRING"), '"a😀b"'),
        ('{"b":1,"a":[true,null,"x"]}', DataType.of("STRING"), '"{\\"b\\":1,\\"a\\":[true,null,\\"x\\"]}"'),
        (None, DataType.decimal(10, 2), "null"),
    ],
)
def test_encode_spelling_and_decode_back(value, dtype, text):
    assert text_of(value, dtype) == text
    back = from_json_value(loads(text.encode("utf-8")), dtype, "c")
    if dtype.root.value == "FLOAT":
        assert float32_shortest(back) == float32_shortest(value)
    elif isinstance(value, float) and value != value:
        assert back != back
    elif dtype.root.value == "DECIMAL" and value is not None:
        assert back == Decimal(value) and format(back, "f") == text
    elif dtype.root.value == "TIMESTAMP_LTZ":
        assert back == value and back.tzinfo == UTC
    else:
        assert back == value and type(back) is type(value)


def test_iso_timestamp_standard():
    ts = dt.datetime(2024, 1, 1, 10, 0, 0, 120000)
    assert text_of(ts, DataType.of("TIMESTAMP"), timestamp_format=TimestampFormat.ISO_8601) == '"2024-01-01T10:00:00.12"'
    ltz = ts.replace(tzinfo=UTC)
    assert text_of(ltz, DataType.of("TIMESTAMP_LTZ"), timestamp_format=TimestampFormat.ISO_8601) == '"2024-01-01T10:00:00.12Z"'
    # both spellings are read whatever the option says
    assert from_json_value("2024-01-01T10:00:00.12", DataType.of("TIMESTAMP"), "c") == ts
    assert from_json_value("2024-01-01T10:00:00.12+08:00", DataType.of("TIMESTAMP_LTZ"), "c") == dt.datetime(
        2024, 1, 1, 2, 0, 0, 120000, tzinfo=UTC
    )


def test_decimal_decoded_without_float_rounding():
    # 0.1 + 0.2 style values and long fractions must not pass through float
    assert from_json_value(loads(b"123456789012345678.91"), DataType.decimal(20, 2), "c") == Decimal("123456789012345678.91")
    assert from_json_value("-12.34", DataType.decimal(10, 2), "c") == Decimal("-12.34")  # numeric string (Canal)


def test_lenient_reading_of_numbers_and_booleans():
    assert from_json_value("42", DataType.of("INT"), "c") == 42
    assert from_json_value(Decimal("42.0"), DataType.of("BIGINT"), "c") == 42
    assert from_json_value("1", DataType.of("BOOLEAN"), "c") is True
    assert from_json_value("FALSE", DataType.of("BOOLEAN"), "c") is False
    assert from_json_value({"a": [1, Decimal("2.5")]}, DataType.of("STRING"), "c") == '{"a":[1,2.5]}'


@pytest.mark.parametrize(
    "json_value, dtype, fragment",
    [
        ("abc", DataType.decimal(10, 2), "'abc' as DECIMAL(10, 2)"),
        (Decimal("123456789.5"), DataType.decimal(10, 2), "does not fit DECIMAL(10, 2)"),
        (128, DataType.of("TINYINT"), "out of range for TINYINT"),
        (Decimal("1.5"), DataType.of("INT"), "as INT"),
        ("AQ=", DataType.of("BYTES"), "as BYTES"),
        ("2015-00-21", DataType.of("DATE"), "as DATE"),
        (19782, DataType.of("DATE"), "unexpected JSON int"),
        ("10:61:00", DataType.of("TIME"), "minutes and seconds must be < 60"),
        ("2024-01-01 02:00:00Z", DataType.of("TIMESTAMP"), "no zone suffix"),
        (1709287200250, DataType.of("TIMESTAMP", precision=3), "unexpected JSON int"),
        (2, DataType.of("BOOLEAN"), "as BOOLEAN"),
    ],
)
def test_decode_errors_name_the_field(json_value, dtype, fragment):
    with pytest.raises(DecodeError) as err:
        from_json_value(json_value, dtype, "after.price", format="debezium-json")
    assert err.value.field == "after.price"
    assert err.value.format == "debezium-json"
    assert fragment in str(err.value)
    assert "field 'after.price'" in str(err.value)


@pytest.mark.parametrize(
    "value, dtype, fragment",
    [
        ("12.34", DataType.decimal(10, 2), None),
        (dt.datetime(2024, 1, 1), DataType.of("TIMESTAMP_LTZ"), "aware datetime"),
        (dt.datetime(2024, 1, 1, tzinfo=UTC), DataType.of("TIMESTAMP"), "naive"),
        (dt.datetime(2024, 1, 1), DataType.of("DATE"), "does not suit type DATE"),
        (b"x", DataType.of("STRING"), "bytes value does not suit type STRING"),
        (2**63, DataType.of("BIGINT"), "out of range for BIGINT"),
        (Decimal("1234567890.12"), DataType.decimal(10, 2), "does not fit DECIMAL(10, 2)"),
    ],
)
def test_encode_errors_name_the_field(value, dtype, fragment):
    if fragment is None:  # numeric strings are fine for DECIMAL
        assert to_json_value(value, dtype, "price") == Decimal("12.34")
        return
    with pytest.raises(EncodeError) as err:
        to_json_value(value, dtype, "price")
    assert err.value.field == "price"
    assert fragment in str(err.value)


def test_dumps_is_compact_utf8_and_keeps_key_order():
    obj = {"b": Decimal("0.00"), "a": [1, None, True, "é😀"], "c": {"x": 1.5}}
    assert dumps(obj) == '{"b":0.00,"a":[1,null,true,"é😀"],"c":{"x":1.5}}'.encode("utf-8")
    # a lone surrogate cannot be UTF-8: the document is escaped instead, and still parses
    assert loads(dumps({"s": "\ud800"})) == {"s": "\ud800"}


def test_untyped_values():
    row = {
        "d": Decimal("1.50"),
        "ts": dt.datetime(2024, 1, 1, 10, 0, 0, 500000),
        "ltz": dt.datetime(2024, 1, 1, 10, 0, tzinfo=UTC),
        "t": dt.timedelta(hours=-1),
        "b": b"\x01",
        "day": dt.date(2024, 1, 1),
        "set": {"b", "a"},
    }
    assert dumps(to_json_untyped(row)) == (
        b'{"d":1.50,"ts":"2024-01-01 10:00:00.5","ltz":"2024-01-01 10:00:00Z","t":"-01:00:00",'
        b'"b":"AQ==","day":"2024-01-01","set":["a","b"]}'
    )
    with pytest.raises(TypeError):
        to_json_untyped(object())
