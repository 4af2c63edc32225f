"""The upsert-kafka sink's batch encoding (to_records / write_all's path) gives exactly the records
of to_record row by row, for every layout and format; JsonFormat.encode_values_many gives exactly
encode_values' bytes and errors."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

from changelake.changelog import ChangelogRow, RowKind, Schema, parse_data_type
from changelake.connectors.upsert_kafka import create_sink
from changelake.formats.errors import EncodeError
from changelake.formats.json import JsonFormat

SCHEMA = Schema.of(
    [
        ("id", parse_data_type("BIGINT NOT NULL")),
        ("region", parse_data_type("STRING NOT NULL")),
        ("small", parse_data_type("TINYINT")),
        ("amount", parse_data_type("DECIMAL(10, 2)")),
        ("ts", parse_data_type("TIMESTAMP(3)")),
        ("ok", parse_data_type("BOOLEAN")),
        ("ratio", parse_data_type("DOUBLE")),
        ("100%", parse_data_type("STRING")),
    ],
    ["region", "id"],
)
#: the sink's table: Avro names cannot hold "%"
SINK_SCHEMA = Schema.of([(c.name, c.type) for c in SCHEMA.columns if c.name != "100%"], ["region", "id"])


def random_values(rnd: random.Random) -> dict[str, object]:
    return {
        "id": rnd.randint(-(2**63), 2**63 - 1) if rnd.random() < 0.1 else rnd.randint(0, 50),
        "region": rnd.choice(["eu", "us", 'quo"te', "tab\there", "é-ü", "\x01ctl", "\ud800" if rnd.random() < 0.05 else "x"]),
        "small": rnd.choice([None, 0, 127, -128, 5]),
        "amount": rnd.choice([None, Decimal("1.5"), Decimal("-0.01"), Decimal("12345678.99"), Decimal("NaN")]),
        "ts": rnd.choice([None, dt.datetime(2024, 1, 1, 8, 0, 0, 123000), dt.datetime(2024, 5, 6, 7, 8, 9)]),
        "ok": rnd.choice([None, True, False]),
        "ratio": rnd.choice([None, 0.1, 1e16, -2.5, float("nan"), float("inf")]),
        "100%": rnd.choice([None, "p%s", "%d%%"]),
    }


def sink(**extra: str):  # type: ignore[no-untyped-def]
    o = {
        "connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": "127.0.0.1:1",
        "key.format": "json", "value.format": "json",
    }
    o.update(extra)
    s = create_sink(o, SINK_SCHEMA)
    s.build_formats()
    return s


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"value.fields-include": "EXCEPT_KEY"},
        {"key.format": "avro", "value.format": "avro"},
        {"key.format": "json", "value.format": "csv"},
        {"value.json.encode.ignore-null-fields": "true"},
    ],
)
def test_batch_records_equal_row_records(extra: dict[str, str]) -> None:
    s = sink(**extra)
    rnd = random.Random(len(extra))
    kinds = [RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.UPDATE_BEFORE, RowKind.DELETE]
    rows = []
    for i in range(400):
        values = random_values(rnd)
        values.pop("100%")
        values["region"] = values["region"] if values["region"] != "\ud800" else "x"  # keys stay encodable
        if isinstance(values["amount"], Decimal) and values["amount"].is_nan():
            values["amount"] = None  # a DECIMAL cannot hold NaN: an error, tested below
        meta = {"timestamp": 1_700_000_000_000 + i} if rnd.random() < 0.3 else None
        rows.append(ChangelogRow(rnd.choice(kinds), values, None, meta))
    want = [r for r in map(s.to_record, rows) if r is not None]
    assert s.to_records(rows) == want


def test_json_encode_values_many_equals_encode_values_and_its_errors() -> None:
    fmt = JsonFormat(SCHEMA)
    rnd = random.Random(7)
    for _ in range(200):
        batch = [random_values(rnd) for _ in range(rnd.randint(1, 20))]
        if rnd.random() < 0.2:
            batch[rnd.randrange(len(batch))].pop("ratio")  # a missing column is null
        try:
            want = [fmt.encode_values(v) for v in batch]
        except EncodeError as exc:
            with pytest.raises(EncodeError) as got:
                fmt.encode_values_many(batch)
            assert str(got.value) == str(exc)
            continue
        assert fmt.encode_values_many(batch) == want


@pytest.mark.parametrize(
    "bad, column",
    [({"id": 2**63}, "id"), ({"small": 128}, "small"), ({"small": True}, "small"), ({"id": "7"}, "id"), ({"amount": 1.5}, "amount")],
)
def test_json_batch_refuses_what_the_row_encoder_refuses(bad: dict[str, object], column: str) -> None:
    fmt = JsonFormat(SCHEMA)
    good = {"id": 1, "region": "eu", "small": 1, "amount": Decimal("1.00"), "ts": None, "ok": None, "ratio": None, "100%": None}
    batch = [good, {**good, **bad}, good]
    try:
        want: list[bytes] | None = [fmt.encode_values(v) for v in batch]
    except EncodeError as exc:
        with pytest.raises(EncodeError) as got:
            fmt.encode_values_many(batch)
        assert str(got.value) == str(exc) and column in str(exc)
        want = None
    if want is not None:
        assert fmt.encode_values_many(batch) == want


PREFIXED = Schema.of(
    [("k_id", parse_data_type("INT NOT NULL")), ("region", parse_data_type("STRING")), ("pv", parse_data_type("BIGINT"))],
    ["k_id"],
)


def test_batch_records_with_a_key_prefix_equal_row_records() -> None:
    o = {
        "connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": "127.0.0.1:1",
        "key.format": "json", "value.format": "json", "key.fields-prefix": "k_", "value.fields-include": "EXCEPT_KEY",
    }
    s = create_sink(o, PREFIXED)
    s.build_formats()
    rows = [ChangelogRow(k, {"k_id": i, "region": f"r{i % 3}", "pv": i * 2})
            for i, k in enumerate([RowKind.INSERT, RowKind.DELETE, RowKind.UPDATE_AFTER] * 20)]
    records = s.to_records(rows)
    assert records == [s.to_record(r) for r in rows]
    assert records[0].key == b'{"id":0}' and records[1].value is None


def test_delivery_reports_only_for_errors_unless_set() -> None:
    assert sink().producer_config()["delivery.report.only.error"] is True
    assert sink(**{"properties.delivery.report.only.error": "false"}).producer_config()["delivery.report.only.error"] is False
