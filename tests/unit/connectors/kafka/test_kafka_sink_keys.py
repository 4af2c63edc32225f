"""The Kafka pipeline sink's shortcut for an update that keeps its primary key: it must agree with
comparing the encoded keys (the Debezium rule: a key change is a delete plus a create)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from changelake.changelog.schema import Schema
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.kafka.sink import _same_key_values
from changelake.formats.json_values import KeyFormat, encode_table_key

SCHEMA = Schema.of([("id", DataType(TypeRoot.BIGINT, False)), ("name", DataType(TypeRoot.STRING)),
                    ("v", DataType(TypeRoot.DOUBLE))], primary_key=("id", "name"))
FLOAT_KEY = Schema.of([("f", DataType(TypeRoot.DOUBLE, False))], primary_key=("f",))
DEC_KEY = Schema.of([("d", DataType.decimal(12, 2))], primary_key=("d",))
DATE_KEY = Schema.of([("d", DataType(TypeRoot.DATE))], primary_key=("d",))


@pytest.mark.parametrize("schema, before, after", [
    (SCHEMA, {"id": 1, "name": "a", "v": 1.0}, {"id": 1, "name": "a", "v": 2.0}),
    (SCHEMA, {"id": 1, "name": "a"}, {"id": 2, "name": "a"}),
    (SCHEMA, {"id": 1, "name": "a"}, {"id": 1, "name": "b"}),
    (SCHEMA, {"id": 1, "name": None}, {"id": 1, "name": None}),
    (FLOAT_KEY, {"f": 0.0}, {"f": -0.0}),
    (FLOAT_KEY, {"f": 1.5}, {"f": 1.5}),
    (DEC_KEY, {"d": Decimal("1.0")}, {"d": Decimal("1.00")}),
    (DATE_KEY, {"d": dt.date(2020, 1, 1)}, {"d": dt.date(2020, 1, 1)}),
])
def test_same_key_shortcut_never_disagrees_with_the_encoded_keys(schema: Schema, before: dict[str, Any],
                                                                 after: dict[str, Any]) -> None:
    for fmt in KeyFormat:
        encoded_equal = encode_table_key("db.t", schema, before, fmt) == encode_table_key("db.t", schema, after, fmt)
        if _same_key_values(schema, before, after):
            assert encoded_equal, (before, after, fmt)


def test_shortcut_taken_for_int_and_str_keys_only() -> None:
    assert _same_key_values(SCHEMA, {"id": 1, "name": "a", "v": 1.0}, {"id": 1, "name": "a", "v": 9.0})
    assert not _same_key_values(SCHEMA, {"id": 1, "name": "a"}, {"id": 2, "name": "a"})
    assert not _same_key_values(SCHEMA, {"id": 1, "name": "a"}, {"id": True, "name": "a"})  # int vs bool
    assert not _same_key_values(FLOAT_KEY, {"f": 0.0}, {"f": -0.0})  # left to the encoded comparison
    assert not _same_key_values(SCHEMA, {"id": 1, "name": "a"}, None)
    assert not _same_key_values(None, {"id": 1}, {"id": 1})
