"""GroupAggregate.process_arrow: the columnar mini-batch equals process_batch row for row.

Every case runs the same batches through two operators, one fed ChangelogRows
(``process_batch``, the reference) and one fed Arrow tables (``process_arrow``), and compares the
emitted changelog, the result table and the per-group state, including retractions (-U/+U and -D
inputs), groups that empty inside a batch, retractions without state, NULLs and every aggregate.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from changelake.changelog import ChangelogRow, RowKind, SchemaError
from changelake.changelog.aggregate import AggSpec, GroupAggregate, ValueMultiset
from changelake.pageviews import generate_pageviews, pageviews_aggregate, recompute_pv_uv

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE

ALL_SPECS = [
    AggSpec.count_star("n"),
    AggSpec.count("c", "user"),
    AggSpec.count("u", "user", distinct=True),
    AggSpec.sum("s", "price"),
    AggSpec.sum("sd", "qty", distinct=True),
    AggSpec.min("lo", "qty"),
    AggSpec.max("hi", "qty"),
]
ARROW_TYPES = {"region": pa.string(), "city": pa.int64(), "user": pa.int64(), "price": pa.decimal128(10, 2), "qty": pa.int64()}


def state(agg: GroupAggregate) -> dict[Any, Any]:
    return {
        k: (a.row_count, a.counts, a.sums, [None if m is None else sorted(m.items()) for m in a.multisets])
        for k, a in agg.store.items()
    }


def table(rows: list[ChangelogRow]) -> pa.Table:
    names = list(rows[0].values) if rows else list(ARROW_TYPES)
    return pa.table({c: pa.array([r.values[c] for r in rows], ARROW_TYPES[c]) for c in names})


def random_batches(seed: int, n_batches: int, retract: bool) -> list[list[ChangelogRow]]:
    rnd = random.Random(seed)
    live: list[dict[str, Any]] = []
    batches = []
    for _ in range(n_batches):
        batch = []
        for _ in range(rnd.randint(0, 40)):
            p = rnd.random()
            if retract and live and p < 0.3:
                v = live.pop(rnd.randrange(len(live)))
                if rnd.random() < 0.5:
                    batch.append(ChangelogRow(D, dict(v)))
                else:  # an update pair: -U old, +U new
                    batch.append(ChangelogRow(UB, dict(v)))
                    nv = dict(v, qty=rnd.choice([None, 1, 2, 3, 4]))
                    batch.append(ChangelogRow(UA, nv))
                    live.append(nv)
            elif retract and p < 0.35:  # a retraction of a row never accumulated
                batch.append(ChangelogRow(D, {"region": rnd.choice(["EU", "US", None]), "city": 1, "user": 99,
                                              "price": Decimal("1.00"), "qty": 5}))
            else:
                v = {
                    "region": rnd.choice(["EU", "US", "APAC", None]),
                    "city": rnd.randint(1, 3),
                    "user": rnd.choice([None, *range(1, 8)]),
                    "price": rnd.choice([None, Decimal("0.10"), Decimal("2.25"), Decimal("7.00")]),
                    "qty": rnd.choice([None, 1, 2, 3, 4]),
                }
                batch.append(ChangelogRow(I, v))
                live.append(v)
        batches.append(batch)
    return batches


@pytest.mark.parametrize("group_by", [["region"], ["region", "city"], []])
@pytest.mark.parametrize("retract", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_arrow_batches_equal_row_batches(group_by: list[str], retract: bool, seed: int) -> None:
    ref = GroupAggregate(group_by, ALL_SPECS)
    col = GroupAggregate(group_by, ALL_SPECS)
    for batch in random_batches(seed, 25, retract):
        want = ref.process_batch(batch)
        kinds = None if not retract else [r.kind for r in batch]
        got = col.process_arrow(table(batch), kinds)
        assert [str(r) for r in got] == [str(r) for r in want]
        assert state(col) == state(ref)
    assert col.result() == ref.result()
    restored = GroupAggregate(group_by, ALL_SPECS)
    restored.restore(col.snapshot())
    assert state(restored) == state(ref)


def test_group_emptied_inside_a_batch_then_refilled_is_an_update() -> None:
    agg = pageviews_like()
    agg.process_arrow(pa.table({"region": ["EU", "EU"], "user": [1, 2]}))
    rows = pa.table({"region": ["EU", "EU", "EU", "EU"], "user": [1, 2, 1, 3]})
    # -D, -D empties EU (its state is cleared), the next -D is ignored, +I starts it again
    out = agg.process_arrow(rows, [D, D, D, I])
    assert [str(r) for r in out] == ["-U[EU, 2, 2]", "+U[EU, 1, 1]"]
    assert agg.result() == {("EU",): {"region": "EU", "pv": 1, "uv": 1}}


def test_group_emptied_by_a_batch_is_deleted_and_unknown_retraction_ignored() -> None:
    agg = pageviews_like()
    agg.process_arrow(pa.table({"region": ["EU", "US"], "user": [1, 1]}))
    out = agg.process_arrow(pa.table({"region": ["EU", "APAC", "US"], "user": [1, 5, 2]}), [D, D, UB])
    assert [str(r) for r in out] == ["-D[EU, 1, 1]", "-D[US, 1, 1]"]
    assert agg.result() == {} and len(agg.store) == 0


def test_update_pairs_move_a_user_between_regions() -> None:
    agg = pageviews_like()
    agg.process_arrow(pa.table({"region": ["EU", "EU", "US"], "user": [1, 2, 3]}))
    out = agg.process_arrow(pa.table({"region": ["EU", "US"], "user": [2, 2]}), [UB, UA])
    assert [str(r) for r in out] == ["-U[EU, 2, 2]", "+U[EU, 1, 1]", "-U[US, 1, 1]", "+U[US, 2, 2]"]


def test_missing_columns_and_wrong_kinds_are_refused() -> None:
    agg = pageviews_like()
    with pytest.raises(SchemaError, match="group-by column 'region' missing"):
        agg.process_arrow(pa.table({"user": [1]}))
    with pytest.raises(SchemaError, match=r"column 'user' of COUNT\(DISTINCT user\) AS uv missing"):
        agg.process_arrow(pa.table({"region": ["EU"]}))
    with pytest.raises(ValueError, match="2 row kinds for a batch of 1 rows"):
        agg.process_arrow(pa.table({"region": ["EU"], "user": [1]}), [I, I])
    assert agg.process_arrow(pa.table({"region": pa.array([], pa.string()), "user": pa.array([], pa.int64())})) == []


def test_pageviews_arrow_batches_agree_with_duckdb_and_restore() -> None:
    events = generate_pageviews(20000, seed=4)
    agg = pageviews_aggregate()
    t = pa.Table.from_pylist(events)
    for i in range(0, t.num_rows, 3000):
        agg.process_arrow(t.slice(i, 3000))
    assert {k[0]: (v["pv"], v["uv"]) for k, v in agg.result().items()} == recompute_pv_uv(events)
    again = pageviews_aggregate()
    again.restore(agg.snapshot())  # the snapshot format is the one of the row path
    assert again.result() == agg.result()
    ref = pageviews_aggregate()
    ref.process_batch([ChangelogRow(I, e) for e in events])
    assert ref.snapshot() == agg.snapshot()


def test_value_multiset_add_all_equals_add() -> None:
    rnd = random.Random(3)
    for _ in range(200):
        a, b = ValueMultiset(), ValueMultiset()
        for _ in range(rnd.randint(1, 5)):
            if rnd.random() < 0.3:
                v = rnd.randint(0, 5)
                a.remove(v)
                b.remove(v)
            if rnd.random() < 0.3:
                a.min()  # sorted list kept from here on
            values = [rnd.choice([None, *range(6)]) for _ in range(rnd.randint(0, 10))]
            assert a.add_all(values) == sum(v is not None for v in values)
            for v in values:
                if v is not None:
                    b.add(v)
            assert a == b and a.distinct_count == b.distinct_count
            assert (a.min(), a.max(), a.present()) == (b.min(), b.max(), b.present())


def pageviews_like() -> GroupAggregate:
    return GroupAggregate(["region"], [AggSpec.count_star("pv"), AggSpec.count("uv", "user", distinct=True)])
