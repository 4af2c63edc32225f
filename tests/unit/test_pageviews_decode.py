"""decode_pageviews_batch: the columnar decoding of the pageviews topic accepts only what the json
format decodes to the same values, and hands everything else back (None) to the row path."""

from __future__ import annotations

import random

import pytest

from changelake.changelog import ChangelogRow, RowKind
from changelake.formats.json import JsonFormat
from changelake.pageviews import PAGEVIEWS_SCHEMA, decode_pageviews_batch, generate_pageviews

FMT = JsonFormat(PAGEVIEWS_SCHEMA)


def row_path(values: list[bytes]) -> list[tuple[object, object]]:
    return [(r.values["user_id"], r.values["user_region"]) for v in values for r in FMT.decode(v)]


def test_generated_events_decode_as_the_json_format() -> None:
    values = [FMT.encode(ChangelogRow(RowKind.INSERT, e)) for e in generate_pageviews(3000, seed=2)]
    table = decode_pageviews_batch(values)
    assert table is not None and table.column_names == ["user_id", "user_region"]
    assert list(zip(table.column("user_id").to_pylist(), table.column("user_region").to_pylist())) == row_path(values)


GOOD = b'{"user_id":1,"page_id":2,"viewtime":"2024-01-01 08:00:00.142","user_region":"EU"}'


@pytest.mark.parametrize(
    "odd, accepted",
    [
        (b'{"user_id":7,"user_region":"US"}', True),  # missing columns are NULL, as the json format
        (b'{"user_id":null,"user_region":null,"x":[1,{"y":2}]}', True),  # unknown fields ignored
        (b'{"user_region":"\\u00e9t\\u00e9","user_id":-0}', True),
        (b' {"user_id":3} ', False),  # not exactly "{...}": the row path decides
        (b"null", False),
        (b"", False),
        (b'[{"user_id":1},{"user_id":2}]', False),
        (b'{"user_id":1}{"user_id":2}', False),
        (b'{"user_id":1,\n"user_region":"EU"}', False),
        (b'{"user_id":"1"}', False),
        (b'{"user_id":1.0}', False),
        (b'{"user_id":9223372036854775808}', False),
        (b'{"user_id":1,"user_id":2}', False),
        (b'{"user_region":5}', False),
        (b'{"user_region":"a\xff"}', False),
        (b'{"viewtime":"2024-02-30 08:00:00"}', False),
        (b'{"viewtime":"0000-01-01 00:00:00"}', False),
        (b'{"viewtime":"2024-01-01 08:00"}', False),
        (b'{"viewtime":5}', False),
        (b'{"user_id":1', False),
    ],
)
def test_odd_records_are_decoded_identically_or_handed_back(odd: bytes, accepted: bool) -> None:
    values = [GOOD, odd, GOOD]
    table = decode_pageviews_batch(values)
    assert (table is not None) == accepted
    if table is not None:
        got = list(zip(table.column("user_id").to_pylist(), table.column("user_region").to_pylist()))
        assert got == row_path(values)


def test_random_byte_damage_never_decodes_differently() -> None:
    rnd = random.Random(9)
    base = [FMT.encode(ChangelogRow(RowKind.INSERT, e)) for e in generate_pageviews(20, seed=3)]
    for _ in range(3000):
        values = list(base)
        i = rnd.randrange(len(values))
        b = bytearray(values[i])
        for _ in range(rnd.randint(1, 3)):
            b[rnd.randrange(len(b))] = rnd.choice(b'{}[]":,0123456789-. aTe\\\xff\xc3')
        values[i] = bytes(b)
        table = decode_pageviews_batch(values)
        if table is None:
            continue
        got = list(zip(table.column("user_id").to_pylist(), table.column("user_region").to_pylist()))
        assert got == row_path(values), values[i]
