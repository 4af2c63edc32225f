"""The ``json`` format: round trips, golden objects, options and negative paths."""

from __future__ import annotations

from decimal import Decimal

import pytest
from format_samples import ALL_TYPES, ROW_A, ROW_A_JSON, ROW_B, assert_same_values, parse

from changelake.changelog import ChangelogRow, DataType, RowKind, Schema
from changelake.formats import create_format
from changelake.formats.errors import DecodeError, FormatOptionError
from changelake.formats.json import JsonFormat


@pytest.mark.parametrize("kind", list(RowKind))
@pytest.mark.parametrize("values", [ROW_A, ROW_B], ids=["row_a", "row_b"])
def test_round_trip_every_kind_as_insert(kind, values):
    fmt = JsonFormat(ALL_TYPES, {})
    [row] = fmt.decode(fmt.encode(ChangelogRow(kind, values)))
    assert row.kind is RowKind.INSERT  # insert-only: the kind is not written
    assert_same_values(ALL_TYPES, row.values, values)


def test_golden_object():
    data = JsonFormat(ALL_TYPES, {}).encode(ChangelogRow.insert(ROW_A))
    assert parse(data) == ROW_A_JSON
    assert list(parse(data)) == ALL_TYPES.names  # schema order
    # exact spellings that a parsed tree cannot show (scale, no exponent, compactness, UTF-8)
    for fragment in ('"price":-12.34,', '"z":0.00001,', '"big_unsigned":18446744073709551615,', '"f":5.15,', '"s":"a😀b"'):
        assert fragment.encode("utf-8") in data
    assert b": " not in data and b", " not in data


def test_zero_decimal_keeps_its_scale():
    data = JsonFormat(ALL_TYPES, {}).encode(ChangelogRow.insert(ROW_B))
    assert b'"price":0.00,' in data
    assert b'"z":-0.12345,' in data


def test_missing_field_is_null_by_default_and_extra_fields_ignored():
    schema = Schema.of([("id", DataType.of("INT")), ("name", DataType.of("STRING"))])
    [row] = JsonFormat(schema, {}).decode(b'{"id":1,"other":true}')
    assert row.values == {"id": 1, "name": None}


def test_fail_on_missing_field():
    schema = Schema.of([("id", DataType.of("INT")), ("name", DataType.of("STRING"))])
    fmt = JsonFormat(schema, {"fail-on-missing-field": "true"})
    with pytest.raises(DecodeError) as err:
        fmt.decode(b'{"id":1}')
    assert "Could not find field with name 'name'." in str(err.value)
    assert err.value.field == "name" and err.value.format == "json"
    assert err.value.excerpt == b'{"id":1}'


def test_ignore_parse_errors_skips_bad_messages():
    schema = Schema.of([("price", DataType.decimal(10, 2))])
    assert JsonFormat(schema, {"ignore-parse-errors": "TRUE"}).decode(b'{"price":"abc"}') == []
    assert JsonFormat(schema, {"ignore-parse-errors": "true"}).decode(b"{not json") == []
    with pytest.raises(DecodeError) as err:
        JsonFormat(schema, {}).decode(b'{"price":"abc"}')
    assert "Corrupt json message at field 'price'" in str(err.value)
    assert "message starts b'{\"price\":\"abc\"}'" in str(err.value)
    with pytest.raises(DecodeError, match="malformed JSON"):
        JsonFormat(schema, {}).decode(b"{not json")


def test_array_of_objects_and_tombstone():
    schema = Schema.of([("id", DataType.of("INT"))])
    fmt = JsonFormat(schema, {})
    assert [r.values for r in fmt.decode(b'[{"id":1},{"id":2}]')] == [{"id": 1}, {"id": 2}]
    assert fmt.decode(None) == [] and fmt.decode(b"") == []
    with pytest.raises(DecodeError, match="expected a JSON object, got int"):
        fmt.decode(b"5")


def test_iso_timestamps_and_null_fields_option():
    fmt = JsonFormat(ALL_TYPES, {"timestamp-format.standard": "ISO-8601", "encode.ignore-null-fields": "true"})
    obj = parse(fmt.encode(ChangelogRow.insert(ROW_A)))
    assert obj["ts3"] == "2018-05-29T17:36:19.7" and obj["ltz"] == "2024-01-01T02:00:00.12Z"
    assert "note" not in obj
    [row] = fmt.decode(fmt.encode(ChangelogRow.insert(ROW_A)))
    assert_same_values(ALL_TYPES, row.values, ROW_A)


def test_schema_less_mode():
    fmt = create_format("json", None, {})
    [row] = fmt.decode(b'{"a":1,"b":2.5,"c":"x","d":null,"e":true,"f":{"g":[1]}}')
    assert row.values == {"a": 1, "b": 2.5, "c": "x", "d": None, "e": True, "f": {"g": [1]}}
    assert type(row.values["b"]) is float
    assert fmt.encode(ChangelogRow.insert({"x": Decimal("1.10"), "y": None})) == b'{"x":1.10,"y":null}'


# -- negative option paths ------------------------------------------------------------------------
def test_conflicting_options_as_flink():
    with pytest.raises(FormatOptionError) as err:
        JsonFormat(None, {"fail-on-missing-field": "true", "ignore-parse-errors": "true"})
    assert str(err.value) == "fail-on-missing-field and ignore-parse-errors shouldn't both be true."


def test_unknown_option_lists_supported():
    with pytest.raises(FormatOptionError) as err:
        JsonFormat(None, {"fail-on-missing-fields": "true"})
    msg = str(err.value)
    assert "Unsupported options found for 'json'. Unsupported options: fail-on-missing-fields." in msg
    assert "fail-on-missing-field, ignore-parse-errors" in msg
    assert err.value.option == "fail-on-missing-fields"


def test_bad_values():
    with pytest.raises(FormatOptionError, match="Unrecognized option for boolean: yes"):
        JsonFormat(None, {"ignore-parse-errors": "yes"})
    with pytest.raises(FormatOptionError) as err:
        JsonFormat(None, {"timestamp-format.standard": "RFC"})
    assert str(err.value) == "Unsupported value 'RFC' for timestamp-format.standard. Supported values are [SQL, ISO-8601]."


def test_supported_options():
    assert JsonFormat.supported_options() == {
        "fail-on-missing-field",
        "ignore-parse-errors",
        "timestamp-format.standard",
        "map-null-key.mode",
        "map-null-key.literal",
        "encode.decimal-as-plain-number",
        "encode.ignore-null-fields",
    }
