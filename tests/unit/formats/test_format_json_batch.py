"""JsonFormat.decode_values_many / decode_one_value (the batch decode of the upsert-kafka source)
give exactly what decode_to_values gives, value and type, for every message they do not hand back
(None); they hand back the messages only the row-by-row path may decide (malformed, not one
object, a value that does not convert, a missing field with fail-on-missing-field), and they do
take the common ones."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from decimal import Decimal
from typing import Any

import pytest

from changelake.changelog import Schema, parse_data_type
from changelake.formats import create_format
from changelake.formats.errors import DecodeError

SCHEMA = Schema.of(
    [
        ("id", parse_data_type("BIGINT NOT NULL")),
        ("small", parse_data_type("TINYINT")),
        ("name", parse_data_type("STRING")),
        ("amount", parse_data_type("DECIMAL(10, 2)")),
        ("wide", parse_data_type("DECIMAL(38, 4)")),
        ("ratio", parse_data_type("DOUBLE")),
        ("flag", parse_data_type("BOOLEAN")),
        ("ts", parse_data_type("TIMESTAMP(3)")),
        ("ltz", parse_data_type("TIMESTAMP_LTZ(6)")),
        ("day", parse_data_type("DATE")),
        ("raw", parse_data_type("BYTES")),
    ],
    ["id"],
)

GOOD = [
    b'{"id":1,"small":2,"name":"a","amount":1.5,"wide":12345678901234567890.12345,"ratio":0.1,"flag":true,'
    b'"ts":"2024-01-01 00:00:00.123","ltz":"2024-01-01T10:00:00.5","day":"2024-02-29","raw":"AAE="}',
    b'{"id":2,"name":null,"amount":"3.456","ts":"2024-01-01T23:59:59"}',  # missing fields, text decimal
    b'{"name":7,"id":3,"amount":7,"small":-128,"ts":"2024-12-31 00:00:00.123456789"}',  # number as STRING
    b' {"id":4,"amount":1e2,"ltz":"2024-01-01 00:00:00Z","flag":"false","extra":{"x":[1,2]}} ',
    b'{"id":5,"amount":-0.005,"wide":0,"ratio":-0.0,"ts":null}',
    b'{"id":6,"id":7,"name":"\\u00e9\\ud83d\\ude00","amount":99999999.994}',  # duplicate key: the last wins
]
ODD = [
    None, b"", b"{not json", b'{"id":1}x', b"[]", b'[{"id":1},{"id":2}]', b"17", b'"text"', b"null",
    b'{"id":9223372036854775808}', b'{"id":1,"small":128}', b'{"id":1,"amount":123456789.5}',  # out of range
    b'{"id":1,"amount":99999999.995}', b'{"id":1,"ts":"2024-13-01 00:00:00"}', b'{"id":1,"ts":"2024-01-01"}',
    b'{"id":1,"ts":"2024-01-01 00:00:00+01:00"}', b'{"id":1,"ratio":NaN}',
    b'\xef\xbb\xbf{"id":1}', b'{"id":1,"name":"\\ud800"}', b'{"id":true}',
    b'{"id":1,"flag":2}', b'{"id":1,"day":"2024-02-30"}', b'{"id":1,"raw":"***"}', b'{"id":1,"name":"\xff"}',
    '{"id":1}'.encode("utf-16"),
]
#: values the column converters take on their general path (either path may decode them)
CONVERTED = [b'{"id":1,"ratio":"NaN"}', b'{"id":1.0}', b'{"id":"12"}', b'{"id":1,"flag":"1","ratio":"-Infinity"}']


def _exact(values: dict[str, Any]) -> list[tuple[str, type, Any]]:
    """Values with their types (Decimal('1.50') and Decimal('1.5') are equal but not the same)."""
    out = []
    for k, v in values.items():
        shown = str(v) if isinstance(v, Decimal) else ("nan" if isinstance(v, float) and math.isnan(v) else v)
        out.append((k, type(v), shown))
    return out


def _row_by_row(fmt: Any, data: bytes | None) -> Any:
    try:
        return ("rows", [_exact(v) for v in fmt.decode_to_values(data)])
    except DecodeError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize("options", [{}, {"fail-on-missing-field": "true"}, {"ignore-parse-errors": "true"}])
def test_batch_equals_row_by_row(options: dict[str, str]) -> None:
    fmt = create_format("json", SCHEMA, options)
    datas = GOOD + ODD + CONVERTED + GOOD[::-1]
    batch = fmt.decode_values_many(datas)
    assert len(batch) == len(datas)
    for data, got in zip(datas, batch):
        one = fmt.decode_one_value(data)
        expected = _row_by_row(fmt, data)
        for fast in (got, one):
            if fast is not None:
                assert expected == ("rows", [_exact(fast)]), data
    taken = [got is not None for got in batch]
    if "fail-on-missing-field" in options:
        assert taken[: len(GOOD)] == [True, False, False, False, False, False]  # only the first has every field
    else:
        assert all(taken[: len(GOOD)]), "the batch path takes the common messages"
    assert not any(taken[len(GOOD) : len(GOOD) + len(ODD)]), "only the row-by-row path decides these"


def test_one_bad_value_hands_back_only_its_message() -> None:
    fmt = create_format("json", SCHEMA, {})
    datas = [b'{"id":%d,"amount":1.25,"ts":"2024-01-01 00:00:00"}' % i for i in range(5)]
    datas[2] = b'{"id":2,"amount":"x","ts":"2024-01-01 00:00:00"}'
    datas[3] = b'{"id":3,"amount":1.25,"ts":"yesterday"}'
    got = fmt.decode_values_many(datas)
    assert [g is None for g in got] == [False, False, True, True, False]
    assert got[4] == {"id": 4, "small": None, "name": None, "amount": Decimal("1.25"), "wide": None, "ratio": None,
                      "flag": None, "ts": dt.datetime(2024, 1, 1), "ltz": None, "day": None, "raw": None}


def test_decimal_batch_is_exact_whatever_the_thread_context() -> None:
    """DECIMAL(38, 4) needs 38 digits, past the thread's default context (28): under it, and under
    a narrower one, the batch takes a 30-digit value exactly, as the column converter does; a
    value past 38 digits goes row by row, which refuses it."""
    fmt = create_format("json", SCHEMA, {})
    data = [b'{"id":1,"wide":12345678901234567890123456.1234}']
    for prec in (decimal.getcontext().prec, 10):
        with decimal.localcontext() as ctx:
            ctx.prec = prec
            got = fmt.decode_values_many(data)[0]
            assert got is not None and got["wide"] == fmt.decode_to_values(data[0])[0]["wide"]
            assert got["wide"] == Decimal("12345678901234567890123456.1234")
    too_wide = [b'{"id":1,"wide":12345678901234567890123456789012345.5}']
    assert fmt.decode_values_many(too_wide)[0] is None
    with pytest.raises(DecodeError, match="does not fit DECIMAL"):
        fmt.decode_to_values(too_wide[0])
