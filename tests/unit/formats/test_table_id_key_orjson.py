"""Kafka keys (formats/json_values.py, its key section) written through orjson are byte-identical to the previous
encoder (``json_values.dumps`` of the fields from ``to_json_value``) on random inputs, errors
included."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import pytest

from changelake.changelog import Schema, parse_data_type
from changelake.formats import json_values
from changelake.formats.errors import EncodeError
from changelake.formats.json_values import KeyFormat, encode_table_key

TYPES: dict[str, list[Any]] = {
    "INT": [0, -1, 2**31 - 1, -(2**31), 7, 2**31, True, "3"],
    "BIGINT": [2**63 - 1, -(2**63), 2**63, 12345, 0],
    "STRING": ["eu", "é", 'q"uote', "back\\slash", "\x00\x1f\x7f", "\u2028", "\ud800", "😀", ""],
    "DECIMAL(10, 2)": [Decimal("1.5"), Decimal("-0.01"), Decimal("99999999.99"), Decimal("1E+3"), Decimal("NaN"), 3],
    "DOUBLE": [0.0, -0.0, 1e-5, 1e-4, 0.1, 1e16, 1e22, 123456789.125, float("nan"), float("inf"), 2.5e-300],
    "FLOAT": [1.5, 3.4e38, 1e-7],
    "BOOLEAN": [True, False, 1],
    "DATE": [dt.date(2024, 2, 29), dt.date(1, 1, 1)],
    "TIMESTAMP(3)": [dt.datetime(2024, 1, 1, 8, 0, 0, 123000), dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 0, 0, 0, 5)],
    "TIME": [dt.time(12, 30), dt.time(0, 0, 0, 1000)],
}


def old_key(table: str, schema: Schema, row: dict[str, Any]) -> bytes:
    """The encoder before orjson: dumps of TableId + to_json_value of each key column."""
    fields: dict[str, Any] = {"TableId": table}
    for name in schema.primary_key:
        fields[name] = json_values.to_json_value(row.get(name), schema.column(name).type, name)
    return json_values.dumps(fields)


@pytest.mark.parametrize("seed", range(5))
def test_orjson_keys_equal_the_previous_encoder(seed: int) -> None:
    rnd = random.Random(seed)
    checked = errors = 0
    for _ in range(600):
        names = rnd.sample(list(TYPES), rnd.randint(1, 3))
        cols = [(f"c{i}", parse_data_type(t + (" NOT NULL" if rnd.random() < 0.5 else ""))) for i, t in enumerate(names)]
        schema = Schema.of(cols, [c for c, _ in cols])
        row = {c: (None if rnd.random() < 0.05 else rnd.choice(TYPES[t])) for (c, _), t in zip(cols, names)}
        table = rnd.choice(["db.t", "kafka_test.customers", "d\u00e9.t\ud83d\ude00"])
        try:
            want = old_key(table, schema, row)
        except EncodeError as exc:
            with pytest.raises(EncodeError) as got:
                encode_table_key(table, schema, row, KeyFormat.JSON)
            assert str(got.value) == str(exc)
            errors += 1
            continue
        assert encode_table_key(table, schema, row, KeyFormat.JSON) == want, (schema, row)
        checked += 1
    assert checked > 300 and errors > 10


def test_table_without_key_and_truncate() -> None:
    schema = Schema.of([("id", parse_data_type("INT"))])
    assert encode_table_key("db.t", schema, {"id": 1}) == b'{"TableId":"db.t"}'
    keyed = Schema.of([("id", parse_data_type("INT NOT NULL"))], ["id"])
    assert encode_table_key("db.t", keyed, None) == b'{"TableId":"db.t"}'
    assert encode_table_key("db.t", keyed, {"id": 4}) == b'{"TableId":"db.t","id":4}'


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("key_format", list(KeyFormat))
def test_table_key_encoder_equals_encode_table_key(seed: int, key_format: KeyFormat) -> None:
    """The sink's per-table key encoder (one integer key column: a fixed prefix and the int) gives
    encode_table_key's bytes and errors for every row, one- and several-column keys."""
    from changelake.formats.json_values import table_key_encoder

    rnd = random.Random(seed)
    for _ in range(300):
        names = rnd.sample(list(TYPES), rnd.randint(1, 2)) if rnd.random() < 0.5 else [rnd.choice(["INT", "BIGINT"])]
        cols = [(f"c{i}", parse_data_type(t + (" NOT NULL" if rnd.random() < 0.5 else ""))) for i, t in enumerate(names)]
        schema = Schema.of(cols, [c for c, _ in cols])
        table = rnd.choice(["db.t", "kafka_test.customers", "d\u00e9.t\ud83d\ude00", 'q"t.x'])
        encode = table_key_encoder(table, schema, key_format)
        for _ in range(5):
            row = None if rnd.random() < 0.03 else {
                c: (None if rnd.random() < 0.05 else rnd.choice(TYPES[t])) for (c, _), t in zip(cols, names)}
            try:
                want: Any = encode_table_key(table, schema, row, key_format)
            except (EncodeError, UnicodeError) as exc:  # csv writes text, which a lone surrogate fails
                want = (type(exc), str(exc))
            try:
                got: Any = encode(row)
            except (EncodeError, UnicodeError) as exc:
                got = (type(exc), str(exc))
            assert got == want, (schema, row)
    assert table_key_encoder("db.t", None)({"a": 1}) == encode_table_key("db.t", None, {"a": 1})
