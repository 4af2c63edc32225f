"""The ``csv`` format: exact lines, round trips, quoting, NULL handling, options."""

from __future__ import annotations

import pytest
from format_samples import ALL_TYPES, ROW_A, ROW_B, assert_same_values

from changelake.changelog import ChangelogRow, DataType, RowKind, Schema
from changelake.formats.csv import CsvFormat
from changelake.formats.errors import DecodeError, FormatOptionError, FormatSchemaError

SMALL = Schema.of([("id", DataType.of("INT")), ("name", DataType.of("STRING")), ("price", DataType.decimal(10, 2))])


@pytest.mark.parametrize("kind", list(RowKind))
@pytest.mark.parametrize("values", [ROW_A, ROW_B], ids=["row_a", "row_b"])
def test_round_trip_every_kind_as_insert(kind, values):
    fmt = CsvFormat(ALL_TYPES, {"null-literal": "\\N"})
    [row] = fmt.decode(fmt.encode(ChangelogRow(kind, values)))
    assert row.kind is RowKind.INSERT
    assert_same_values(ALL_TYPES, row.values, values)


def test_golden_line():
    assert CsvFormat(ALL_TYPES, {}).encode(ChangelogRow.insert(ROW_A)) == (
        "1,true,-128,32767,-2147483648,-12.34,0.00001,18446744073709551615,5.15,0.1,a😀b,"
        "AAAAAAAAAAAAAAAAAAAAAQ==,2024-02-29,-00:00:01.5,838:59:59,2018-05-29 17:36:19.7,"
        "2024-01-01 10:00:00.12,2024-01-01 02:00:00.12Z,"
    ).encode("utf-8")


def test_quoting_and_nulls():
    fmt = CsvFormat(SMALL, {})
    data = fmt.encode(ChangelogRow.insert({"id": 1, "name": 'x,"y"\nz', "price": None}))
    assert data == b'1,"x,""y""\nz",'
    [row] = fmt.decode(data)
    assert row.values == {"id": 1, "name": 'x,"y"\nz', "price": None}


def test_default_null_is_empty_field():
    fmt = CsvFormat(SMALL, {})
    assert fmt.encode(ChangelogRow.insert({"id": None, "name": None, "price": None})) == b",,"
    assert fmt.decode(b",,")[0].values == {"id": None, "name": None, "price": None}


def test_null_literal_keeps_empty_strings():
    fmt = CsvFormat(SMALL, {"null-literal": "NULL"})
    data = fmt.encode(ChangelogRow.insert({"id": 1, "name": "", "price": None}))
    assert data == b"1,,NULL"
    assert fmt.decode(data)[0].values == {"id": 1, "name": "", "price": None}


def test_delimiter_quote_and_comments():
    fmt = CsvFormat(SMALL, {"field-delimiter": "\\t", "quote-character": "'", "allow-comments": "true"})
    assert fmt.encode(ChangelogRow.insert({"id": 1, "name": "a\tb", "price": 1})) == b"1\t'a\tb'\t1.00"
    assert fmt.decode(b"# a comment") == []
    assert fmt.decode(b"2\t'it''s'\t3.5")[0].values["name"] == "it's"


def test_disable_quote_character_needs_escape():
    fmt = CsvFormat(SMALL, {"disable-quote-character": "true", "escape-character": "\\\\"})
    data = fmt.encode(ChangelogRow.insert({"id": 1, "name": "a,b", "price": 1}))
    assert data == b"1,a\\,b,1.00"
    assert fmt.decode(data)[0].values["name"] == "a,b"


def test_parse_errors():
    fmt = CsvFormat(SMALL, {})
    with pytest.raises(DecodeError) as err:
        fmt.decode(b"1,a,abc")
    assert err.value.field == "price" and "Corrupt csv message at field 'price'" in str(err.value)
    with pytest.raises(DecodeError, match="Row length mismatch. 3 fields expected but was 2."):
        fmt.decode(b"1,a")
    assert CsvFormat(SMALL, {"ignore-parse-errors": "true"}).decode(b"1,a,abc") == []


def test_option_errors():
    with pytest.raises(FormatOptionError, match="Option 'field-delimiter' must be a string with single character, but was: ;;"):
        CsvFormat(SMALL, {"field-delimiter": ";;"})
    with pytest.raises(FormatOptionError, match="Format cannot define a quote character and disabled quote character"):
        CsvFormat(SMALL, {"disable-quote-character": "true", "quote-character": "'"})
    with pytest.raises(FormatSchemaError, match="The 'csv' format needs a table schema"):
        CsvFormat(None, {})
