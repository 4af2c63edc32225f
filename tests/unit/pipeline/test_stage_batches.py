"""The stage on whole change batches (route, transform, key check) gives the rows the per-record
stage gives for the same events, or hands the batch back (None) for the per-record path."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from changelake.changelog import DataChangeEvent, Op, Schema, TableId
from changelake.changelog.change_batch import ChangeBatch, batch_arrow_schema
from changelake.changelog.types import parse_data_type
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.stage import Stage

TABLE = TableId("shop", "orders")
SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("name", parse_data_type("VARCHAR(20)")),
                    ("qty", parse_data_type("INT")), ("price", parse_data_type("DECIMAL(8,2)"))], ["id"])


def _events(rng: random.Random, n: int) -> list[DataChangeEvent]:
    from decimal import Decimal

    live: dict[int, dict] = {}
    out = []
    for i in range(n):
        key = rng.randrange(40)
        image = {"id": key, "name": rng.choice(["a", "bb", None]), "qty": rng.randrange(100),
                 "price": Decimal(rng.randrange(10000)) / 100}
        pos = {"topic": "shop.orders", "partition": 0, "offset": i + 1}
        if key not in live:
            out.append(DataChangeEvent(TABLE, Op.CREATE, None, image, SCHEMA, 1, pos))
            live[key] = image
        elif rng.random() < 0.6:
            out.append(DataChangeEvent(TABLE, Op.UPDATE, live[key], image, SCHEMA, 1, pos))
            live[key] = image
        else:
            out.append(DataChangeEvent(TABLE, Op.DELETE, live.pop(key), None, SCHEMA, 1, pos))
    return out


def _batch(events: list[DataChangeEvent]) -> ChangeBatch:
    kinds, rows, offsets = [], [], []
    for e in events:
        for row in e.to_rows():
            kinds.append(row.kind.short_string)
            rows.append(dict(row.values))
            offsets.append(e.position["offset"] - 1)
    table = pa.Table.from_pylist(rows, schema=batch_arrow_schema(SCHEMA))
    return ChangeBatch(TABLE, SCHEMA, table, pa.array(kinds, pa.string()), pa.array(offsets, pa.int64()),
                       "shop.orders", 0, len(events), len(events) - 1, lambda: list(events))


def _stage(transform=None, route=None, pipeline=None) -> Stage:
    block = {"pipeline": {"name": "p", **(pipeline or {})}, "source": {"type": "kafka", "topic": "shop.orders",
             "properties.bootstrap.servers": "x:1"}, "sink": {"type": "iceberg", "catalog.properties.uri": "sqlite://"}}
    if transform:
        block["transform"] = transform
    if route:
        block["route"] = route
    return Stage(parse_pipeline(block, env={}))


def _per_record(stage: Stage, events) -> list[tuple[str, str, dict]]:
    out = []
    for e in stage.apply(events):
        for row in e.to_rows():
            out.append((str(e.table), row.kind.short_string, dict(row.values)))
    return out


def _batched(batches: list[ChangeBatch]) -> list[tuple[str, str, dict]]:
    out = []
    for b in batches:
        for kind, values in zip(b.kinds.to_pylist(), b.rows.to_pylist()):
            out.append((str(b.table), kind, values))
    return out


CASES = {
    "no rule": ({}, None),
    "key only": ({"transform": [{"source-table": "shop.orders", "projection": "\\*", "primary-keys": "id"}]}, None),
    "computed and filter": ({"transform": [{"source-table": "shop.orders",
                                            "projection": "id, qty * 2 AS twice, UPPER(name) AS loud, __table_name__ AS t",
                                            "filter": "qty > 30", "primary-keys": "id"}]}, None),
    "soft delete": ({"transform": [{"source-table": "shop.orders", "projection": "\\*", "primary-keys": "id",
                                    "converter-after-transform": "SOFT_DELETE"}]}, None),
    "route to two": ({"route": [{"source-table": "shop.orders", "sink-table": "a.one"},
                                {"source-table": "shop.orders", "sink-table": "b.two"}]}, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_batch_gives_the_per_record_rows(case):
    kwargs, _ = CASES[case]
    events = _events(random.Random(sorted(CASES).index(case)), 300)
    got = _stage(**kwargs).apply_batch(_batch(events))
    assert got is not None, "this case must stay on the columnar lane"
    # in order per sink table (a route to two tables gives one batch each)
    by_table = lambda rows: {t: [r[1:] for r in rows if r[0] == t] for t in {r[0] for r in rows}}  # noqa: E731
    assert by_table(_batched(got)) == by_table(_per_record(_stage(**kwargs), events))
    assert all(b.schema == e.schema for b in got for e in _stage(**kwargs).apply(events[:1]) if b.table == e.table)


def test_what_needs_the_per_record_path_is_handed_back():
    events = _events(random.Random(3), 50)
    batch = _batch(events)
    # a NULL key column: the per-record key check names (or rejects) the record
    broken = ChangeBatch(TABLE, SCHEMA, batch.rows.set_column(0, "id", pa.nulls(batch.num_rows, pa.int64())),
                         batch.kinds, batch.offsets, batch.topic, 0, batch.records, batch.last_offset, batch.fallback)
    assert _stage().apply_batch(broken) is None
    # a transform failing on a row (division by zero): the per-record path rejects that record alone
    failing = {"transform": [{"source-table": "shop.orders", "projection": "id, CAST(name AS INT) AS n",
                              "primary-keys": "id"}]}
    assert _stage(**failing).apply_batch(batch) is None
    # append-only reading turns changes into inserts record by record
    append = _stage(pipeline=None)
    append.append_only = True
    assert append.apply_batch(batch) is None
