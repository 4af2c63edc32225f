"""Type mapping changelake -> Iceberg -> Arrow and value conversion."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from changelake.changelog.schema import Schema
from changelake.changelog.types import DataType, parse_data_type
from changelake.connectors.iceberg.errors import IcebergTypeError
from changelake.connectors.iceberg.types import (
    format_time,
    rows_to_arrow,
    to_arrow_array,
    to_arrow_type,
    to_iceberg_type,
)


@pytest.mark.parametrize(
    ("flink", "iceberg", "arrow"),
    [
        ("BOOLEAN", BooleanType(), pa.bool_()),
        ("TINYINT", IntegerType(), pa.int32()),
        ("SMALLINT", IntegerType(), pa.int32()),
        ("INT", IntegerType(), pa.int32()),
        ("BIGINT", LongType(), pa.int64()),
        ("FLOAT", FloatType(), pa.float32()),
        ("DOUBLE", DoubleType(), pa.float64()),
        ("DECIMAL(20, 0)", DecimalType(20, 0), pa.decimal128(20, 0)),
        ("DECIMAL(5, 5)", DecimalType(5, 5), pa.decimal128(5, 5)),
        ("DECIMAL(38, 10)", DecimalType(38, 10), pa.decimal128(38, 10)),
        ("DECIMAL(65, 30)", StringType(), pa.large_string()),
        ("CHAR(3)", StringType(), pa.large_string()),
        ("VARCHAR(255)", StringType(), pa.large_string()),
        ("STRING", StringType(), pa.large_string()),
        ("BINARY(16)", BinaryType(), pa.large_binary()),
        ("VARBINARY(16)", BinaryType(), pa.large_binary()),
        ("BYTES", BinaryType(), pa.large_binary()),
        ("DATE", DateType(), pa.date32()),
        ("TIME(3)", StringType(), pa.large_string()),
        ("TIMESTAMP(3)", TimestampType(), pa.timestamp("us")),
        ("TIMESTAMP_LTZ(6)", TimestamptzType(), pa.timestamp("us", tz="UTC")),
    ],
)
def test_type_mapping(flink: str, iceberg: object, arrow: pa.DataType) -> None:
    data_type = parse_data_type(flink)
    assert to_iceberg_type(data_type) == iceberg
    assert to_arrow_type(data_type) == arrow


@pytest.mark.parametrize(
    ("value", "precision", "text"),
    [
        (dt.timedelta(hours=12, minutes=3, seconds=4), 0, "12:03:04"),
        (dt.timedelta(hours=-838, minutes=-59, seconds=-59), 0, "-838:59:59"),
        (dt.timedelta(hours=838, minutes=59, seconds=59), None, "838:59:59"),
        (dt.timedelta(seconds=1, microseconds=500000), 3, "00:00:01.500"),
        (dt.timedelta(seconds=1, microseconds=123456), 6, "00:00:01.123456"),
        (dt.timedelta(seconds=1, microseconds=120000), None, "00:00:01.12"),
        (-dt.timedelta(seconds=1, microseconds=500000), 1, "-00:00:01.5"),
        (dt.timedelta(0), 0, "00:00:00"),
    ],
)
def test_format_time(value: dt.timedelta, precision: int | None, text: str) -> None:
    assert format_time(value, precision) == text


def test_rows_to_arrow_every_type_round_trips() -> None:
    schema = Schema.of(
        [
            ("id", DataType.decimal(20, 0, nullable=False)),
            ("flag", parse_data_type("BOOLEAN")),
            ("small", parse_data_type("SMALLINT")),
            ("big", parse_data_type("BIGINT")),
            ("f", parse_data_type("FLOAT")),
            ("d", parse_data_type("DOUBLE")),
            ("frac", DataType.decimal(5, 5)),
            ("wide", DataType.decimal(65, 30)),
            ("name", parse_data_type("VARCHAR(20)")),
            ("blob", parse_data_type("BYTES")),
            ("day", parse_data_type("DATE")),
            ("t", parse_data_type("TIME(0)")),
            ("wall", parse_data_type("TIMESTAMP(6)")),
            ("instant", parse_data_type("TIMESTAMP_LTZ(6)")),
        ],
        ["id"],
    )
    utc = dt.timezone.utc
    row = {
        "id": Decimal("18446744073709551615"),
        "flag": True,
        "small": -32768,
        "big": -(2**63),
        "f": 1.5,
        "d": 2.25,
        "frac": Decimal("0.12345"),
        "wide": Decimal("12345678901234567890123456789012345.123456789012345678901234567890"),
        "name": "Zoë 😀 中文",
        "blob": b"\x00\xff\x10",
        "day": dt.date(1000, 1, 1),
        "t": dt.timedelta(hours=-838, minutes=-59, seconds=-59),
        "wall": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        "instant": dt.datetime(2038, 1, 19, 3, 14, 7, 123456, tzinfo=utc),
    }
    nulls = {"id": Decimal(1)} | {k: None for k in row if k != "id"}
    table = rows_to_arrow([row, nulls], schema)
    assert table.schema.field("id").nullable is False
    got = table.to_pylist()
    expected = dict(row, wide="12345678901234567890123456789012345.123456789012345678901234567890", t="-838:59:59")
    assert got[0] == expected
    assert got[1] == {"id": Decimal(1)} | {k: None for k in row if k != "id"}


def test_decimal_scale_loss_is_an_error_naming_the_column() -> None:
    with pytest.raises(IcebergTypeError) as info:
        to_arrow_array([Decimal("0.123456")], DataType.decimal(5, 5), pa.decimal128(5, 5), table="db.t", column="frac")
    assert info.value.table == "db.t" and info.value.column == "frac"
    assert "cannot store column 'frac' of table 'db.t' as decimal128(5, 5)" in str(info.value)


def test_int_overflow_is_an_error() -> None:
    with pytest.raises(IcebergTypeError, match="column 'n'"):
        to_arrow_array([2**31], parse_data_type("INT"), pa.int32(), table="db.t", column="n")


def test_narrow_values_into_wider_lake_column() -> None:
    array = to_arrow_array([1, None], parse_data_type("INT"), pa.int64())
    assert array.type == pa.int64() and array.to_pylist() == [1, None]
    decimals = to_arrow_array([Decimal("1.50")], DataType.decimal(5, 2), pa.decimal128(10, 2))
    assert decimals.to_pylist() == [Decimal("1.50")]
