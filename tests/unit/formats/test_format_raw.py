"""The ``raw`` format: single column, exact bytes."""

from __future__ import annotations

import pytest

from changelake.changelog import ChangelogRow, DataType, RowKind, Schema
from changelake.formats import create_format
from changelake.formats.errors import DecodeError, FormatOptionError, FormatSchemaError


def one(name: str, type_name: str, **params) -> Schema:
    return Schema.of([(name, DataType.of(type_name, **params))])


@pytest.mark.parametrize("kind", list(RowKind))
def test_string_round_trip(kind):
    fmt = create_format("raw", one("line", "STRING"), {})
    data = fmt.encode(ChangelogRow(kind, {"line": "a😀b"}))
    assert data == "a😀b".encode("utf-8")
    assert fmt.decode(data) == [ChangelogRow(RowKind.INSERT, {"line": "a😀b"})]


def test_bytes_and_charset():
    fmt = create_format("raw", one("payload", "BYTES"), {})
    assert fmt.encode(ChangelogRow.insert({"payload": b"\x00\xff"})) == b"\x00\xff"
    assert fmt.decode(b"\x00\xff")[0].values == {"payload": b"\x00\xff"}
    latin = create_format("raw", one("s", "STRING"), {"charset": "ISO-8859-1"})
    assert latin.encode(ChangelogRow.insert({"s": "é"})) == b"\xe9"


def test_numbers_big_and_little_endian():
    assert create_format("raw", one("n", "INT"), {}).encode(ChangelogRow.insert({"n": 1})) == b"\x00\x00\x00\x01"
    little = create_format("raw", one("n", "BIGINT"), {"endianness": "little-endian"})
    assert little.encode(ChangelogRow.insert({"n": 258})) == b"\x02\x01" + b"\x00" * 6
    assert little.decode(b"\x02\x01" + b"\x00" * 6)[0].values == {"n": 258}
    with pytest.raises(DecodeError) as err:
        create_format("raw", one("n", "INT"), {}).decode(b"\x01")
    assert err.value.field == "n"


def test_null_is_a_null_message():
    fmt = create_format("raw", one("line", "STRING"), {})
    assert fmt.encode(ChangelogRow.insert({"line": None})) is None
    assert fmt.decode(None) == [ChangelogRow(RowKind.INSERT, {"line": None})]


def test_two_columns_is_an_error_naming_the_count():
    schema = Schema.of([("a", DataType.of("STRING")), ("b", DataType.of("STRING"))])
    with pytest.raises(FormatSchemaError) as err:
        create_format("raw", schema, {})
    assert "only supports single physical column" in str(err.value)
    assert "contains 2 physical columns: ['a', 'b']" in str(err.value)


def test_bad_options_and_types():
    with pytest.raises(FormatOptionError, match="Unsupported endianness name: middle"):
        create_format("raw", one("n", "INT"), {"endianness": "middle"})
    with pytest.raises(FormatOptionError, match="Unsupported charset 'klingon'"):
        create_format("raw", one("s", "STRING"), {"charset": "klingon"})
    with pytest.raises(FormatSchemaError, match="doesn't supports 'DATE'"):
        create_format("raw", one("d", "DATE"), {})
