"""DECIMAL values past Python's default 28-digit context: kept exactly or refused, never rounded,
in every place that computes with them (the value codec, Avro, the aggregate's SUM)."""

from __future__ import annotations

import decimal
import io
from decimal import Decimal

import fastavro
import pytest

from changelake.changelog import ChangelogRow, DataType, RowKind, Schema, parse_data_type
from changelake.changelog.aggregate import AggSpec, GroupAggregate
from changelake.changelog.decimals import from_unscaled, quantize
from changelake.formats import create_format
from changelake.formats.avro import AvroFormat, avro_schema_for
from changelake.formats.errors import EncodeError
from changelake.formats.json_values import from_json_value, json_decoder_for, json_encoder_for, to_json_value

D38_10 = DataType.decimal(38, 10)
WIDE = Decimal("1234567890123456789012345678.1234567891")  # 38 digits
NARROW_CONTEXTS = [None, 10]  # the thread's default (28) and a narrower one


@pytest.mark.parametrize("prec", NARROW_CONTEXTS)
def test_quantize_keeps_38_digits_and_refuses_39(prec) -> None:
    with decimal.localcontext() as ctx:
        if prec is not None:
            ctx.prec = prec
        assert quantize(WIDE, 38, 10) == WIDE
        assert quantize(Decimal("-9999999999999999999999999999.99999999994"), 38, 10) == Decimal(
            "-9999999999999999999999999999.9999999999")
        assert quantize(Decimal("0.00000000005"), 38, 10) == Decimal("0.0000000001")  # HALF_UP
        with pytest.raises(ValueError, match=r"does not fit DECIMAL\(38, 10\)"):
            quantize(Decimal("9999999999999999999999999999.99999999995"), 38, 10)  # rounds to 39 digits
        with pytest.raises(ValueError, match="cannot hold"):
            quantize(Decimal("NaN"), 38, 10)


@pytest.mark.parametrize("prec", NARROW_CONTEXTS)
def test_json_value_codec_is_exact_for_38_digits(prec) -> None:
    with decimal.localcontext() as ctx:
        if prec is not None:
            ctx.prec = prec
        assert to_json_value(WIDE, D38_10, "d") == WIDE
        assert json_encoder_for(D38_10, "d")(WIDE) == WIDE
        assert json_encoder_for(D38_10, "d")(10**27) == Decimal(10**27).scaleb(0).quantize(
            Decimal("1E-10"), context=decimal.Context(prec=40))
        assert from_json_value(str(WIDE), D38_10, "d") == WIDE
        assert json_decoder_for(D38_10, "d")(WIDE) == WIDE
        with pytest.raises(EncodeError, match="does not fit"):
            to_json_value(Decimal(10**28), D38_10, "d")


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json", "json"])
def test_each_json_format_round_trips_38_digits(fmt) -> None:
    schema = Schema.of([("id", parse_data_type("INT NOT NULL")), ("d", D38_10)], ["id"])
    f = create_format(fmt, schema, {})
    row = ChangelogRow.insert({"id": 1, "d": WIDE})
    data = f.encode(row)
    assert str(WIDE).encode() in data
    (back,) = f.decode(data)
    assert back.kind is RowKind.INSERT and back.values["d"] == WIDE


def test_avro_decimal_of_38_digits_is_exact_both_ways() -> None:
    schema = Schema.of([("id", parse_data_type("INT NOT NULL")), ("d", D38_10)], ["id"])
    f = AvroFormat(schema, {})
    data = f.encode(ChangelogRow.insert({"id": 1, "d": WIDE}))
    (back,) = f.decode(data)
    assert back.values["d"] == WIDE
    assert from_unscaled(-12345678901234567890123456789012345678, 10) == Decimal("-1234567890123456789012345678.9012345678")
    assert from_unscaled(0, 3) == Decimal("0.000")
    # fastavro's own reader agrees on the bytes
    parsed = fastavro.parse_schema(avro_schema_for(schema))
    assert fastavro.schemaless_reader(io.BytesIO(data), parsed)["d"] == WIDE


def test_sum_over_wide_decimals_is_exact_and_retracts_exactly() -> None:
    agg = GroupAggregate(["g"], [AggSpec.sum("s", "d"), AggSpec.sum("sd", "d", distinct=True)])
    big = Decimal("9999999999999999999999999999.9999999999")
    agg.process_all([ChangelogRow(RowKind.INSERT, {"g": 1, "d": big}),
                     ChangelogRow(RowKind.INSERT, {"g": 1, "d": Decimal("0.0000000001")})])
    assert agg.result()[(1,)]["s"] == Decimal("10000000000000000000000000000.0000000000")
    assert agg.result()[(1,)]["sd"] == Decimal("10000000000000000000000000000.0000000000")
    agg.process(ChangelogRow(RowKind.DELETE, {"g": 1, "d": Decimal("0.0000000001")}))
    assert agg.result()[(1,)]["s"] == big
    # a retraction first: the running sum starts at -v, exactly
    agg2 = GroupAggregate(["g"], [AggSpec.sum("s", "d")])
    agg2.process_all([ChangelogRow(RowKind.INSERT, {"g": 1, "d": big}), ChangelogRow(RowKind.INSERT, {"g": 1, "d": big}),
                      ChangelogRow(RowKind.DELETE, {"g": 1, "d": big})])
    assert agg2.result()[(1,)]["s"] == big
