"""json_encoder_for / json_decoder_for give exactly what to_json_value / from_json_value give
(value, type and error), for every type and a spread of fitting and unfitting values; and the
json format's direct text encoding equals ``dumps(encode_object(...))``."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest

from changelake.changelog import ChangelogRow, Schema, parse_data_type
from changelake.formats.errors import DecodeError, EncodeError
from changelake.formats.json import JsonFormat, decode_object, encode_object
from changelake.formats.json_values import (
    dumps,
    from_json_value,
    json_decoder_for,
    json_encoder_for,
    loads,
    to_json_value,
)
from changelake.formats.options import TimestampFormat

UTC = dt.timezone.utc

TYPES = [
    "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(10, 2)", "DECIMAL(5, 5)",
    "DECIMAL(38, 0)", "DECIMAL(20, 10)", "STRING", "VARCHAR(3)", "CHAR(2)", "BYTES", "BINARY(2)", "DATE", "TIME",
    "TIMESTAMP(3)", "TIMESTAMP(6)", "TIMESTAMP_LTZ(3)",
]


class MyStr(str):
    pass


class MyInt(int):
    pass


VALUES = [
    None, True, False, 0, 1, -1, 2, 127, 128, -129, 2**31, -(2**63), 2**63, 2**64, MyInt(5), 1.5, -0.0, 5.150000095367432,
    float("nan"), float("inf"), float("-inf"), 1e300, Decimal("12.345"), Decimal("12.355"), Decimal("-0.005"),
    Decimal("0"), Decimal("-0.00"), Decimal("99999999.995"), Decimal("1E+40"), Decimal("1E-12"), Decimal("NaN"),
    Decimal("Infinity"), Decimal("sNaN"), Decimal("123456789012345678901234567890.5"), "abc", "", "é\u2603", MyStr("x"),
    "\ud800", b"\x00\x01", bytearray(b"ab"), dt.date(2024, 2, 29), dt.date(1, 1, 1), dt.datetime(2024, 1, 1, 2, 3, 4),
    dt.datetime(2024, 1, 1, 2, 3, 4, 120000), dt.datetime(999, 1, 1, 0, 0, 0, 1), dt.datetime(2024, 1, 1, tzinfo=UTC),
    dt.datetime(2024, 1, 1, 12, 0, 0, 500, tzinfo=dt.timezone(dt.timedelta(hours=2))), dt.time(1, 2, 3, 400000),
    dt.timedelta(seconds=-1.5), dt.timedelta(hours=838), [1], {"a": 1}, object(),
]


def outcome(fn, *args, **kw):
    """(type, value) of a result, or (exception type, message, field) of an error."""
    try:
        value = fn(*args, **kw)
    except (EncodeError, DecodeError) as exc:
        return ("error", type(exc), str(exc), exc.field, type(exc.__cause__))
    if isinstance(value, float) and math.isnan(value):
        return (float, "nan")
    return (type(value), repr(value))


@pytest.mark.parametrize("type_text", TYPES)
@pytest.mark.parametrize("ts_format", list(TimestampFormat))
def test_encoder_equals_to_json_value(type_text, ts_format):
    dtype = parse_data_type(type_text)
    enc = json_encoder_for(dtype, "c", timestamp_format=ts_format, format="fmt")
    for value in VALUES:
        want = outcome(to_json_value, value, dtype, "c", timestamp_format=ts_format, format="fmt")
        assert outcome(enc, value) == want, (type_text, value)


JSON_VALUES = [
    None, True, False, 0, 1, 2, -1, 128, 2**31, 2**63, Decimal("1.0"), Decimal("1.5"), Decimal("12.345"), Decimal("1E+2"),
    Decimal("1E+40"), Decimal("-0.005"), float("nan"), float("inf"), 1.5, "1", " 2 ", "1.50", "true", "FALSE", "0", "x",
    "", "NaN", "AAE=", "not base64!", "2024-02-29", "2024-02-30", "12:00:01.5", "-838:59:59", "25:61:00",
    "2024-01-01 02:03:04", "2024-01-01T02:03:04.123456789", "2024-01-01 02:03:04Z", "2024-01-01 02:03:04+02:00",
    "2024-13-01 00:00:00", "0001-01-01 00:00:00-01:00", "2024-01-01 02:03:04\n", MyStr("7"), MyInt(3), [1, 2], {"a": 1},
]


@pytest.mark.parametrize("type_text", TYPES)
def test_decoder_equals_from_json_value(type_text):
    dtype = parse_data_type(type_text)
    dec = json_decoder_for(dtype, "c", format="fmt")
    for value in JSON_VALUES:
        assert outcome(dec, value) == outcome(from_json_value, value, dtype, "c", format="fmt"), (type_text, value)


SCHEMA = Schema.of(
    [
        ("id", parse_data_type("BIGINT NOT NULL")),
        ("name", parse_data_type("STRING")),
        ("amount", parse_data_type("DECIMAL(10, 2)")),
        ("ts", parse_data_type("TIMESTAMP(3)")),
        ("d", parse_data_type("DOUBLE")),
        ("ok", parse_data_type("BOOLEAN")),
    ],
    ["id"],
)

ROWS = [
    {"id": 1, "name": "a", "amount": Decimal("1.5"), "ts": dt.datetime(2024, 1, 1, 0, 0, 0, 1000), "d": 0.5, "ok": True},
    {"id": 2, "name": None, "amount": None, "ts": None, "d": None, "ok": None},
    {"id": 3},
    {"id": 4, "name": "é\"\\\n\u2603", "amount": 7, "ts": dt.datetime(2024, 1, 1), "d": float("nan"), "ok": 1},
    {"id": 5, "name": "\ud800", "d": float("-inf")},
    {"id": 6, "name": MyStr("sub"), "amount": Decimal("-0.001"), "extra": "ignored"},
]


@pytest.mark.parametrize("options", [{}, {"encode.ignore-null-fields": "true"}, {"timestamp-format.standard": "ISO-8601"}])
def test_json_format_encode_equals_dumps_of_encode_object(options):
    fmt = JsonFormat(SCHEMA, options)
    for values in ROWS:
        want = dumps(
            encode_object(
                values,
                SCHEMA,
                format="json",
                timestamp_format=fmt.options.timestamp_format_standard,
                ignore_null_fields=fmt.options.encode_ignore_null_fields,
            )
        )
        assert fmt.encode(ChangelogRow.insert(values)) == want
        assert fmt.encode_values(values) == want


def test_json_format_encode_errors_name_the_column():
    fmt = JsonFormat(SCHEMA)
    with pytest.raises(EncodeError, match="field 'amount'"):
        fmt.encode_values({"id": 1, "amount": "x"})
    with pytest.raises(EncodeError, match="field 'id'"):
        fmt.encode_values({"id": 2**64})


def test_decode_object_errors_name_the_path():
    obj = loads(b'{"id": 1, "ts": "2024-13-01 00:00:00"}')
    with pytest.raises(DecodeError) as err:
        decode_object(obj, SCHEMA, format="json", path="after")
    assert err.value.field == "after.ts"
    with pytest.raises(DecodeError) as err:
        decode_object(obj, SCHEMA, format="json")
    assert err.value.field == "ts"


def test_codecs_are_per_schema():
    other = Schema.of([("id", parse_data_type("STRING"))])
    assert encode_object({"id": "x"}, other, format="json") == {"id": "x"}
    with pytest.raises(EncodeError):
        encode_object({"id": "x"}, SCHEMA, format="json")


@pytest.mark.parametrize(
    "data",
    [b'{"a":1.5}', b"{", b"{}", b'{"a":NaN}', '{"a":1}', "\ufeff{}", b"\xef\xbb\xbf{}", '{"a":1}'.encode("utf-16"),
     '{"a":1}'.encode("utf-16-le"), '{"a":1}'.encode("utf-32-be"), b'{"a":"\xed\xa0\x80"}', b"[1]", b" 1 ", b"{\xff}",
     bytearray(b'{"a":2}'), b"1"],
)
def test_loads_equals_json_loads(data):
    import json

    def reference(d):
        return json.loads(d, parse_float=Decimal, parse_constant=lambda n: float(n.replace("Infinity", "inf")))

    def run(fn):
        try:
            return ("ok", repr(fn(data)))
        except ValueError as exc:
            return ("error", type(exc), str(exc))

    assert run(loads) == run(reference)


@pytest.mark.parametrize("options", [{}, {"ignore-parse-errors": "true"}, {"fail-on-missing-field": "true"}])
@pytest.mark.parametrize(
    "data",
    [None, b"", b'{"id":1,"name":"a","amount":1.5,"ts":"2024-01-01 00:00:00.5"}', b'[{"id":1},{"id":2,"d":1}]', b"[]",
     b'{"id":"x"}', b"{", b"3", b'{"id":1} ', b'{"id":1}{', b'{"name":"a"}', b'{"id":1,"ts":"2024-13-01 00:00:00"}'],
)
def test_decode_to_values_is_decode_without_rows(options, data):
    fmt = JsonFormat(SCHEMA, options)

    def run(fn):
        try:
            return ("ok", fn(data))
        except DecodeError as exc:
            return ("error", str(exc), exc.field)

    def reference(d):
        # the json format's decode before decode_to_values existed
        if not d:
            return []
        try:
            try:
                doc = loads(d)
            except ValueError as exc:
                raise fmt._corrupt(f"malformed JSON: {exc}", d) from exc
            objects = doc if isinstance(doc, list) else [doc]
            return [
                decode_object(o, SCHEMA, format="json", fail_on_missing_field=fmt.options.fail_on_missing_field)
                for o in objects
            ]
        except DecodeError as exc:
            if fmt.options.ignore_parse_errors:
                return []
            if exc.excerpt is None:
                raise fmt._rewrap(exc, d) from exc.__cause__
            raise

    want = run(reference)
    assert run(fmt.decode_to_values) == want
    assert run(lambda d: [dict(r.values) for r in fmt.decode(d)]) == want
    if want[0] == "ok":
        assert all(r.kind.short_string == "+I" for r in fmt.decode(data))


def test_equal_schemas_share_one_codec_and_debezium_wrappers_rebuild_one_schema_object():
    """Codecs are cached by schema value (a schema rebuilt per message reuses the codec), and the
    debezium-json wrapper of every message of a table yields the same Schema object."""
    from changelake.changelog.schema import Column, Schema
    from changelake.changelog.types import DataType
    from changelake.formats.debezium_json import DebeziumJsonFormat
    from changelake.formats.json import _codec_for

    def make() -> Schema:
        return Schema((Column("id", DataType.of("BIGINT", False)), Column("name", DataType.of("STRING"))), ("id",))

    assert _codec_for(make(), "json") is _codec_for(make(), "json")
    fmt = DebeziumJsonFormat(None, {"schema-include": "true"})
    schema = make()
    first = fmt.decode_events(DebeziumJsonFormat(schema, {"schema-include": "true"}).encode_event(_event(schema, 1)))
    second = fmt.decode_events(DebeziumJsonFormat(schema, {"schema-include": "true"}).encode_event(_event(schema, 2)))
    assert first[0].schema is second[0].schema
    assert second[0].after == {"id": 2, "name": "n2"}


def _event(schema, key):
    from changelake.changelog import DataChangeEvent, Op, TableId

    return DataChangeEvent(TableId("db", "t"), Op.CREATE, None, {"id": key, "name": f"n{key}"}, schema, ts_ms=1)
