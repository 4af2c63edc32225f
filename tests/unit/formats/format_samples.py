"""Shared sample schema and values for the format tests (imported by the test modules)."""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from typing import Any, Mapping

from changelake.changelog import DataType, Schema, TypeRoot

UTC = dt.timezone.utc

#: one column per type root the formats must carry, with the MySQL spellings of binlog-types.md
ALL_TYPES = Schema.of(
    [
        ("id", DataType.of("BIGINT", nullable=False)),
        ("flag", DataType.of("BOOLEAN")),
        ("tiny", DataType.of("TINYINT")),
        ("small", DataType.of("SMALLINT")),
        ("num", DataType.of("INT")),
        ("price", DataType.decimal(10, 2)),
        ("z", DataType.decimal(5, 5)),
        ("big_unsigned", DataType.decimal(20, 0)),
        ("f", DataType.of("FLOAT")),
        ("dbl", DataType.of("DOUBLE")),
        ("s", DataType.of("VARCHAR", length=16)),
        ("bin", DataType.of("VARBINARY", length=16)),
        ("day", DataType.of("DATE")),
        ("t6", DataType.of("TIME", precision=6)),
        ("t0", DataType.of("TIME", precision=0)),
        ("ts3", DataType.of("TIMESTAMP", precision=3)),
        ("ts6", DataType.of("TIMESTAMP", precision=6)),
        ("ltz", DataType.of("TIMESTAMP_LTZ", precision=3)),
        ("note", DataType.of("STRING")),
    ],
    primary_key=["id"],
)

ROW_A: dict[str, Any] = {
    "id": 1,
    "flag": True,
    "tiny": -128,
    "small": 32767,
    "num": -2147483648,
    "price": Decimal("-12.34"),
    "z": Decimal("0.00001"),
    "big_unsigned": Decimal("18446744073709551615"),
    "f": struct.unpack("<f", struct.pack("<f", 5.15))[0],  # what a binlog reader hands over: 5.150000095367432
    "dbl": 0.1,
    "s": "a😀b",
    "bin": bytes.fromhex("00000000000000000000000000000001"),
    "day": dt.date(2024, 2, 29),
    "t6": -dt.timedelta(seconds=1, microseconds=500000),
    "t0": dt.timedelta(hours=838, minutes=59, seconds=59),
    "ts3": dt.datetime(2018, 5, 29, 17, 36, 19, 700000),
    "ts6": dt.datetime(2024, 1, 1, 10, 0, 0, 120000),
    "ltz": dt.datetime(2024, 1, 1, 2, 0, 0, 120000, tzinfo=UTC),
    "note": None,
}

ROW_B: dict[str, Any] = {
    "id": 2,
    "flag": False,
    "tiny": 0,
    "small": None,
    "num": 7,
    "price": Decimal("0.00"),
    "z": Decimal("-0.12345"),
    "big_unsigned": Decimal("9223372036854775808"),
    "f": 0.1,
    "dbl": None,
    "s": "",
    "bin": bytes.fromhex("FF00FE"),
    "day": None,
    "t6": dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=789000),
    "t0": -dt.timedelta(hours=1),
    "ts3": None,
    "ts6": dt.datetime(2024, 1, 1, 0, 0, 0),
    "ltz": None,
    "note": "x,\"y\"\nz",
}

#: ROW_A as the JSON formats must write it (parsed with Decimal numbers)
ROW_A_JSON: dict[str, Any] = {
    "id": 1,
    "flag": True,
    "tiny": -128,
    "small": 32767,
    "num": -2147483648,
    "price": Decimal("-12.34"),
    "z": Decimal("0.00001"),
    "big_unsigned": 18446744073709551615,
    "f": Decimal("5.15"),
    "dbl": Decimal("0.1"),
    "s": "a😀b",
    "bin": "AAAAAAAAAAAAAAAAAAAAAQ==",
    "day": "2024-02-29",
    "t6": "-00:00:01.5",
    "t0": "838:59:59",
    "ts3": "2018-05-29 17:36:19.7",
    "ts6": "2024-01-01 10:00:00.12",
    "ltz": "2024-01-01 02:00:00.12Z",
    "note": None,
}


def parse(data: bytes) -> Any:
    """Parse JSON with exact numbers (Decimal for fractions)."""
    return json.loads(data, parse_float=Decimal)


def f32(x: float | None) -> bytes | None:
    return None if x is None else struct.pack("<f", x)


def assert_same_values(schema: Schema, got: Mapping[str, Any], want: Mapping[str, Any]) -> None:
    """Equal per column; FLOAT compared at float32 precision, DECIMAL also by exponent (scale)."""
    assert list(got) == schema.names
    for col in schema.columns:
        g, w = got[col.name], want.get(col.name)
        if col.type.root is TypeRoot.FLOAT:
            assert f32(g) == f32(w), col.name
        elif col.type.root is TypeRoot.DECIMAL and w is not None:
            assert g == w and str(g) == str(w), (col.name, g, w)
        else:
            assert g == w and type(g) is type(w), (col.name, g, w)
