"""The ``avro`` format: Flink's schema derivation, round trips, and a cross-check with fastavro's
own logical-type reader (an independent decoder of the same bytes)."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal

import fastavro
import pytest
from format_samples import ALL_TYPES, ROW_A, ROW_B, UTC, assert_same_values

from changelake.changelog import ChangelogRow, DataType, RowKind, Schema
from changelake.formats import create_format
from changelake.formats.avro import AvroFormat, avro_schema_for
from changelake.formats.errors import DecodeError, EncodeError, FormatSchemaError

# Avro time-millis is int32 ms (+-596 h): MySQL's 838:59:59 needs TIME(p > 3), i.e. time-micros
AVRO_TYPES = Schema(
    tuple(c if c.name != "t0" else c.__class__("t0", DataType.of("TIME", precision=6)) for c in ALL_TYPES.columns),
    ALL_TYPES.primary_key,
)


@pytest.mark.parametrize("kind", list(RowKind))
@pytest.mark.parametrize("values", [ROW_A, ROW_B], ids=["row_a", "row_b"])
@pytest.mark.parametrize("legacy", ["true", "false"])
def test_round_trip_every_kind_as_insert(kind, values, legacy):
    fmt = AvroFormat(AVRO_TYPES, {"timestamp_mapping.legacy": legacy})
    [row] = fmt.decode(fmt.encode(ChangelogRow(kind, values)))
    assert row.kind is RowKind.INSERT
    assert_same_values(AVRO_TYPES, row.values, values)


def test_schema_derivation_as_flink():
    schema = Schema.of(
        [
            ("id", DataType.of("BIGINT", nullable=False)),
            ("price", DataType.decimal(10, 2)),
            ("day", DataType.of("DATE", nullable=False)),
            ("t", DataType.of("TIME", precision=3)),
            ("t6", DataType.of("TIME", precision=6)),
            ("ts", DataType.of("TIMESTAMP", precision=3)),
            ("ts6", DataType.of("TIMESTAMP", precision=6)),
            ("ltz", DataType.of("TIMESTAMP_LTZ", precision=3)),
            ("small", DataType.of("SMALLINT")),
            ("b", DataType.of("BYTES")),
        ]
    )
    assert avro_schema_for(schema) == {
        "type": "record",
        "name": "record",
        "namespace": "org.apache.flink.avro.generated",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}], "default": None},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "t", "type": ["null", {"type": "int", "logicalType": "time-millis"}], "default": None},
            {"name": "t6", "type": ["null", {"type": "long", "logicalType": "time-micros"}], "default": None},
            {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
            {"name": "ts6", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
            {"name": "ltz", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
            {"name": "small", "type": ["null", "int"], "default": None},
            {"name": "b", "type": ["null", "bytes"], "default": None},
        ],
    }
    local = avro_schema_for(schema, legacy_timestamp_mapping=False)
    assert local["fields"][5]["type"][1]["logicalType"] == "local-timestamp-millis"
    assert local["fields"][7]["type"][1]["logicalType"] == "timestamp-millis"


def test_golden_bytes():
    schema = Schema.of([("id", DataType.of("INT", nullable=False)), ("price", DataType.decimal(10, 2)), ("s", DataType.of("STRING"))])
    data = AvroFormat(schema, {}).encode(ChangelogRow.insert({"id": 1, "price": Decimal("12.34"), "s": None}))
    # zigzag 1 = 0x02; union branch 1 = 0x02, 2 bytes 0x04, 1234 = 0x04D2; union branch 0 (null)
    assert data == b"\x02\x02\x04\x04\xd2\x00"
    assert AvroFormat(schema, {}).encode(ChangelogRow.insert({"id": 1, "price": Decimal("-12.34")}))[3:5] == b"\xfb\x2e"


def test_fastavro_logical_reader_agrees():
    cols = [c for c in ALL_TYPES.columns if c.name not in ("t6", "t0")]  # Avro time-* cannot hold MySQL's range
    schema = Schema(tuple(cols), ("id",))
    data = AvroFormat(schema, {}).encode(ChangelogRow.insert(ROW_A))
    record = fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(avro_schema_for(schema)), None)
    assert record["price"] == Decimal("-12.34")
    assert record["z"] == Decimal("0.00001")
    assert record["big_unsigned"] == Decimal("18446744073709551615")
    assert record["day"] == dt.date(2024, 2, 29)
    assert record["ts3"] == dt.datetime(2018, 5, 29, 17, 36, 19, 700000, tzinfo=UTC)  # wall clock counted as UTC
    assert record["ltz"] == dt.datetime(2024, 1, 1, 2, 0, 0, 120000, tzinfo=UTC)
    assert record["s"] == "a😀b" and record["bin"] == ROW_A["bin"]


def test_time_beyond_a_day_and_negative():
    schema = Schema.of([("t", DataType.of("TIME", precision=6))])
    fmt = AvroFormat(schema, {})
    for value in (-dt.timedelta(seconds=1.5), dt.timedelta(hours=838, minutes=59, seconds=59)):
        assert fmt.decode(fmt.encode(ChangelogRow.insert({"t": value})))[0].values == {"t": value}


def test_time_millis_range_error_names_the_field():
    fmt = AvroFormat(Schema.of([("t", DataType.of("TIME", precision=0))]), {})
    assert fmt.decode(fmt.encode(ChangelogRow.insert({"t": dt.timedelta(hours=-500)})))[0].values == {"t": dt.timedelta(hours=-500)}
    with pytest.raises(EncodeError) as err:
        fmt.encode(ChangelogRow.insert({"t": dt.timedelta(hours=838, minutes=59, seconds=59)}))
    assert err.value.field == "t" and "does not fit Avro time-millis" in str(err.value)


def test_errors():
    schema = Schema.of([("id", DataType.of("INT", nullable=False)), ("price", DataType.decimal(10, 2))])
    fmt = AvroFormat(schema, {})
    with pytest.raises(EncodeError) as err:
        fmt.encode(ChangelogRow.insert({"id": "one"}))
    assert err.value.field == "id" and "str value does not suit type INT NOT NULL" in str(err.value)
    with pytest.raises(DecodeError, match="Corrupt avro message: malformed Avro record"):
        fmt.decode(b"\x02")
    with pytest.raises(DecodeError, match="trailing bytes"):
        fmt.decode(b"\x02\x00\x00")
    with pytest.raises(FormatSchemaError, match="'my col' is not a valid Avro name"):
        create_format("avro", Schema.of([("my col", DataType.of("INT"))]), {})
    with pytest.raises(FormatSchemaError, match="The 'avro' format needs a table schema"):
        create_format("avro", None, {})
