"""The batch decode of debezium-json (pyarrow's JSON reader, one call per group) gives exactly
the per-message events, and refuses (None: decode message by message) whatever it cannot read
exactly."""

from __future__ import annotations

import base64
import json
import random

import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.formats import create_format
from changelake.formats.debezium_json import decode_batch

SCHEMA = Schema.of(
    [
        ("id", parse_data_type("BIGINT NOT NULL")),
        ("small", parse_data_type("SMALLINT")),
        ("name", parse_data_type("VARCHAR(40)")),
        ("price", parse_data_type("DECIMAL(10,2)")),
        ("big", parse_data_type("DECIMAL(20,0)")),
        ("ratio", parse_data_type("DOUBLE")),
        ("f", parse_data_type("FLOAT")),
        ("ok", parse_data_type("BOOLEAN")),
        ("day", parse_data_type("DATE")),
        ("at", parse_data_type("TIMESTAMP(6)")),
        ("ltz", parse_data_type("TIMESTAMP_LTZ(3)")),
        ("t", parse_data_type("TIME(3)")),
        ("blob", parse_data_type("VARBINARY(16)")),
    ],
    ["id"],
)


def _image(rng: random.Random, k: int) -> dict:
    return {
        "id": k,
        "small": rng.choice([None, -32768, 32767, 5]),
        "name": rng.choice([None, "", "plain", "é ünïcode \u2603", 'quote " and \\ back', "line\nbreak"]),
        "price": rng.choice([None, 0, 1.5, -12345678.99, 7]),
        "big": rng.choice([18446744073709551615, 0, None]),
        "ratio": rng.choice([None, 0.1, 1e300, -2.5, 3]),
        "f": rng.choice([None, 0.1, 1.25]),
        "ok": rng.choice([None, True, False]),
        "day": rng.choice([None, "2026-02-28", "1970-01-01"]),
        "at": rng.choice([None, "2026-02-28 12:34:56.123456", "2026-02-28 12:34:56", "2026-02-28T01:02:03"]),
        "ltz": rng.choice([None, "2026-02-28 12:34:56.123Z", "2026-02-28T12:34:56Z"]),
        "t": rng.choice([None, "12:34:56.789", "-01:00:00", "838:59:59"]),
        "blob": rng.choice([None, base64.b64encode(b"\x00\xffab").decode()]),
        "extra": "ignored",
    }


def _message(rng: random.Random, k: int) -> bytes:
    op = rng.choice(["c", "r", "u", "d"])
    before = _image(rng, k) if op in ("u", "d") else rng.choice([None, _image(rng, k)])
    after = _image(rng, k) if op in ("c", "r", "u") else None
    doc = {"before": before, "after": after, "op": op, "source": {"db": "shop", "table": "orders", "ts_ms": k}}
    return json.dumps(doc, separators=(",", ":")).encode()


def _per_message(fmt, values):
    return [fmt.decode_events(v) for v in values]


def test_a_batch_decodes_to_the_per_message_events():
    fmt = create_format("debezium-json", SCHEMA, {})
    rng = random.Random(1)
    values = [_message(rng, k) for k in range(500)]
    batch = decode_batch(fmt, values)
    assert batch is not None, "the common case must take the batch path"
    expected = _per_message(fmt, values)
    assert batch == expected
    # and the types are the per-message ones, not merely equal
    for got, want in zip(batch, expected):
        for image in ("before", "after"):
            g, w = getattr(got[0], image), getattr(want[0], image)
            if w is not None:
                assert {k: (type(v), repr(v)) for k, v in g.items()} == {k: (type(v), repr(v)) for k, v in w.items()}
    assert batch[0][0].schema is fmt.schema and batch[0][0].table == TableId("shop", "orders")


@pytest.mark.parametrize(
    "bad",
    [
        b'{"before":null,"after":{"id":1},"op":"x","source":{"db":"a","table":"b","ts_ms":0}}',  # unknown op
        b'{"before":null,"after":{"id":1},"op":"c","source":{"db":"a","table":"b","ts_ms":0}',  # truncated JSON
        b'{"before":null,"after":{"id":1.5},"op":"c","source":{"db":"a","table":"b","ts_ms":0}}',  # not an integer
        b'{"before":null,"after":{"id":1,"small":40000},"op":"c","source":{"db":"a","table":"b","ts_ms":0}}',
        b'{"before":null,"after":{"id":1,"price":1.234},"op":"c","source":{"db":"a","table":"b","ts_ms":0}}',
        b'{"before":null,"after":{"id":1,"day":"28.02.2026"},"op":"c","source":{"db":"a","table":"b","ts_ms":0}}',
        b'{"before":null,"after":null,"op":"u","source":{"db":"a","table":"b","ts_ms":0}}',  # missing images
        b'{"before":null,"after":{"id":1},"op":"c","source":{"db":"a","table":"b","ts_ms":null}}',
        b'{"schema":{"type":"struct"},"payload":{"before":null,"after":{"id":1},"op":"c"}}',  # wrapper
        b'{"before":null,"after":{"id":1},"op":"c"} {"before":null,"after":{"id":2},"op":"c"}',  # two in one
        b'{"before":null,\n"after":{"id":1},"op":"c","source":{"db":"a","table":"b","ts_ms":0}}',  # not one line
        b'{"before":null,"after":{"id":1,"name":5},"op":"c","source":{"db":"a","table":"b","ts_ms":0}}',
    ],
)
def test_what_the_batch_cannot_read_exactly_goes_message_by_message(bad):
    fmt = create_format("debezium-json", SCHEMA, {})
    rng = random.Random(2)
    values = [_message(rng, k) for k in range(20)]
    assert decode_batch(fmt, values[:10] + [bad] + values[10:]) is None


def test_no_schema_no_batch():
    fmt = create_format("debezium-json", None, {})
    assert decode_batch(fmt, [_message(random.Random(3), 1)] * 20) is None


def test_truncate_and_delete_events():
    fmt = create_format("debezium-json", SCHEMA, {})
    values = [b'{"before":null,"after":null,"op":"t","source":{"db":"shop","table":"orders","ts_ms":5}}',
              b'{"before":{"id":3},"after":null,"op":"d","source":{"db":"shop","table":"orders","ts_ms":6}}']
    batch = decode_batch(fmt, values)
    assert batch == _per_message(fmt, values)
    assert [e[0].op for e in batch] == [Op.TRUNCATE, Op.DELETE] and isinstance(batch[1][0], DataChangeEvent)
    assert batch[1][0].before["price"] is None and batch[1][0].before["id"] == 3


# -- decode_columns: the changelog rows in Arrow, for the columnar lane --------------------------------
def _rows_of(fmt, values):
    """The per-message decoder's changelog rows: (kind, values) with TIME as its text, in the
    batch's Arrow types (what the lakes store)."""
    import pyarrow as pa

    from changelake.changelog.change_batch import batch_arrow_schema
    from changelake.formats.json_values import format_time

    target = batch_arrow_schema(fmt.schema)
    kinds, rows = [], []
    for value in values:
        for event in fmt.decode_events(value):
            for row in event.to_rows():
                kinds.append(row.kind.short_string)
                image = dict(row.values)
                for c in fmt.schema.columns:
                    if c.type.root.name == "TIME" and image.get(c.name) is not None:
                        image[c.name] = format_time(image[c.name], c.type.precision)
                rows.append(image)
    return kinds, pa.Table.from_pylist([{c: r.get(c) for c in target.names} for r in rows], schema=target)


def test_columns_are_the_per_message_rows():
    from changelake.formats.debezium_json import decode_columns

    fmt = create_format("debezium-json", SCHEMA, {})
    rng = random.Random(4)
    values = [_message(rng, k) for k in range(400)]
    got = decode_columns(fmt, values)
    assert got is not None, "the common case must take the columnar path"
    kinds, expected = _rows_of(fmt, values)
    assert got.kinds.to_pylist() == kinds
    assert got.rows.schema == expected.schema
    assert got.rows.equals(expected)
    assert got.table == ("shop", "orders")
    assert sum(got.ops.values()) == 400
    assert got.message.to_pylist()[:1] == [0] and got.message.to_pylist()[-1] == 399


@pytest.mark.parametrize("bad", [
    b'{"before":null,"after":null,"op":"t","source":{"db":"shop","table":"orders","ts_ms":5}}',  # truncate
    b'{"before":null,"after":{"id":1},"op":"c","source":{"db":"shop","table":"other","ts_ms":0}}',  # 2nd table
    b'{"before":null,"after":{"id":1,"day":"28.02.2026"},"op":"c","source":{"db":"shop","table":"orders","ts_ms":0}}',
    b'{"before":null,"after":{"id":1,"t":"12:xx"},"op":"c","source":{"db":"shop","table":"orders","ts_ms":0}}',
])
def test_columns_refuse_what_needs_the_per_message_path(bad):
    from changelake.formats.debezium_json import decode_columns

    fmt = create_format("debezium-json", SCHEMA, {})
    rng = random.Random(5)
    values = [_message(rng, k) for k in range(20)]
    assert decode_columns(fmt, values[:10] + [bad] + values[10:]) is None
