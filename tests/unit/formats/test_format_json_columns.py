"""JsonFormat.decode_columns (the upsert-kafka source's columnar lane: a poll's values read by
pyarrow's JSON reader in one call with an explicit schema) gives, for every group it does not
hand back (None), exactly the values decode_to_values gives, message by message and value by
value; it hands back every group with a message only the row-by-row path may decide."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from changelake.changelog.change_batch import batch_arrow_schema
from changelake.formats import create_format
from changelake.formats.errors import DecodeError

from test_format_json_batch import CONVERTED, GOOD, ODD, SCHEMA, _exact  # noqa: E402  (the same samples)


#: messages Arrow reads exactly (GOOD's need a rounding, a blank first or repeat a field)
GROUP = [
    b'{"id":1,"small":2,"name":"a","amount":1.5,"wide":12345678901234567890.1234,"ratio":0.1,"flag":true,'
    b'"ts":"2024-01-01 00:00:00.123","ltz":"2024-01-01T10:00:00.5","day":"2024-02-29","raw":"AAE="}',
    b'{"id":2,"name":null,"amount":"3.45","ts":"2024-01-01T23:59:59"}',
    b'{"id":3,"amount":7,"small":-128,"ts":"2024-12-31 00:00:00.123456","name":"\\u00e9 \\" x"}',
    b'{"id":4,"amount":1e2,"flag":false,"extra":{"x":[1,2]},"ratio":-0.0,"wide":-999999999999999999999999.9999}',
    b'{"id":-9223372036854775808,"amount":-99999999.99,"ts":null,"name":"\xc3\xa9\xf0\x9f\x98\x80"}',
]


def _row_by_row(fmt: Any, data: bytes) -> Any:
    try:
        return [_exact(v) for v in fmt.decode_to_values(data)]
    except DecodeError as exc:
        return ("error", str(exc))


def _exact_arrow(row: dict[str, Any]) -> list[tuple[str, type, Any]]:
    return _exact(row)


def test_a_group_of_good_messages_equals_row_by_row() -> None:
    fmt = create_format("json", SCHEMA, {})
    group = GROUP * 3
    table = fmt.decode_columns(group)
    assert isinstance(table, pa.Table) and table.schema == batch_arrow_schema(SCHEMA)
    for data, row in zip(group, table.to_pylist()):
        assert _row_by_row(fmt, data) == [_exact_arrow(row)], data


@pytest.mark.parametrize("data", GOOD + GROUP + ODD[1:] + CONVERTED)
def test_each_message_alone_and_in_a_group(data: bytes) -> None:
    fmt = create_format("json", SCHEMA, {})
    alone = fmt.decode_columns([data])
    expected = _row_by_row(fmt, data)
    if alone is not None:
        assert expected == [_exact_arrow(alone.to_pylist()[0])], data
    if data in ODD:
        assert alone is None, "only the row-by-row path decides this one"
        assert fmt.decode_columns([GOOD[0], data, GOOD[1]]) is None


@pytest.mark.parametrize("options", [{"fail-on-missing-field": "true"}, {"timestamp-format.standard": "ISO-8601"}])
def test_options_it_does_not_take(options: dict[str, str]) -> None:
    assert create_format("json", SCHEMA, options).decode_columns([GOOD[0]]) is None


def test_no_schema_or_no_messages() -> None:
    assert create_format("json", None, {}).decode_columns([GOOD[0]]) is None
    assert create_format("json", SCHEMA, {}).decode_columns([]) is None


def test_decimal_digits_do_not_follow_the_thread_context() -> None:
    """DECIMAL(38, 4) takes 34 digits left of the point under any thread context (the default's 28
    digits, or 10), exactly as the row-by-row converter; 35 digits go row by row, which refuses them."""
    import decimal

    fmt = create_format("json", SCHEMA, {})
    data = [b'{"id":1,"wide":1234567890123456789012345678901234.1234}']
    for prec in (decimal.getcontext().prec, 10):
        with decimal.localcontext() as ctx:
            ctx.prec = prec
            got = fmt.decode_columns(data)
            assert got is not None and got.column("wide").to_pylist() == [fmt.decode_to_values(data[0])[0]["wide"]]
            assert got.column("wide").to_pylist() == [decimal.Decimal("1234567890123456789012345678901234.1234")]
    too_wide = [b'{"id":1,"wide":12345678901234567890123456789012345.1}']
    assert fmt.decode_columns(too_wide) is None
    with pytest.raises(DecodeError, match="does not fit DECIMAL"):
        fmt.decode_to_values(too_wide[0])


@pytest.mark.parametrize("data", [b'{"id":1,"extra":NaN}', b'{"id":1,"extra":[1, -Infinity]}', b'{"id":1,"ratio": Inf}'])
def test_nan_and_infinity_tokens_go_row_by_row(data: bytes) -> None:
    """Not JSON; the row-by-row path's parser and Arrow's reader each take some of them (also in
    a field the schema does not have), not the same ones: the row-by-row path decides."""
    fmt = create_format("json", SCHEMA, {})
    assert fmt.decode_columns([data]) is None


def test_text_that_looks_like_a_token_is_still_read() -> None:
    fmt = create_format("json", SCHEMA, {})
    data = b'{"id":1,"name":"Information NaN"}'
    assert fmt.decode_columns([data]).column("name").to_pylist() == ["Information NaN"]
