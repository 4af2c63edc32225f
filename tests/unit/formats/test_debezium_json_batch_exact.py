"""debezium-json's columnar read (``read_batch``, the Kafka source's columnar lane) hands back,
to the per-message decoder that raises the exact error, the values Arrow's JSON reader takes but
the per-message decoder refuses: a DECIMAL with more digits than its precision, invalid UTF-8."""

from __future__ import annotations

import pytest

from changelake.changelog import Schema, parse_data_type
from changelake.formats import create_format
from changelake.formats.debezium_json import read_batch
from changelake.formats.errors import DecodeError

SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("a", parse_data_type("DECIMAL(10, 2)")),
                    ("name", parse_data_type("STRING"))], ["id"])


def _message(after: bytes) -> bytes:
    return b'{"before":null,"after":' + after + b',"op":"c","ts_ms":1}'


@pytest.mark.parametrize("after", [b'{"id":1,"a":123456789.5}', b'{"id":1,"a":-100000000}', b'{"id":1,"name":"\xff"}'])
def test_values_the_message_decoder_refuses_are_not_read_in_arrow(after: bytes) -> None:
    fmt = create_format("debezium-json", SCHEMA, {})
    with pytest.raises(DecodeError):
        fmt.decode(_message(after))
    assert read_batch(fmt, [_message(b'{"id":2,"a":1.5}'), _message(after)]) is None


def test_the_largest_values_that_fit_are_read() -> None:
    fmt = create_format("debezium-json", SCHEMA, {})
    table = read_batch(fmt, [_message(b'{"id":1,"a":99999999.99}'), _message(b'{"id":2,"a":-99999999.99}')])
    assert table is not None
    assert [str(r["after"]["a"]) for r in table.to_pylist()] == ["99999999.99", "-99999999.99"]


FLOATS = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("d", parse_data_type("DOUBLE"))], ["id"])


@pytest.mark.parametrize("token", [b"Inf", b"-Inf"])
def test_an_inf_token_arrow_reads_but_the_message_decoder_refuses_is_not_read_in_arrow(token: bytes) -> None:
    fmt = create_format("debezium-json", FLOATS, {})
    message = _message(b'{"id":1,"d":' + token + b"}")
    with pytest.raises(DecodeError):
        fmt.decode(message)
    assert read_batch(fmt, [_message(b'{"id":2,"d":1.5}'), message]) is None


@pytest.mark.parametrize("token, value", [(b"NaN", "nan"), (b"Infinity", "inf"), (b"-Infinity", "-inf")])
def test_nan_and_infinity_decode_as_the_message_decoder_reads_them(token: bytes, value: str) -> None:
    fmt = create_format("debezium-json", FLOATS, {})
    [row] = fmt.decode(_message(b'{"id":1,"d":' + token + b"}"))
    assert str(row.values["d"]) == value
