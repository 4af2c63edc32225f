"""GroupAggregate: retract semantics as Flink's GroupAggFunction, exact MIN/MAX/DISTINCT under retraction."""

from __future__ import annotations

import collections
import datetime as dt
import random
from decimal import Decimal

import pytest

from changelake.changelog import ChangelogRow, DataType, RowKind, Schema, SchemaError, TableId
from changelake.changelog.aggregate import (
    AggFunction,
    AggSpec,
    GroupAggregate,
    InvalidAggregateError,
    MemoryAggStateStore,
    ValueMultiset,
    decode_group_state,
    encode_group_state,
)
from changelake.changelog.rowkind import RETRACT, UPSERT

I, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE


def pv_uv() -> GroupAggregate:
    return GroupAggregate(["region"], [AggSpec.count_star("pv"), AggSpec.count("uv", "user", distinct=True)])


def row(kind: RowKind, **values: object) -> ChangelogRow:
    return ChangelogRow(kind, dict(values))


def short(rows: list[ChangelogRow]) -> list[str]:
    return [str(r) for r in rows]


# -- emission protocol ---------------------------------------------------------------------------
def test_first_row_of_group_is_insert_then_update_is_retract_pair() -> None:
    agg = pv_uv()
    assert short(agg.process(row(I, region="EU", user=1))) == ["+I[EU, 1, 1]"]
    assert short(agg.process(row(I, region="EU", user=2))) == ["-U[EU, 1, 1]", "+U[EU, 2, 2]"]
    assert short(agg.process(row(I, region="US", user=1))) == ["+I[US, 1, 1]"]
    # a repeated user changes pv only
    assert short(agg.process(row(I, region="EU", user=1))) == ["-U[EU, 2, 2]", "+U[EU, 3, 2]"]


def test_output_rows_carry_names_in_order_and_table() -> None:
    agg = GroupAggregate(["region"], [AggSpec.count_star("pv")], output_table=TableId("db", "per_region"))
    (out,) = agg.process(row(I, region="EU", user=1))
    assert list(out.values) == ["region", "pv"]
    assert out.table == TableId("db", "per_region")


def test_distinct_user_leaving_lowers_uv_only_when_last_row_goes() -> None:
    agg = pv_uv()
    agg.process_all([row(I, region="EU", user=1), row(I, region="EU", user=1), row(I, region="EU", user=2)])
    # user 1 still has one row left: uv stays 2
    assert short(agg.process(row(D, region="EU", user=1))) == ["-U[EU, 3, 2]", "+U[EU, 2, 2]"]
    # user 1's last row leaves: uv drops to 1
    assert short(agg.process(row(D, region="EU", user=1))) == ["-U[EU, 2, 2]", "+U[EU, 1, 1]"]


def test_group_emptying_emits_delete_of_old_value_and_clears_state() -> None:
    agg = pv_uv()
    agg.process_all([row(I, region="EU", user=1), row(I, region="EU", user=2)])
    agg.process(row(D, region="EU", user=1))
    assert short(agg.process(row(D, region="EU", user=2))) == ["-D[EU, 1, 1]"]
    assert len(agg.store) == 0
    assert agg.result() == {}
    # the group comes back as a fresh +I
    assert short(agg.process(row(I, region="EU", user=3))) == ["+I[EU, 1, 1]"]


def test_retraction_for_unknown_group_emits_nothing_and_creates_no_state() -> None:
    agg = pv_uv()
    assert agg.process(row(D, region="EU", user=1)) == []
    assert agg.process(row(UB, region="EU", user=1)) == []
    assert len(agg.store) == 0


def test_no_change_emits_nothing() -> None:
    agg = GroupAggregate(["region"], [AggSpec.max("top", "score")])
    agg.process_all([row(I, region="EU", score=10), row(I, region="EU", score=3)])
    assert agg.process(row(I, region="EU", score=5)) == []
    assert agg.process(row(D, region="EU", score=3)) == []


def test_update_pair_input_minus_u_plus_u() -> None:
    """An upstream update (-U old, +U new) moving a user between regions, as a CDC source emits."""
    agg = pv_uv()
    agg.process_all([row(I, region="EU", user=1), row(I, region="EU", user=2)])
    assert short(agg.process(row(UB, region="EU", user=1))) == ["-U[EU, 2, 2]", "+U[EU, 1, 1]"]
    assert short(agg.process(row(UA, region="US", user=1))) == ["+I[US, 1, 1]"]


def test_without_update_before_output_is_upsert() -> None:
    agg = GroupAggregate(["region"], [AggSpec.count_star("pv")], generate_update_before=False)
    assert agg.changelog_mode == UPSERT
    assert pv_uv().changelog_mode == RETRACT
    agg.process(row(I, region="EU"))
    assert short(agg.process(row(I, region="EU"))) == ["+U[EU, 2]"]
    assert short(agg.process(row(D, region="EU"))) == ["+U[EU, 1]"]
    assert short(agg.process(row(D, region="EU"))) == ["-D[EU, 1]"]


# -- MIN / MAX / SUM / COUNT(col) ----------------------------------------------------------------
def test_retracting_current_min_falls_back_to_next_smallest() -> None:
    agg = GroupAggregate(["g"], [AggSpec.min("lo", "v"), AggSpec.max("hi", "v")])
    agg.process_all([row(I, g=1, v=5), row(I, g=1, v=2), row(I, g=1, v=9), row(I, g=1, v=2)])
    # one of two 2s leaves: MIN stays 2, nothing emitted
    assert agg.process(row(D, g=1, v=2)) == []
    assert short(agg.process(row(D, g=1, v=2))) == ["-U[1, 2, 9]", "+U[1, 5, 9]"]
    assert short(agg.process(row(D, g=1, v=9))) == ["-U[1, 5, 9]", "+U[1, 5, 5]"]


def test_sum_count_col_and_nulls() -> None:
    agg = GroupAggregate(
        ["g"],
        [AggSpec.count_star("n"), AggSpec.count("nv", "v"), AggSpec.sum("s", "v"), AggSpec.min("lo", "v")],
    )
    assert short(agg.process(row(I, g="a", v=None))) == ["+I[a, 1, 0, NULL, NULL]"]
    assert short(agg.process(row(I, g="a", v=4))) == ["-U[a, 1, 0, NULL, NULL]", "+U[a, 2, 1, 4, 4]"]
    assert short(agg.process(row(I, g="a", v=-1))) == ["-U[a, 2, 1, 4, 4]", "+U[a, 3, 2, 3, -1]"]
    # retracting every non-null value makes SUM and MIN NULL again, not 0
    agg.process_all([row(D, g="a", v=4), row(D, g="a", v=-1)])
    assert agg.result() == {("a",): {"g": "a", "n": 1, "nv": 0, "s": None, "lo": None}}


def test_sum_decimal_keeps_exact_decimal() -> None:
    agg = GroupAggregate(["g"], [AggSpec.sum("s", "price")])
    agg.process_all([row(I, g=1, price=Decimal("0.10")), row(I, g=1, price=Decimal("0.20"))])
    assert agg.result()[(1,)]["s"] == Decimal("0.30")
    agg.process(row(D, g=1, price=Decimal("0.10")))
    assert agg.result()[(1,)]["s"] == Decimal("0.20")


def test_sum_distinct() -> None:
    agg = GroupAggregate(["g"], [AggSpec.sum("s", "v", distinct=True)])
    agg.process_all([row(I, g=1, v=3), row(I, g=1, v=3), row(I, g=1, v=4)])
    assert agg.result()[(1,)]["s"] == 7


def test_null_group_key_is_one_group_and_empty_group_by_is_global() -> None:
    agg = GroupAggregate(["g"], [AggSpec.count_star("n")])
    agg.process_all([row(I, g=None), row(I, g=None)])
    assert agg.result() == {(None,): {"g": None, "n": 2}}
    glob = GroupAggregate([], [AggSpec.count_star("n")])
    assert short(glob.process(row(I, g=1))) == ["+I[1]"]
    assert short(glob.process(row(I, g=2))) == ["-U[1]", "+U[2]"]


# -- validation ----------------------------------------------------------------------------------
def test_invalid_specs_are_refused() -> None:
    with pytest.raises(InvalidAggregateError, match=r"SUM\(\*\) is not allowed"):
        AggSpec("s", AggFunction.SUM)
    with pytest.raises(InvalidAggregateError, match=r"duplicate output column names \['pv'\]"):
        GroupAggregate(["pv"], [AggSpec.count_star("pv")])
    with pytest.raises(InvalidAggregateError, match="at least one aggregate"):
        GroupAggregate(["g"], [])


def test_missing_columns_name_the_column() -> None:
    agg = pv_uv()
    with pytest.raises(SchemaError, match=r"group-by column 'region' missing from \+I row"):
        agg.process(row(I, user=1))
    with pytest.raises(SchemaError, match=r"column 'user' of COUNT\(DISTINCT user\) AS uv missing"):
        agg.process(row(I, region="EU"))


def test_describe_and_output_schema() -> None:
    agg = pv_uv()
    assert agg.describe() == "GroupAggregate(groupBy=[region], select=[region, COUNT(*) AS pv, COUNT(DISTINCT user) AS uv])"
    schema = Schema.of([("user", DataType.of("BIGINT")), ("region", DataType.of("STRING"))])
    out = agg.output_schema(schema)
    assert out.names == ["region", "pv", "uv"]
    assert out.primary_key == ("region",)
    assert out.column("pv").type == DataType.of("BIGINT", nullable=False)
    s2 = GroupAggregate(["region"], [AggSpec.sum("s", "amount")]).output_schema(
        Schema.of([("region", DataType.of("STRING")), ("amount", DataType.decimal(10, 2))])
    )
    assert s2.column("s").type == DataType.decimal(38, 2)


# -- state ---------------------------------------------------------------------------------------
def test_value_multiset_tracks_presence_with_negative_counts() -> None:
    ms = ValueMultiset()
    ms.remove(5)  # retract before accumulate: count -1, not present
    assert ms.distinct_count == 0 and ms.min() is None and ms.count(5) == -1
    ms.add(5)
    assert ms.distinct_count == 0 and len(ms) == 0
    ms.add(5)
    ms.add(1)
    assert (ms.min(), ms.max(), ms.distinct_count) == (1, 5, 2)


def test_snapshot_restore_roundtrip_continues_identically() -> None:
    specs = [
        AggSpec.count_star("n"),
        AggSpec.count("u", "user", distinct=True),
        AggSpec.min("first", "ts"),
        AggSpec.max("last", "ts"),
        AggSpec.sum("amt", "price"),
    ]
    a = GroupAggregate(["region"], specs)
    t0 = dt.datetime(2024, 1, 1, 12, 0, 0, 123000)
    rows = [
        row(I, region=r, user=u, ts=t0 + dt.timedelta(seconds=u), price=Decimal(u) / 10)
        for r, u in [("EU", 1), ("EU", 2), ("US", 1), ("EU", 1), (None, 7)]
    ]
    a.process_all(rows)
    data = a.snapshot()
    b = GroupAggregate(["region"], specs, store=MemoryAggStateStore())
    b.restore(data)
    assert b.result() == a.result()
    nxt = [rows[0].with_kind(D), rows[1].with_kind(D), row(I, region="US", user=9, ts=t0, price=Decimal("1.5"))]
    for r in nxt:
        assert short(b.process(r)) == short(a.process(r))


def test_restore_refuses_other_operator_and_garbage() -> None:
    data = pv_uv().snapshot()
    other = GroupAggregate(["region"], [AggSpec.count_star("pv")])
    with pytest.raises(InvalidAggregateError, match="snapshot belongs to GroupAggregate"):
        other.restore(data)
    with pytest.raises(InvalidAggregateError, match="corrupt aggregate snapshot"):
        other.restore(b"not json")


def test_group_state_record_roundtrip() -> None:
    agg = pv_uv()
    agg.process_all([row(I, region="EU", user=1), row(I, region="EU", user=2)])
    ((key, acc),) = list(agg.store.items())
    k, v = encode_group_state(key, acc)
    assert k == b'["EU"]'
    key2, acc2 = decode_group_state(k, v)
    assert key2 == key and acc2 is not None and acc2.value(agg.aggregates) == acc.value(agg.aggregates)
    assert decode_group_state(*encode_group_state(key, None)) == (key, None)


# -- property: incremental output == recomputation from scratch ----------------------------------
def recompute(live: list[dict[str, object]]) -> dict[tuple[object, ...], dict[str, object]]:
    groups: dict[object, list[dict[str, object]]] = collections.defaultdict(list)
    for r in live:
        groups[r["g"]].append(r)
    out = {}
    for g, rs in groups.items():
        vs = [r["v"] for r in rs if r["v"] is not None]
        out[(g,)] = {
            "g": g,
            "n": len(rs),
            "nv": len(vs),
            "dv": len(set(vs)),
            "s": sum(vs) if vs else None,
            "lo": min(vs) if vs else None,
            "hi": max(vs) if vs else None,
        }
    return out


def materialize(changelog: list[ChangelogRow]) -> dict[tuple[object, ...], dict[str, object]]:
    """Apply a retract changelog to a table, checking every -U/-D retracts exactly the current row."""
    table: dict[tuple[object, ...], dict[str, object]] = {}
    pending_ub = None
    for r in changelog:
        key = (r.values["g"],)
        if r.kind is I:
            assert key not in table
            table[key] = dict(r.values)
        elif r.kind is UB:
            assert table[key] == dict(r.values)
            pending_ub = key
        elif r.kind is UA:
            assert pending_ub == key, "+U must follow its -U"
            assert table[key] != dict(r.values), "an update must change something"
            table[key] = dict(r.values)
            pending_ub = None
        else:
            assert table.pop(key) == dict(r.values)
    return table


@pytest.mark.parametrize("seed", range(40))
def test_random_insert_delete_streams_match_recomputation(seed: int) -> None:
    rnd = random.Random(seed)
    agg = GroupAggregate(
        ["g"],
        [
            AggSpec.count_star("n"),
            AggSpec.count("nv", "v"),
            AggSpec.count("dv", "v", distinct=True),
            AggSpec.sum("s", "v"),
            AggSpec.min("lo", "v"),
            AggSpec.max("hi", "v"),
        ],
    )
    live: list[dict[str, object]] = []
    changelog: list[ChangelogRow] = []
    for step in range(300):
        if live and rnd.random() < 0.45:
            victim = live.pop(rnd.randrange(len(live)))
            changelog += agg.process(row(rnd.choice([D, UB]), **victim))
        else:
            new = {"g": rnd.choice("abc"), "v": rnd.choice([None, *range(-3, 6)])}
            live.append(new)
            changelog += agg.process(row(rnd.choice([I, UA]), **new))
        if step % 50 == 0:
            assert agg.result() == recompute(live)
    assert agg.result() == recompute(live)
    assert materialize(changelog) == recompute(live)
    restored = GroupAggregate(agg.group_by, agg.aggregates)
    restored.restore(agg.snapshot())
    assert restored.result() == recompute(live)


# -- mini-batch ----------------------------------------------------------------------------------
def test_process_batch_emits_once_per_group() -> None:
    agg = pv_uv()
    out = agg.process_batch([row(I, region="EU", user=1), row(I, region="US", user=1), row(I, region="EU", user=2)])
    assert short(out) == ["+I[EU, 2, 2]", "+I[US, 1, 1]"]
    out = agg.process_batch([row(I, region="EU", user=3), row(D, region="US", user=1), row(D, region="EU", user=3)])
    # EU went 2,2 -> 3,3 -> 2,2: no change; US emptied
    assert short(out) == ["-D[US, 1, 1]"]
    out = agg.process_batch([row(I, region="US", user=5), row(D, region="US", user=5), row(I, region="EU", user=1)])
    # US appeared and vanished inside the batch: nothing
    assert short(out) == ["-U[EU, 2, 2]", "+U[EU, 3, 2]"]


@pytest.mark.parametrize("seed", range(20))
def test_random_batches_match_recomputation(seed: int) -> None:
    rnd = random.Random(1000 + seed)
    agg = GroupAggregate(["g"], [AggSpec.count_star("n"), AggSpec.count("nv", "v"), AggSpec.count("dv", "v", distinct=True),
                                 AggSpec.sum("s", "v"), AggSpec.min("lo", "v"), AggSpec.max("hi", "v")])
    live: list[dict[str, object]] = []
    changelog: list[ChangelogRow] = []
    for _ in range(30):
        batch = []
        for _ in range(rnd.randrange(1, 20)):
            if live and rnd.random() < 0.45:
                batch.append(row(D, **live.pop(rnd.randrange(len(live)))))
            else:
                new = {"g": rnd.choice("abcd"), "v": rnd.choice([None, *range(-3, 6)])}
                live.append(new)
                batch.append(row(I, **new))
        changelog += agg.process_batch(batch)
        assert materialize(list(changelog)) == recompute(live)


def test_pageviews_query_agrees_with_duckdb_group_by() -> None:
    """The page-views query (PV = COUNT(*), UV = COUNT(DISTINCT user_id)) vs DuckDB's GROUP BY,
    including users leaving (retractions) and a region emptying."""
    from changelake.pageviews import generate_pageviews, pageviews_aggregate, recompute_pv_uv

    events = generate_pageviews(5000, seed=3, regions=("EU", "US", "APAC", "TINY"), users=300)
    agg = pageviews_aggregate()
    agg.process_batch([row(I, **e) for e in events])
    gone = [e for e in events if e["user_id"] % 3 == 0 or e["user_region"] == "TINY"]
    agg.process_batch([row(D, **e) for e in gone])
    kept = [e for e in events if not (e["user_id"] % 3 == 0 or e["user_region"] == "TINY")]
    got = {k[0]: (v["pv"], v["uv"]) for k, v in agg.result().items()}
    assert got == recompute_pv_uv(kept)
    assert "TINY" not in got and len(got) == 3
