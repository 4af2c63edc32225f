"""IcebergSink against an embedded SqlCatalog (SQLite + local warehouse in tmp_path)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.types import DecimalType, DoubleType, LongType, StringType

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import DataType, parse_data_type
from changelake.connectors.iceberg import (
    OFFSETS_PROPERTY,
    TRUNCATE,
    IcebergSink,
    TruncateMarker,
    IcebergSinkError,
    IcebergSinkOptions,
    NullPrimaryKeyError,
    SchemaEvolutionError,
    read_table,
)

T = TableId("shop", "orders")
I, U_BEFORE, U_AFTER, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE


def t(sql: str) -> DataType:
    return parse_data_type(sql)


@pytest.fixture
def options(tmp_path: Path) -> IcebergSinkOptions:
    (tmp_path / "catalog").mkdir()  # the catalog's folder must exist (creating a catalog is explicit)
    return IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/catalog/catalog.db", f"file://{tmp_path}/warehouse")


@pytest.fixture
def sink(options: IcebergSinkOptions):
    with IcebergSink(options) as s:
        yield s


SIMPLE = Schema.of([("id", t("BIGINT NOT NULL")), ("name", t("STRING")), ("qty", t("INT"))], ["id"])
COMPOSITE = Schema.of(
    [("region", t("VARCHAR(8) NOT NULL")), ("id", t("INT NOT NULL")), ("v", t("STRING"))], ["region", "id"]
)


def row(kind: RowKind, **values: Any) -> ChangelogRow:
    return ChangelogRow(kind, values)


def lake(options: IcebergSinkOptions, table_id: TableId = T, key: str | list[str] = "id") -> list[dict[str, Any]]:
    rows = read_table(options, table_id).to_pylist()
    keys = [key] if isinstance(key, str) else key
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


# -- create / evolve -----------------------------------------------------------------------------


def test_create_table_with_identifier_fields(sink: IcebergSink) -> None:
    table = sink.ensure_table(T, SIMPLE)
    schema = table.schema()
    assert [f.name for f in schema.fields] == ["id", "name", "qty"]
    assert [schema.find_column_name(i) for i in schema.identifier_field_ids] == ["id"]
    assert schema.find_field("id").required and not schema.find_field("name").required
    assert sink.catalog.table_exists(("shop", "orders"))


def test_table_properties_applied(tmp_path: Path) -> None:
    options = IcebergSinkOptions.sql(
        f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh", **{"table.properties.write.parquet.compression-codec": "zstd"}
    )
    with IcebergSink(options) as s:
        table = s.ensure_table(T, SIMPLE)
    assert table.properties["write.parquet.compression-codec"] == "zstd"


def test_table_without_primary_key_is_refused(sink: IcebergSink) -> None:
    with pytest.raises(IcebergSinkError, match="table 'shop.orders' has no primary key"):
        sink.ensure_table(T, Schema.of([("id", t("BIGINT"))]))


def test_evolution_add_widen_and_drop(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    v1 = Schema.of(
        [("id", t("INT NOT NULL")), ("name", t("STRING NOT NULL")), ("score", t("FLOAT")), ("price", t("DECIMAL(5, 2)"))],
        ["id"],
    )
    sink.write(T, [row(I, id=1, name="a", score=1.5, price=Decimal("1.25"))], v1, {"orders/0": 1})
    # V2: INT -> BIGINT, FLOAT -> DOUBLE, DECIMAL(5,2) -> DECIMAL(12,2), 'name' dropped, 'note' added
    v2 = Schema.of(
        [("id", t("BIGINT NOT NULL")), ("score", t("DOUBLE")), ("price", t("DECIMAL(12, 2)")), ("note", t("STRING"))],
        ["id"],
    )
    sink.write(
        T, [row(I, id=2**40, score=0.1, price=Decimal("1234567890.12"), note="new")], v2, {"orders/0": 2}
    )
    schema = sink.load_table(T).schema()
    assert schema.find_field("id").field_type == LongType()
    assert schema.find_field("score").field_type == DoubleType()
    assert schema.find_field("price").field_type == DecimalType(12, 2)
    assert schema.find_field("note").field_type == StringType() and not schema.find_field("note").required
    assert not schema.find_field("name").required  # dropped upstream: kept, nullable
    rows = lake(options)
    assert rows == [
        {"id": 1, "name": "a", "score": 1.5, "price": Decimal("1.25"), "note": None},
        {"id": 2**40, "name": None, "score": 0.1, "price": Decimal("1234567890.12"), "note": "new"},
    ]
    # a narrower incoming type is written into the wider lake column unchanged
    sink.write(T, [row(U_AFTER, id=1, name="b", score=2.5, price=Decimal("2.00"))], v1, {"orders/0": 3})
    assert lake(options)[0] == {"id": 1, "name": "b", "score": 2.5, "price": Decimal("2.00"), "note": None}
    assert sink.load_table(T).schema().find_field("id").field_type == LongType()


@pytest.mark.parametrize(
    ("new_schema", "message"),
    [
        (
            Schema.of([("id", t("BIGINT NOT NULL")), ("name", t("INT")), ("qty", t("INT"))], ["id"]),
            "column 'name' of table 'shop.orders' changed type from string to int",
        ),
        (
            Schema.of([("id", t("BIGINT NOT NULL")), ("name", t("STRING NOT NULL"))], ["id", "name"]),
            "primary key of table 'shop.orders' changed from ['id'] to ['id', 'name']",
        ),
    ],
)
def test_incompatible_evolution_is_refused(sink: IcebergSink, new_schema: Schema, message: str) -> None:
    sink.ensure_table(T, SIMPLE)
    with pytest.raises(SchemaEvolutionError) as info:
        sink.ensure_table(T, new_schema)
    assert message in str(info.value)


def test_decimal_scale_change_is_refused(sink: IcebergSink) -> None:
    v1 = Schema.of([("id", t("BIGINT NOT NULL")), ("p", t("DECIMAL(10, 2)"))], ["id"])
    sink.ensure_table(T, v1)
    with pytest.raises(SchemaEvolutionError, match="column 'p' .* from decimal\\(10, 2\\) to decimal\\(10, 3\\)") as info:
        sink.ensure_table(T, Schema.of([("id", t("BIGINT NOT NULL")), ("p", t("DECIMAL(10, 3)"))], ["id"]))
    assert info.value.column == "p"


# -- changelog semantics -------------------------------------------------------------------------


def test_upsert_delete_semantics_single_key(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    sink.write(
        T,
        [row(I, id=1, name="a", qty=1), row(I, id=2, name="b", qty=2), row(I, id=3, name="c", qty=3)],
        SIMPLE,
        {"orders/0": 3},
    )
    result = sink.write(
        T,
        [
            row(U_BEFORE, id=1, name="a", qty=1),
            row(U_AFTER, id=1, name="a2", qty=10),
            row(D, id=2),  # a delete carrying only the key
            row(I, id=4, name="d", qty=None),
            row(U_BEFORE, id=4, name="d", qty=None),
            row(U_AFTER, id=4, name="d2", qty=40),
            row(I, id=5, name="e", qty=5),
            row(D, id=5, name="e", qty=5),  # inserted and deleted within the batch
            row(D, id=99),  # deleting an absent key is fine
        ],
        SIMPLE,
        {"orders/0": 12},
    )
    assert (result.rows_in, result.rows_upserted, result.keys_deleted) == (9, 2, 3)
    assert lake(options) == [
        {"id": 1, "name": "a2", "qty": 10},
        {"id": 3, "name": "c", "qty": 3},
        {"id": 4, "name": "d2", "qty": 40},
    ]


def test_reinsert_after_delete_in_one_batch(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    sink.write(T, [row(I, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 1})
    sink.write(T, [row(D, id=1), row(I, id=1, name="again", qty=2)], SIMPLE, {"orders/0": 3})
    assert lake(options) == [{"id": 1, "name": "again", "qty": 2}]


def test_one_commit_per_write(sink: IcebergSink) -> None:
    sink.write(T, [row(I, id=i, name=str(i), qty=i) for i in range(10)], SIMPLE, {"orders/0": 10})
    before = sink.load_table(T).metadata.last_sequence_number
    sink.write(T, [row(D, id=1), row(U_AFTER, id=2, name="x", qty=0)], SIMPLE, {"orders/0": 12})
    table = sink.load_table(T)
    # the delete and the append of one write are one catalog commit sharing one commit id
    new = [s for s in table.snapshots() if s.sequence_number is not None and s.sequence_number > before]
    assert len({s.summary["changelake.commit-id"] for s in new}) == 1
    assert {s.summary[OFFSETS_PROPERTY] for s in new} == {'{"orders/0":12}'}


@pytest.mark.parametrize("keys", [10, 300])
def test_composite_key_upsert_and_delete(sink: IcebergSink, options: IcebergSinkOptions, keys: int) -> None:
    regions = ["eu", "us", "ap"]
    initial = [row(I, region=r, id=i, v=f"{r}{i}") for r in regions for i in range(keys)]
    sink.write(T, initial, COMPOSITE, {"orders/0": 1})
    # change (eu, 0) and (us, 1) only: the coarse filter In(region, {eu, us}) AND In(id, {0, 1})
    # also matches (eu, 1) and (us, 0), which must survive unchanged
    sink.write(
        T,
        [row(U_AFTER, region="eu", id=0, v="changed"), row(D, region="us", id=1), row(I, region="ap", id=keys, v="new")],
        COMPOSITE,
        {"orders/0": 2},
    )
    expected = {(r, i): f"{r}{i}" for r in regions for i in range(keys)}
    expected[("eu", 0)] = "changed"
    del expected[("us", 1)]
    expected[("ap", keys)] = "new"
    got = {(r["region"], r["id"]): r["v"] for r in lake(options, key=["region", "id"])}
    assert got == expected
    assert len(read_table(options, T)) == len(expected)  # no duplicates


def test_truncate_deletes_every_row_and_keeps_later_rows(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    sink.write(T, [row(I, id=i, name=str(i), qty=i) for i in range(5)], SIMPLE, {"orders/0": 5})
    result = sink.write(
        T, [row(I, id=10, name="gone", qty=0), TRUNCATE, row(I, id=7, name="after", qty=7), row(D, id=3)], SIMPLE,
        {"orders/0": 9},
    )
    assert result.truncated
    assert lake(options) == [{"id": 7, "name": "after", "qty": 7}]
    sink.truncate(T, SIMPLE, {"orders/0": 10})
    assert lake(options) == []
    assert sink.committed_offsets(T) == {"orders/0": 10}


def test_truncate_with_composite_key(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    sink.write(T, [row(I, region="eu", id=1, v="x")], COMPOSITE, {"t/0": 1})
    sink.truncate(T, COMPOSITE, {"t/0": 2})
    assert lake(options, key=["region", "id"]) == []


def test_null_primary_key_is_refused(sink: IcebergSink) -> None:
    with pytest.raises(NullPrimaryKeyError) as info:
        sink.write(T, [row(I, region="eu", id=None, v="x")], COMPOSITE, {"t/0": 1})
    assert info.value.table == "shop.orders" and info.value.column == "id"
    assert "primary-key column 'id' of table 'shop.orders' is NULL" in str(info.value)
    assert sink.committed_offsets(T) == {}


# -- offsets / exactly-once ----------------------------------------------------------------------


def test_offsets_round_trip_and_merge(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    assert sink.committed_offsets(T) == {}
    sink.write(T, [row(I, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 5, "orders/1": 3})
    sink.write(T, [row(I, id=2, name="b", qty=2)], SIMPLE, {"orders/1": 8})
    assert sink.committed_offsets(T) == {"orders/0": 5, "orders/1": 8}
    # a fresh sink (a restarted process) reads the same offsets from the snapshot summary
    with IcebergSink(options) as again:
        assert again.committed_offsets(T) == {"orders/0": 5, "orders/1": 8}


def test_offsets_found_behind_snapshots_without_them(sink: IcebergSink) -> None:
    sink.write(T, [row(I, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 5})
    table = sink.load_table(T)
    table.append(pa.Table.from_pylist([{"id": 9, "name": "manual", "qty": None}], schema=table.schema().as_arrow()))
    assert sink.load_table(T).current_snapshot().summary.get(OFFSETS_PROPERTY) is None
    assert sink.committed_offsets(T) == {"orders/0": 5}


def test_replayed_batch_is_skipped(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    sink.write(T, [row(I, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 1})
    sink.write(T, [row(U_AFTER, id=1, name="b", qty=2)], SIMPLE, {"orders/0": 2})
    snapshot_before = sink.load_table(T).current_snapshot().snapshot_id
    # crash + restart from an older position: the first batch comes again
    result = sink.write(T, [row(I, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 1})
    assert result.skipped and result.snapshot_id is None
    assert sink.load_table(T).current_snapshot().snapshot_id == snapshot_before
    assert lake(options) == [{"id": 1, "name": "b", "qty": 2}]


def test_rows_below_committed_offset_are_dropped(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    sink.write(T, [row(I, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 1, "orders/1": 1})
    old = ChangelogRow(I, {"id": 1, "name": "stale", "qty": 0}, metadata={"topic": "orders", "partition": 0, "offset": 0})
    new = ChangelogRow(I, {"id": 2, "name": "new", "qty": 2}, metadata={"topic": "orders", "partition": 1, "offset": 1})
    sink.write(T, [old, new], SIMPLE, {"orders/0": 1, "orders/1": 2})
    assert lake(options) == [{"id": 1, "name": "a", "qty": 1}, {"id": 2, "name": "new", "qty": 2}]


def test_empty_batch_still_records_offsets(sink: IcebergSink) -> None:
    sink.write(T, [row(I, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 1})
    result = sink.write(T, [row(U_BEFORE, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 7})
    assert not result.skipped and result.rows_upserted == 0
    assert sink.committed_offsets(T) == {"orders/0": 7}


def test_buffered_writes_flush_per_table(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    other = TableId("shop", "items")
    small = IcebergSink(IcebergSinkOptions.sql(
        options.catalog_properties["uri"], options.catalog_properties["warehouse"], **{"commit.max-rows": 3}
    ))
    with small:
        small.add(T, [row(I, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 1})
        small.add(other, [row(I, id=1, name="x", qty=1)], SIMPLE, {"items/0": 1})
        assert not small.should_flush()
        small.add(T, [row(U_AFTER, id=1, name="b", qty=2)], SIMPLE, {"orders/0": 2})
        assert small.should_flush()
        results = small.flush()
        assert small.buffered_rows == 0
    assert {r.table for r in results} == {"shop.orders", "shop.items"}
    assert lake(options) == [{"id": 1, "name": "b", "qty": 2}]
    assert sink.committed_offsets(T) == {"orders/0": 2}
    assert sink.committed_offsets(other) == {"items/0": 1}


# -- every type ----------------------------------------------------------------------------------


ALL_TYPES = Schema.of(
    [
        ("id", DataType.decimal(20, 0, nullable=False)),
        ("flag", t("BOOLEAN")),
        ("tiny", t("TINYINT")),
        ("big", t("BIGINT")),
        ("f", t("FLOAT")),
        ("d", t("DOUBLE")),
        ("frac", DataType.decimal(5, 5)),
        ("name", t("VARCHAR(50)")),
        ("code", t("CHAR(2)")),
        ("blob", t("VARBINARY(8)")),
        ("day", t("DATE")),
        ("dur", t("TIME(3)")),
        ("wall", t("TIMESTAMP(6)")),
        ("instant", t("TIMESTAMP_LTZ(3)")),
    ],
    ["id"],
)


def test_every_type_round_trips(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    utc = dt.timezone.utc
    full = {
        "id": Decimal("18446744073709551615"),
        "flag": False,
        "tiny": -128,
        "big": 2**63 - 1,
        "f": 3.5,
        "d": -1e308,
        "frac": Decimal("0.99999"),
        "name": "Ünïcødé ✓ 日本語 🚀",
        "code": "DE",
        "blob": bytes(range(8)),
        "day": dt.date(2024, 2, 29),
        "dur": dt.timedelta(hours=-838, minutes=-59, seconds=-59),
        "wall": dt.datetime(2024, 3, 31, 2, 30, 0, 123456),
        "instant": dt.datetime(2024, 3, 31, 1, 0, 0, 500000, tzinfo=utc),
    }
    nulls = {"id": Decimal(0)} | {k: None for k in full if k != "id"}
    sink.write(T, [row(I, **full), row(I, **nulls)], ALL_TYPES, {"types/0": 2})
    got = lake(options)
    assert got[0] == nulls
    assert got[1] == dict(full, dur="-838:59:59.000")
    # delete by a DECIMAL(20, 0) key at the top of BIGINT UNSIGNED
    sink.write(T, [row(D, id=Decimal("18446744073709551615"))], ALL_TYPES, {"types/0": 3})
    assert lake(options) == [nulls]


KEYS_OF_EVERY_KIND = [
        ("TIMESTAMP_LTZ(6)", [dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc)]),
        ("TIMESTAMP(6)", [dt.datetime(2020, 1, 1), dt.datetime(2021, 1, 1, 0, 0, 0, 1)]),
        ("DATE", [dt.date(2020, 1, 1), dt.date(2020, 1, 2)]),
        ("VARBINARY(4)", [b"\x00", b"\xff\xfe"]),
        ("DECIMAL(10, 2)", [Decimal("1.50"), Decimal("-2.25")]),
        ("TIME(0)", [dt.timedelta(hours=1), dt.timedelta(hours=-30)]),
        ("STRING", ["ä", "😀"]),
]


@pytest.mark.parametrize(("key_type", "keys"), KEYS_OF_EVERY_KIND)
def test_keys_of_every_kind_upsert_and_delete(
    sink: IcebergSink, options: IcebergSinkOptions, key_type: str, keys: list[Any]
) -> None:
    schema = Schema.of([("k", t(key_type + " NOT NULL")), ("n", t("INT"))], ["k"])
    sink.write(T, [row(I, k=keys[0], n=1), row(I, k=keys[1], n=2)], schema, {"k/0": 2})
    sink.write(T, [row(U_AFTER, k=keys[0], n=10), row(D, k=keys[1])], schema, {"k/0": 4})
    rows = read_table(options, T).to_pylist()
    assert [r["n"] for r in rows] == [10]


@pytest.mark.parametrize(("key_type", "keys"), KEYS_OF_EVERY_KIND)
def test_composite_keys_of_every_kind_upsert_and_delete(
    sink: IcebergSink, options: IcebergSinkOptions, key_type: str, keys: list[Any]
) -> None:
    # the second key column of every kind: the copy-on-write matches composite keys in one
    # hash semi-join of Arrow's
    schema = Schema.of([("r", t("INT NOT NULL")), ("k", t(key_type + " NOT NULL")), ("n", t("INT"))], ["r", "k"])
    sink.write(T, [row(I, r=1, k=keys[0], n=1), row(I, r=1, k=keys[1], n=2), row(I, r=2, k=keys[0], n=3),
                   row(I, r=2, k=keys[1], n=4)], schema, {"k/0": 4})
    sink.write(T, [row(U_AFTER, r=1, k=keys[0], n=10), row(D, r=2, k=keys[1])], schema, {"k/0": 6})
    got = sorted((r["r"], r["n"]) for r in read_table(options, T).to_pylist())
    assert got == [(1, 2), (1, 10), (2, 3)]


def test_copy_on_write_reads_current_schema_files_directly_and_older_ones_through_pyiceberg(
    sink: IcebergSink, options: IcebergSinkOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.io.pyarrow import ArrowScan

    scanned: list[int] = []
    to_table = ArrowScan.to_table

    def counted(self: ArrowScan, tasks: Any) -> pa.Table:
        tasks = list(tasks)
        scanned.append(len(tasks))
        return to_table(self, tasks)

    monkeypatch.setattr(ArrowScan, "to_table", counted)
    sink.write(T, [row(I, id=i, name=str(i), qty=i) for i in range(3)], SIMPLE, {"orders/0": 3})
    sink.write(T, [row(U_AFTER, id=0, name="x", qty=0)], SIMPLE, {"orders/0": 4})
    assert scanned == []  # the file is in the table's schema: read whole with pyarrow
    with_note = Schema.of([*SIMPLE.columns, ("note", t("STRING"))], ["id"])
    sink.write(T, [row(I, id=10, name="n", qty=1, note="new")], with_note, {"orders/0": 5})
    sink.write(T, [row(U_AFTER, id=1, name="y", qty=1, note="u"), row(U_AFTER, id=10, name="m", qty=2, note="v")],
               with_note, {"orders/0": 7})
    assert scanned == [1]  # the file without 'note' goes through pyiceberg's projection
    assert lake(options) == [
        {"id": 0, "name": "x", "qty": 0, "note": None},
        {"id": 1, "name": "y", "qty": 1, "note": "u"},
        {"id": 2, "name": "2", "qty": 2, "note": None},
        {"id": 10, "name": "m", "qty": 2, "note": "v"},
    ]


def test_read_table_columns_and_errors(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    sink.write(T, [row(I, id=1, name="a", qty=1)], SIMPLE, {"orders/0": 1})
    assert read_table(options, T, columns=["qty", "id"]).to_pylist() == [{"qty": 1, "id": 1}]
    raw = {"catalog.properties.uri": options.catalog_properties["uri"], "catalog.properties.warehouse": options.catalog_properties["warehouse"]}
    assert read_table(raw, T).num_rows == 1
    with pytest.raises(IcebergSinkError, match="column\\(s\\) \\['nope'\\] not in Iceberg table 'shop.orders'"):
        read_table(options, T, columns=["nope"])
    with pytest.raises(IcebergSinkError, match="Iceberg table 'shop.missing' .* does not exist"):
        read_table(options, TableId("shop", "missing"))


def test_replayed_truncate_with_position_is_not_applied_again(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    def at(offset: int) -> dict[str, Any]:
        return {"topic": "orders", "partition": 0, "offset": offset}

    first = [
        ChangelogRow(I, {"id": 1, "name": "a", "qty": 1}, metadata=at(0)),
        TruncateMarker(at(1)),
        ChangelogRow(I, {"id": 2, "name": "b", "qty": 2}, metadata=at(2)),
    ]
    sink.write(T, first, SIMPLE, {"orders/0": 3})
    # restart from an older position with a larger batch: offsets 0..3 arrive again plus offset 3
    again = [*first, ChangelogRow(I, {"id": 3, "name": "c", "qty": 3}, metadata=at(3))]
    result = sink.write(T, again, SIMPLE, {"orders/0": 4})
    assert not result.truncated
    assert lake(options) == [{"id": 2, "name": "b", "qty": 2}, {"id": 3, "name": "c", "qty": 3}]


def test_update_that_changes_the_primary_key_deletes_the_old_key(sink: IcebergSink, options: IcebergSinkOptions) -> None:
    sink.write(T, [row(I, id=1, name="a", qty=1), row(I, id=2, name="b", qty=2)], SIMPLE, {"orders/0": 2})
    sink.write(T, [row(U_BEFORE, id=1, name="a", qty=1), row(U_AFTER, id=7, name="a", qty=1)], SIMPLE, {"orders/0": 4})
    assert lake(options) == [{"id": 2, "name": "b", "qty": 2}, {"id": 7, "name": "a", "qty": 1}]


def test_copy_on_write_of_a_partition_holding_another_engines_file(tmp_path: Path) -> None:
    """A Parquet file another engine wrote (Arrow's small ``string``, no field ids), added to an
    unpartitioned table beside the sink's own file: one commit rewrites both together."""
    import pyarrow.parquet as pq

    (tmp_path / "catalog").mkdir()
    options = IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/catalog/catalog.db", f"file://{tmp_path}/warehouse",
                                     **{"bucket-by-key": "false"})
    schema = Schema.of([("id", t("BIGINT NOT NULL")), ("v", t("STRING"))], ["id"])
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"id": pa.array(range(10, 15), pa.int64()), "v": pa.array(["ext"] * 5, pa.string())},
                            schema=pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])),
                   foreign)
    with IcebergSink(options) as sink:
        sink.write(T, [row(I, id=i, v="sink") for i in range(5)], schema, {"orders/0": 5})
        table = sink.load_table(T)
        assert table is not None and not table.spec().fields
        table.add_files([f"file://{foreign}"])
        sink.write(T, [row(U_AFTER, id=1, v="u"), row(U_AFTER, id=11, v="u"), row(D, id=12)], schema, {"orders/0": 8})
    expected = {i: "sink" for i in range(5)} | {i: "ext" for i in (10, 11, 13, 14)} | {1: "u", 11: "u"}
    assert {r["id"]: r["v"] for r in lake(options)} == expected
    assert len(read_table(options, T)) == 9
