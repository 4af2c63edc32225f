"""FORMATS, create_format, is_insert_only, format_options: the identifiers as Flink spells them."""

from __future__ import annotations

import pytest
from format_samples import ALL_TYPES

from changelake.changelog import INSERT_ONLY, RETRACT, ChangelogRow
from changelake.formats import FORMATS, ChangelogFormat, create_format, format_options, is_insert_only
from changelake.formats.errors import FormatOptionError, UnknownFormatError

INSERT_ONLY_FORMATS = ["json", "csv", "raw", "avro", "avro-confluent"]
CHANGELOG_FORMATS = ["debezium-json", "canal-json", "maxwell-json"]


def test_identifiers():
    assert sorted(FORMATS) == sorted(INSERT_ONLY_FORMATS + CHANGELOG_FORMATS)
    for name, cls in FORMATS.items():
        assert cls.name == name


@pytest.mark.parametrize("name", INSERT_ONLY_FORMATS)
def test_insert_only(name):
    assert is_insert_only(name)
    assert FORMATS[name].changelog_mode == INSERT_ONLY
    assert not issubclass(FORMATS[name], ChangelogFormat)


@pytest.mark.parametrize("name", CHANGELOG_FORMATS)
def test_changelog_formats(name):
    assert not is_insert_only(name)
    assert FORMATS[name].changelog_mode == RETRACT
    assert issubclass(FORMATS[name], ChangelogFormat)
    assert "ignore-parse-errors" in FORMATS[name].supported_options()


def test_unknown_format_lists_supported():
    with pytest.raises(UnknownFormatError) as err:
        create_format("protobuf", ALL_TYPES, {})
    assert str(err.value) == (
        "Could not find any format for identifier 'protobuf'. Available format identifiers are: "
        "avro, avro-confluent, canal-json, csv, debezium-json, json, maxwell-json, raw"
    )
    assert isinstance(err.value, FormatOptionError)
    with pytest.raises(UnknownFormatError):
        is_insert_only("debezium-avro")


def test_create_and_use():
    fmt = create_format("json", ALL_TYPES.project(["id"]), {})
    assert fmt.encode(ChangelogRow.insert({"id": 4, "other": 1})) == b'{"id":4}'


def test_format_options_strips_prefix():
    raw = {"value.json.ignore-parse-errors": "true", "key.json.fail-on-missing-field": "true", "topic": "t"}
    assert format_options(raw, "json", "value.") == {"ignore-parse-errors": "true"}
    assert format_options(raw, "json", "key.") == {"fail-on-missing-field": "true"}
    assert format_options({"debezium-json.include-schema.enabled": "true"}, "debezium-json") == {
        "include-schema.enabled": "true"
    }
