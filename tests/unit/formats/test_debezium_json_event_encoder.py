"""``DebeziumJsonFormat.event_encoder`` (the Kafka pipeline sink's per-table value encoder) writes
exactly :meth:`encode_event`'s bytes and raises its errors, for every op and column type."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

import pytest

from changelake.changelog import Schema, parse_data_type
from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import TableId
from changelake.formats import create_format
from changelake.formats.errors import EncodeError

TYPES: dict[str, list[Any]] = {
    "INT": [0, -1, 2**31 - 1, -(2**31), 2**31, True, "3"],
    "BIGINT": [2**63 - 1, 2**64, 12345],
    "STRING": ["eu", "é", 'q"uote', "\x00\x1f", "\ud800", "😀", ""],
    "CHAR(120)": ["x" * 120, "a"],
    "DECIMAL(10, 2)": [Decimal("1.5"), Decimal("-0.01"), Decimal("1E+3"), Decimal("NaN"), 3],
    "DOUBLE": [0.0, -0.0, 1e-5, 0.1, 1e22, float("nan"), float("inf")],
    "FLOAT": [1.5, 1e-7],
    "BOOLEAN": [True, False, 1],
    "DATE": [dt.date(2024, 2, 29)],
    "TIMESTAMP(3)": [dt.datetime(2024, 1, 1, 8, 0, 0, 123000), dt.datetime(2024, 1, 1)],
    "TIMESTAMP_LTZ(6)": [dt.datetime(2024, 1, 1, 8, 0, 0, 5, tzinfo=dt.timezone.utc)],
    "TIME": [dt.time(12, 30), dt.time(0, 0, 0, 1000)],
    "BYTES": [b"\x00\xff", b""],
}


def _outcome(fn: Any, event: DataChangeEvent) -> Any:
    try:
        return fn(event)
    except EncodeError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("options", [{}, {"timestamp-format.standard": "ISO-8601"},
                                     {"encode.ignore-null-fields": "true"}, {"schema-include": "true"}])
def test_event_encoder_equals_encode_event(seed: int, options: dict[str, str]) -> None:
    rnd = random.Random(seed)
    for _ in range(60):
        names = rnd.sample(list(TYPES), rnd.randint(1, 5))
        cols = [(f"c{i}", parse_data_type(t)) for i, t in enumerate(names)]
        schema = Schema.of(cols, ["c0"])
        fmt = create_format("debezium-json", schema, options)
        encode = fmt.event_encoder(schema)  # type: ignore[attr-defined]
        table = rnd.choice([TableId("db", "t"), TableId("d\u00e9", "t\ud83d\ude00"), TableId(None, "x")])
        for _ in range(10):
            def row() -> dict[str, Any]:
                return {c: (None if rnd.random() < 0.1 else rnd.choice(TYPES[t])) for (c, _), t in zip(cols, names)}
            op = rnd.choice([Op.CREATE, Op.READ, Op.UPDATE, Op.DELETE])
            before = row() if op in (Op.UPDATE, Op.DELETE) or rnd.random() < 0.1 else None
            after = row() if op in (Op.CREATE, Op.READ, Op.UPDATE) or rnd.random() < 0.1 else None
            if rnd.random() < 0.2 and after is not None:
                after.pop(next(iter(after)))  # a missing column is written as null
            tx = {"id": "1:2", "total_order": 3, "data_collection_order": 1} if rnd.random() < 0.1 else None
            other = Schema.of(cols, ["c0"]) if rnd.random() < 0.1 else schema  # an equal, other object
            event = DataChangeEvent(table, op, before, after, other, rnd.randrange(2**41), transaction=tx)
            assert _outcome(encode, event) == _outcome(fmt.encode_event, event), event
