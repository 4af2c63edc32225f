"""dumps_envelope (orjson) writes exactly the bytes of the Python writer ``dumps``."""

from __future__ import annotations

import math
import random
import struct
from decimal import Decimal

import pytest

from changelake.formats.json_values import dumps, dumps_envelope


def _envelope(before, after):
    return {"before": before, "after": after, "op": "u", "source": {"db": "d", "table": "t", "ts_ms": 1}}


@pytest.mark.parametrize("value", [
    0.0, -0.0, 0.1, 5.15, 1e-4, 9.99e-5, 1e-5, 1e-7, -2.5e-310, 1e16, 1.7976931348623157e308, 3.4028235e38,
    math.nan, math.inf, -math.inf, 123, -(2 ** 63), 2 ** 63, -(2 ** 64), 10 ** 30, True, False, None,
    Decimal("12.30"), Decimal("-0.00001"), Decimal("1E+3"), Decimal("12345678901234567890.123456789012345678901234567890"),
    Decimal("NaN"), Decimal("-Infinity"), "a\"b\\c\n\t\x00\x1f\x7f\u2028é😀", "\ud800", "", [1, 2.5e-7], {"k": 1e-9},
    (1, "x"),
])
def test_envelope_bytes_equal_python_writer(value):
    doc = _envelope({"id": 1, "v": value}, {"id": 1, "v": value})
    assert dumps_envelope(doc, (doc["before"], doc["after"])) == dumps(doc)


def test_random_doubles_equal_python_writer():
    rng = random.Random(7)
    for _ in range(20000):
        v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        row = {"v": v, "w": rng.uniform(-1e6, 1e6), "d": Decimal(rng.randrange(-10 ** 12, 10 ** 12)).scaleb(-rng.randrange(0, 12))}
        doc = _envelope(None, row)
        assert dumps_envelope(doc, (None, row)) == dumps(doc), row


def test_unwritable_value_raises_as_python_writer():
    doc = _envelope(None, {"v": object()})
    with pytest.raises(TypeError):
        dumps_envelope(doc, (None, doc["after"]))


def test_non_dict_rows_and_subclasses_fall_back():
    class S(str):
        pass

    class I(int):
        pass

    row = {"s": S("x"), "i": I(3)}
    doc = {"data": [row], "old": None, "type": "INSERT"}
    assert dumps_envelope(doc, [row]) == dumps(doc)
    assert dumps_envelope(doc, ["not a dict"]) == dumps(doc)
