"""PaimonSink on a real pypaimon filesystem warehouse: row kinds, replay, evolution, truncate, checkpoint."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.lake.compaction import TRUNCATE, TruncateMarker
from changelake.connectors.paimon import (
    ROW_KIND_FIELD,
    NullPrimaryKeyError,
    PaimonSink,
    PaimonSinkOptions,
    SchemaEvolutionError,
    read_table,
)

T = TableId("shop", "customers")
SCHEMA = Schema.of(
    [("id", parse_data_type("BIGINT NOT NULL")), ("name", parse_data_type("VARCHAR(20)")), ("qty", parse_data_type("INT"))],
    ["id"],
)


@pytest.fixture
def options(tmp_path):
    return PaimonSinkOptions.filesystem(tmp_path / "wh", **{"table.properties.deletion-vectors.enabled": True})


def rows_of(options, table=T):
    return sorted(read_table(options, table).to_pylist(), key=lambda r: r["id"])


def test_row_kinds_upsert_and_delete_merge_on_read(options):
    with PaimonSink(options) as sink:
        sink.write(T, [ChangelogRow.insert({"id": i, "name": f"n{i}", "qty": i}) for i in (1, 2, 3)], SCHEMA, {"t/0": 3})
        result = sink.write(
            T,
            [
                ChangelogRow(RowKind.UPDATE_BEFORE, {"id": 2, "name": "n2", "qty": 2}),
                ChangelogRow(RowKind.UPDATE_AFTER, {"id": 2, "name": "two", "qty": 22}),
                ChangelogRow(RowKind.DELETE, {"id": 3, "name": "n3", "qty": 3}),
            ],
            SCHEMA,
            {"t/0": 6},
        )
        assert (result.rows_upserted, result.keys_deleted, result.skipped) == (1, 1, False)
        assert sink.committed_offsets(T) == {"t/0": 6}
        table = sink.load_table(T)
        assert table.primary_keys == ["id"]
        assert table.options.options.to_map()["rowkind.field"] == ROW_KIND_FIELD
        # one data file per commit, no rewrite of the first one (merge-on-read)
        snapshot = table.snapshot_manager().get_latest_snapshot()
        assert snapshot.properties["changelake.kafka-offsets"] == '{"t/0":6}'
        assert snapshot.commit_user == "admin" and snapshot.commit_identifier == snapshot.id
    assert rows_of(options) == [{"id": 1, "name": "n1", "qty": 1}, {"id": 2, "name": "two", "qty": 22}]


def test_replayed_batch_is_skipped_and_partial_replay_drops_absorbed_rows(options):
    with PaimonSink(options) as sink:
        meta = lambda o: {"topic": "t", "partition": 0, "offset": o}  # noqa: E731
        first = [ChangelogRow(RowKind.INSERT, {"id": 1, "name": "a", "qty": 1}, metadata=meta(0))]
        sink.write(T, first, SCHEMA, {"t/0": 1})
        assert sink.write(T, first, SCHEMA, {"t/0": 1}).skipped
        # a batch reaching past the committed offset: offset 0 is dropped, offset 1 applied
        again = [
            ChangelogRow(RowKind.DELETE, {"id": 1, "name": "a", "qty": 1}, metadata=meta(0)),
            ChangelogRow(RowKind.INSERT, {"id": 2, "name": "b", "qty": 2}, metadata=meta(1)),
        ]
        sink.write(T, first + again, SCHEMA, {"t/0": 2})
    assert [r["id"] for r in rows_of(options)] == [1, 2]


def test_empty_batch_with_new_offsets_still_records_them(options):
    with PaimonSink(options) as sink:
        sink.write(T, [ChangelogRow.insert({"id": 1, "name": "a", "qty": 1})], SCHEMA, {"t/0": 1})
        result = sink.write(T, [], SCHEMA, {"t/0": 5})
        assert not result.skipped and sink.committed_offsets(T) == {"t/0": 5}


def test_truncate_deletes_earlier_rows_in_the_same_commit(options):
    with PaimonSink(options) as sink:
        sink.write(T, [ChangelogRow.insert({"id": i, "name": "x", "qty": i}) for i in range(5)], SCHEMA, {"t/0": 5})
        result = sink.write(
            T, [TruncateMarker({"topic": "t", "partition": 0, "offset": 5}), ChangelogRow.insert({"id": 3, "name": "y", "qty": 0})],
            SCHEMA, {"t/0": 7},
        )
        assert result.truncated and result.keys_deleted == 4
        assert sink.truncate(T, SCHEMA, {"t/0": 7}).skipped
    assert rows_of(options) == [{"id": 3, "name": "y", "qty": 0}]


def test_add_column_and_widen_type_keep_old_rows(options):
    wider = Schema.of(
        [("id", parse_data_type("BIGINT NOT NULL")), ("name", parse_data_type("STRING")),
         ("qty", parse_data_type("BIGINT")), ("price", parse_data_type("DECIMAL(10, 2)"))],
        ["id"],
    )
    with PaimonSink(options) as sink:
        sink.write(T, [ChangelogRow.insert({"id": 1, "name": "a", "qty": 1})], SCHEMA, {"t/0": 1})
        sink.write(T, [ChangelogRow.insert({"id": 2, "name": "b", "qty": 2**40, "price": Decimal("9.99")})], wider, {"t/0": 2})
        # an older, narrower schema still writes into the widened table
        sink.write(T, [ChangelogRow.insert({"id": 3, "name": "c", "qty": 3})], SCHEMA, {"t/0": 3})
    assert rows_of(options) == [
        {"id": 1, "name": "a", "qty": 1, "price": None},
        {"id": 2, "name": "b", "qty": 2**40, "price": Decimal("9.99")},
        {"id": 3, "name": "c", "qty": 3, "price": None},
    ]


def test_incompatible_type_change_names_table_column_and_both_types(options):
    changed = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("name", parse_data_type("STRING")),
                         ("qty", parse_data_type("VARCHAR(5)"))], ["id"])
    with PaimonSink(options) as sink:
        sink.write(T, [ChangelogRow.insert({"id": 1, "name": "a", "qty": 1})], SCHEMA, {"t/0": 1})
        with pytest.raises(SchemaEvolutionError) as info:
            sink.write(T, [ChangelogRow.insert({"id": 2, "name": "b", "qty": "x"})], changed, {"t/0": 2})
    err = info.value
    assert (err.table, err.column, err.old_type, err.new_type) == ("shop.customers", "qty", "INT", "STRING")
    assert "'qty'" in str(err) and "shop.customers" in str(err) and "from INT to STRING" in str(err)


def test_changed_primary_key_and_null_key_are_refused(options):
    with PaimonSink(options) as sink:
        sink.write(T, [ChangelogRow.insert({"id": 1, "name": "a", "qty": 1})], SCHEMA, {"t/0": 1})
        with pytest.raises(SchemaEvolutionError, match="primary key"):
            sink.write(T, [], SCHEMA.with_primary_key(["id", "name"]), {"t/0": 2})
        with pytest.raises(NullPrimaryKeyError) as info:
            sink.write(T, [ChangelogRow.insert({"id": None, "name": "a", "qty": 1})], SCHEMA, {"t/0": 3})
        assert info.value.column == "id" and info.value.table == "shop.customers"


def test_types_round_trip(tmp_path):
    schema = Schema.of(
        [("id", parse_data_type("INT NOT NULL")), ("b", parse_data_type("BOOLEAN")), ("t", parse_data_type("TINYINT")),
         ("d", parse_data_type("DECIMAL(40, 3)")), ("bin", parse_data_type("VARBINARY(4)")), ("day", parse_data_type("DATE")),
         ("tm", parse_data_type("TIME(3)")), ("ts", parse_data_type("TIMESTAMP(3)")), ("ltz", parse_data_type("TIMESTAMP_LTZ(6)"))],
        ["id"],
    )
    row = {"id": 1, "b": True, "t": -5, "d": Decimal("1234567890123456789012345678901234567.125"), "bin": b"\x00\xff",
           "day": dt.date(2024, 2, 29), "tm": dt.timedelta(hours=-838, minutes=-59, seconds=-59),
           "ts": dt.datetime(2024, 1, 1, 10, 0, 0, 120000), "ltz": dt.datetime(2024, 1, 1, 2, 0, tzinfo=dt.timezone.utc)}
    options = PaimonSinkOptions.filesystem(tmp_path / "wh")
    with PaimonSink(options) as sink:
        sink.write(T, [ChangelogRow.insert(row)], schema, {"t/0": 1})
    [back] = read_table(options, T).to_pylist()
    assert back["d"] == "1234567890123456789012345678901234567.125" and back["tm"] == "-838:59:59.000"
    assert back["ts"] == row["ts"] and back["ltz"] == row["ltz"] and back["bin"] == b"\x00\xff"
    assert back["day"] == row["day"] and back["t"] == -5 and back["b"] is True


def test_checkpoint_round_trip_and_partition_key(tmp_path):
    options = PaimonSinkOptions.filesystem(tmp_path / "wh", **{"partition.key": "shop.customers:id", "commit.user": "job-1"})
    with PaimonSink(options) as sink:
        assert sink.read_checkpoint("p") == {}
        sink.write_checkpoint("p", {"a/0": 3})
        sink.write_checkpoint("p", {"a/0": 5, "a/1": 2})
        sink.write_checkpoint("q", {"b/0": 1})
        assert sink.read_checkpoint("p") == {"a/0": 5, "a/1": 2}
        sink.write(T, [ChangelogRow.insert({"id": 1, "name": "a", "qty": 1})], SCHEMA, {"t/0": 1})
        table = sink.load_table(T)
        assert table.partition_keys == ["id"]
        assert table.snapshot_manager().get_latest_snapshot().commit_user == "job-1"
    assert rows_of(options) == [{"id": 1, "name": "a", "qty": 1}]


def test_buffered_add_flushes_one_commit_per_table(options):
    with PaimonSink(options) as sink:
        sink.add(T, [ChangelogRow.insert({"id": 1, "name": "a", "qty": 1})], SCHEMA, {"t/0": 1})
        sink.add(T, [ChangelogRow.insert({"id": 2, "name": "b", "qty": 2})], SCHEMA, {"t/0": 2})
        assert sink.buffered_rows == 2
        [result] = sink.flush()
        assert result.rows_upserted == 2 and result.offsets == {"t/0": 2} and sink.buffered_rows == 0


@pytest.mark.parametrize("writer", ["python", "rust"])
def test_delete_of_a_key_the_lake_never_held_leaves_no_row(tmp_path, writer):
    # pypaimon's Python writer records deleteRowCount=0 for its files, so a lone -D row would be
    # read as a row; with it the sink writes -D only for keys the table holds (regression: a
    # key-changing update). Paimon's Rust writer records the count: a -D for every deleted key.
    options = PaimonSinkOptions.filesystem(tmp_path / "wh", **{
        "table.properties.deletion-vectors.enabled": True,
        "table.properties.write.native.enabled": writer == "rust"})
    with PaimonSink(options) as sink:
        result = sink.write(
            T,
            [ChangelogRow.insert({"id": 2, "name": "b", "qty": 2}), ChangelogRow(RowKind.DELETE, {"id": 2, "name": "b", "qty": 2}),
             ChangelogRow(RowKind.DELETE, {"id": 7, "name": None, "qty": None}), ChangelogRow.insert({"id": 102, "name": "b", "qty": 2})],
            SCHEMA, {"t/0": 4},
        )
        # keys whose final state is deleted: those the table held (Python), every one (Rust, as Iceberg counts)
        assert result.keys_deleted == (0 if writer == "python" else 2)
        sink.write(T, [ChangelogRow(RowKind.DELETE, {"id": 102, "name": "b", "qty": 2}),
                       ChangelogRow(RowKind.DELETE, {"id": 8, "name": None, "qty": None})], SCHEMA, {"t/0": 6})
        assert sum(_delete_row_counts(sink)) == (0 if writer == "python" else 4)
    assert rows_of(options) == []


def _delete_row_counts(sink, table=T):
    """``deleteRowCount`` of each data file of the table's latest snapshot (0 from pypaimon's Python writer)."""
    paimon = sink.load_table(table).copy({"deletion-vectors.merge-on-read": "true"})
    splits = paimon.new_read_builder().new_scan().plan().splits()
    return [f.delete_row_count or 0 for s in splits for f in s.files]


@pytest.mark.parametrize("buckets", [
    # Paimon's dynamic bucket mode (a table an older changelake created): several buckets
    {"table.properties.bucket": -1, "table.properties.dynamic-bucket.target-row-num": 300},
    {"table.properties.bucket": 4},  # fixed buckets (the sink's default mode)
], ids=["dynamic-buckets", "fixed-buckets"])
def test_rust_writer_continues_a_table_the_python_writer_wrote(tmp_path, buckets):
    """A lake written by pypaimon's Python writer, then by Paimon's Rust writer (the sink's
    default since pypaimon-rust): updates and deletes of keys in the old files, deletes of keys
    never held, several buckets (dynamic or fixed); the merged rows are the last change per key."""
    import random

    python_writer = PaimonSinkOptions.filesystem(tmp_path / "wh", **{
        **buckets, "table.properties.write.native.enabled": False})
    default = PaimonSinkOptions.filesystem(tmp_path / "wh")
    rng = random.Random(18)
    state: dict[int, dict] = {}
    next_key = 0
    for commit in range(1, 9):
        if commit == 4:  # the table's own option kept the Rust writer off so far; now the sink's default
            with PaimonSink(default) as sink:
                sink.catalog.alter_table("shop.customers", [_reset_native_option()])
        rows, seen = [], set()
        for _ in range(400):
            roll = rng.random()
            if roll < 0.4 or not state:
                key, next_key = next_key, next_key + 1
            else:
                key = rng.choice(sorted(state)) if roll < 0.9 else rng.randrange(10**6, 2 * 10**6)
            if key in seen:
                continue
            seen.add(key)
            if roll >= 0.8:
                rows.append(ChangelogRow(RowKind.DELETE, {"id": key, "name": None, "qty": None}))
                state.pop(key, None)
            else:
                values = {"id": key, "name": f"c{commit}", "qty": commit}
                rows.append(ChangelogRow(RowKind.UPDATE_AFTER if key in state else RowKind.INSERT, values))
                state[key] = values
        with PaimonSink(python_writer if commit <= 3 else default) as sink:
            sink.write(T, rows, SCHEMA, {"t/0": commit})
            counts = _delete_row_counts(sink)
            assert any(counts) == (commit > 3)  # only the Rust writer's files record their -D rows
            buckets = {s.bucket for s in sink.load_table(T).new_read_builder().new_scan().plan().splits()}
    assert len(buckets) > 1
    assert rows_of(default) == sorted(state.values(), key=lambda r: r["id"])


def _reset_native_option():
    from pypaimon.schema.schema_change import SchemaChange as PaimonChange

    return PaimonChange.remove_option("write.native.enabled")


def test_a_table_not_created_by_the_sink_is_refused_naming_what_it_lacks(options):
    from pypaimon import Schema as PaimonSchema
    from pypaimon.schema.data_types import AtomicType, DataField

    from changelake.connectors.paimon import PaimonSinkError

    with PaimonSink(options) as sink:
        sink.catalog.create_database("shop", True)
        sink.catalog.create_table(
            "shop.customers",
            PaimonSchema([DataField(0, "id", AtomicType("BIGINT", False)), DataField(1, "name", AtomicType("STRING"))],
                         primary_keys=["id"]),
            False,
        )
        with pytest.raises(PaimonSinkError) as info:
            sink.write(T, [ChangelogRow.insert({"id": 1, "name": "a", "qty": 1})], SCHEMA, {"t/0": 1})
    assert info.value.table == "shop.customers" and "rowkind.field" in str(info.value)


def test_keys_stored_in_another_form_are_deleted_and_truncated(options):
    # TIME is stored as text and DECIMAL(40) as text: the sink compares keys in the lake's form.
    schema = Schema.of([("t", parse_data_type("TIME NOT NULL")), ("d", parse_data_type("DECIMAL(40, 0) NOT NULL")),
                        ("v", parse_data_type("STRING"))], ["t", "d"])
    k1 = {"t": dt.timedelta(hours=25), "d": Decimal(10) ** 39, "v": "a"}
    k2 = {"t": dt.timedelta(seconds=-1), "d": Decimal(1), "v": "b"}
    with PaimonSink(options) as sink:
        sink.write(T, [ChangelogRow.insert(k1), ChangelogRow.insert(k2)], schema, {"t/0": 2})
        assert sink.write(T, [ChangelogRow(RowKind.DELETE, k2)], schema, {"t/0": 3}).keys_deleted == 1
        assert [r["t"] for r in read_table(options, T).to_pylist()] == ["25:00:00"]
        result = sink.write(T, [TRUNCATE, ChangelogRow.insert({**k1, "v": "again"})], schema, {"t/0": 5})
        assert result.keys_deleted == 0 and result.rows_upserted == 1
    assert read_table(options, T).to_pylist() == [{"t": "25:00:00", "d": "1" + "0" * 39, "v": "again"}]


def test_delete_with_a_key_whose_first_column_is_not_the_tables_first(options):
    """A merged shard table ``\\*, __table_name__ AS src`` keyed ``src, id``: the key lookup for a
    delete must not compare the wrong key statistic (pypaimon indexes key stats by table position)."""
    schema = Schema.of([("id", parse_data_type("INT NOT NULL")), ("amount", parse_data_type("INT")),
                        ("src", parse_data_type("STRING NOT NULL"))], ["src", "id"])
    with PaimonSink(options) as sink:
        sink.write(T, [ChangelogRow.insert({"id": 1, "amount": a, "src": s}) for a, s in ((10, "order_1"), (20, "order_2"))],
                   schema, {"t/0": 2})
        sink.write(T, [ChangelogRow(RowKind.DELETE, {"id": 1, "amount": 10, "src": "order_1"})], schema, {"t/0": 3})
    assert rows_of(options) == [{"id": 1, "amount": 20, "src": "order_2"}]


def _bucket_option(sink, table=T):
    return sink.load_table(table).options.options.to_map().get("bucket")


def test_default_bucket_count_follows_the_first_commits_rows():
    from changelake.connectors.paimon.options import ROWS_PER_BUCKET, default_bucket_count

    assert [default_bucket_count(n) for n in (0, 1, ROWS_PER_BUCKET)] == [1, 1, 1]
    assert default_bucket_count(ROWS_PER_BUCKET + 1) == 2
    assert default_bucket_count(5 * ROWS_PER_BUCKET) == 8  # a power of two
    assert default_bucket_count(10**12) == 1024


def test_new_tables_get_fixed_buckets_unless_the_user_sets_them(tmp_path):
    """Tables the sink creates (data tables and the checkpoint table) have a fixed ``bucket``
    count, not Paimon's dynamic bucket mode, whose writer loads the table's whole key index on
    every commit; ``table.properties.bucket`` wins (``-1`` keeps dynamic buckets), and a table
    that exists keeps its mode. The rows read back are the same in every mode."""
    from changelake.connectors.paimon.writer import CHECKPOINT_TABLE

    rows = [ChangelogRow.insert({"id": i, "name": f"n{i}", "qty": i}) for i in range(50)]
    later = [ChangelogRow(RowKind.UPDATE_AFTER, {"id": i, "name": "u", "qty": -i}) for i in range(0, 50, 7)]
    later += [ChangelogRow(RowKind.DELETE, {"id": i, "name": None, "qty": None}) for i in range(3, 50, 11)]
    expected = {r.values["id"]: r.values for r in rows + later if r.kind is not RowKind.DELETE}
    for i in range(3, 50, 11):
        expected.pop(i)
    for label, extra, want in [("default", {}, "1"), ("fixed", {"table.properties.bucket": 4}, "4"),
                               ("dynamic", {"table.properties.bucket": -1}, "-1"),
                               # a dynamic-bucket option without 'bucket': Paimon's dynamic mode, as asked
                               ("dynamic-options", {"table.properties.dynamic-bucket.target-row-num": 20}, None)]:
        options = PaimonSinkOptions.filesystem(tmp_path / label, **extra)
        with PaimonSink(options) as sink:
            sink.write(T, rows, SCHEMA, {"t/0": 50})
            sink.write(T, later, SCHEMA, {"t/0": 60})
            sink.write_checkpoint("p", {"t/0": 60})
            assert (_bucket_option(sink), _bucket_option(sink, CHECKPOINT_TABLE)) == (want, want), label
            assert sink.read_checkpoint("p") == {"t/0": 60}
        assert rows_of(options) == sorted(expected.values(), key=lambda r: r["id"]), label
    # a dynamic-bucket table written on by a sink whose default is fixed buckets keeps its mode
    with PaimonSink(PaimonSinkOptions.filesystem(tmp_path / "dynamic")) as sink:
        sink.write(T, [ChangelogRow(RowKind.UPDATE_AFTER, {"id": 1, "name": "again", "qty": 1})], SCHEMA, {"t/0": 61})
        assert _bucket_option(sink) == "-1"
    assert {r["id"]: r["name"] for r in rows_of(PaimonSinkOptions.filesystem(tmp_path / "dynamic"))}[1] == "again"


def test_the_bucket_count_is_sized_from_the_rows_of_the_creating_write(tmp_path, monkeypatch):
    """The rows of the write that creates a table size its fixed buckets (2M rows a bucket;
    10 here, so 50 rows make 8 buckets), read back exactly."""
    from changelake.connectors.paimon import options as paimon_options

    monkeypatch.setattr(paimon_options, "ROWS_PER_BUCKET", 10)
    options = PaimonSinkOptions.filesystem(tmp_path / "wh")
    rows = [ChangelogRow.insert({"id": i, "name": f"n{i}", "qty": i}) for i in range(50)]
    with PaimonSink(options) as sink:
        # a drop first: the write stores the table's dropped flag (a nested write of the
        # checkpoint table) before it creates the table, which is still sized from this write
        sink.write(T, [ChangelogRow.insert({"id": 0, "name": "x", "qty": 0}), TruncateMarker(drop=True), *rows],
                   SCHEMA, {"t/0": 52})
        assert _bucket_option(sink) == "8"
        buckets = {s.bucket for s in sink.load_table(T).new_read_builder().new_scan().plan().splits()}
        assert len(buckets) > 1
    assert rows_of(options) == [r.values for r in rows]
