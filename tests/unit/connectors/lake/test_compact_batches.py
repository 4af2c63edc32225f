"""The columnar lane's reduce step (``compact_batches``) gives what ``compact`` gives for the same
changelog rows: the same final image per upserted key, the same deleted keys, the same last row
kinds; and a change batch turned back into rows (``as_items``) is those rows."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from changelake.changelog.change_batch import ChangeBatch, batch_arrow_schema
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.lake.compaction import compact, compact_batches
from changelake.connectors.lake.errors import NullPrimaryKeyError
from changelake.connectors.lake.sink import _unabsorbed, as_items

TABLE = TableId("shop", "orders")
SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("region", parse_data_type("VARCHAR(8) NOT NULL")),
                    ("v", parse_data_type("INT")), ("t", parse_data_type("TIME(0)"))], ["id", "region"])


def _rows(rng: random.Random, n: int) -> list[tuple[str, dict]]:
    live: dict[tuple, dict] = {}
    out = []
    while len(out) < n:
        key = (rng.randrange(30), rng.choice(["eu", "us"]))
        image = {"id": key[0], "region": key[1], "v": rng.randrange(1000), "t": rng.choice([None, "12:00:01"])}
        if key not in live:
            out.append(("+I", image))
            live[key] = image
        elif rng.random() < 0.6:
            new_key = (key[0], "eu" if key[1] == "us" else "us") if rng.random() < 0.1 else key
            if new_key != key and new_key in live:
                continue
            out.append(("-U", live.pop(key)))
            image = {**image, "id": new_key[0], "region": new_key[1]}
            out.append(("+U", image))
            live[new_key] = image
        else:
            out.append(("-D", live.pop(key)))
    return out


def _batch(rows: list[tuple[str, dict]], first_offset: int = 0) -> ChangeBatch:
    target = batch_arrow_schema(SCHEMA)
    table = pa.Table.from_pylist([r for _, r in rows], schema=target)
    return ChangeBatch(TABLE, SCHEMA, table, pa.array([k for k, _ in rows], pa.string()),
                       pa.array(range(first_offset, first_offset + len(rows)), pa.int64()), "orders", 0, len(rows),
                       first_offset + len(rows) - 1, lambda: [])


@pytest.mark.parametrize("seed", range(5))
def test_compact_batches_equals_compact(seed):
    rng = random.Random(seed)
    rows = _rows(rng, 400)
    cut = rng.randrange(1, len(rows) - 1)
    batches = [_batch(rows[:cut]), _batch(rows[cut:], cut)]
    got = compact_batches(batches, ("id", "region"), table="shop.orders")
    items = as_items(batches)
    want = compact(items, ("id", "region"), table="shop.orders")
    compacted, last = got.to_compacted(SCHEMA)
    assert compacted.upserts == want.upserts
    assert list(compacted.upserts) == list(want.upserts)  # ordered by the key's last change
    assert compacted.deletes == want.deletes
    assert compacted.input_rows == want.input_rows == len(rows)
    kinds = {}
    for item in items:
        if item.kind.is_accumulate:
            kinds[(item.values["id"], item.values["region"])] = item.kind
    assert {(r.values["id"], r.values["region"]): r.kind for r in last} == {k: kinds[k] for k in want.upserts}


def test_as_items_gives_the_rows_with_their_offsets_and_python_values():
    import datetime as dt

    rows = [("+I", {"id": 1, "region": "eu", "v": 5, "t": "01:02:03"}), ("-D", {"id": 1, "region": "eu", "v": 5, "t": None})]
    items = as_items([_batch(rows, 40)])
    assert [(i.kind, i.metadata["offset"]) for i in items] == [(RowKind.INSERT, 40), (RowKind.DELETE, 41)]
    assert isinstance(items[0], ChangelogRow) and items[0].values["t"] == dt.timedelta(hours=1, minutes=2, seconds=3)


def test_rows_below_the_committed_offset_are_dropped():
    rows = _rows(random.Random(9), 20)
    batch = _batch(rows, 100)
    kept = _unabsorbed(batch, {"orders/0": 110})
    assert kept.offsets.to_pylist() == list(range(110, 120)) and kept.num_rows == 10
    assert _unabsorbed(batch, {"orders/0": 50}) is batch and _unabsorbed(batch, {}) is batch


def test_a_null_key_is_named():
    schema_rows = [("+I", {"id": 1, "region": "eu", "v": 1, "t": None})]
    batch = _batch(schema_rows)
    broken = ChangeBatch(TABLE, SCHEMA, batch.rows.set_column(1, "region", pa.array([None], pa.string())), batch.kinds,
                         batch.offsets, "orders", 0, 1, 0, lambda: [])
    with pytest.raises(NullPrimaryKeyError) as info:
        compact_batches([broken], ("id", "region"), table="shop.orders")
    assert info.value.column == "region" and info.value.table == "shop.orders"


ONE_KEY = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("v", parse_data_type("INT"))], ["id"])


def _one_key_batch(rows: list[tuple[str, int, int]], first_offset: int = 0) -> ChangeBatch:
    table = pa.Table.from_pylist([{"id": k, "v": v} for _, k, v in rows], schema=batch_arrow_schema(ONE_KEY))
    return ChangeBatch(TABLE, ONE_KEY, table, pa.array([kind for kind, _, _ in rows], pa.string()),
                       pa.array(range(first_offset, first_offset + len(rows)), pa.int64()), "orders", 0, len(rows),
                       first_offset + len(rows) - 1, lambda: [])


@pytest.mark.parametrize("kinds", [["+I"], ["+I", "-D"], ["+I", "+U", "-D", "-U"]], ids=["inserts", "deletes", "all"])
def test_compact_batches_of_unique_keys_equals_compact(kinds):
    # every key once (the insert-only stream and its like): the same result as compact, in order
    rng = random.Random(len(kinds))
    keys = rng.sample(range(10_000), 300)
    rows = [(rng.choice(kinds), k, rng.randrange(1000)) for k in keys]
    batches = [_one_key_batch(rows[:120]), _one_key_batch(rows[120:], 120)]
    got = compact_batches(batches, ("id",), table="shop.orders")
    want = compact(as_items(batches), ("id",), table="shop.orders")
    compacted, last = got.to_compacted(ONE_KEY)
    assert list(compacted.upserts.items()) == list(want.upserts.items())
    assert compacted.deletes == want.deletes
    assert compacted.input_rows == want.input_rows == len(rows)
    assert [r.kind.short_string for r in last] == [kind for kind, _, _ in rows if kind in ("+I", "+U")]


def test_compact_batches_of_one_key_column_with_repeated_keys_keeps_the_last_change():
    rows = [("+I", 1, 10), ("+I", 2, 20), ("-D", 1, 10), ("+I", 3, 30), ("+I", 1, 11)]
    got = compact_batches([_one_key_batch(rows)], ("id",), table="shop.orders")
    compacted, _ = got.to_compacted(ONE_KEY)
    assert list(compacted.upserts.items()) == [((2,), {"id": 2, "v": 20}), ((3,), {"id": 3, "v": 30}),
                                               ((1,), {"id": 1, "v": 11})]
    assert compacted.deletes == set()
