"""Partitioned and key-bucketed Iceberg tables (``partition.key``, ``bucket-by-key``) on a real
embedded SqlCatalog: specs, exact upserts across partitions, rows rewritten per commit, maintenance."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions, read_table
from changelake.connectors.iceberg.maintenance import MaintenanceOptions, maintain_table
from changelake.connectors.iceberg.partitioning import PartitionField, default_bucket_count, parse_partition_keys
from changelake.connectors.iceberg.writer import ROWS_CHANGED_PROPERTY, ROWS_REWRITTEN_PROPERTY, WRITE_AMPLIFICATION_PROPERTY

T = TableId("shop", "orders")
SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("region", parse_data_type("STRING")),
                    ("at", parse_data_type("TIMESTAMP(6)")), ("n", parse_data_type("INT"))], ["id"])


def _options(tmp_path: Path, **extra: str) -> IcebergSinkOptions:
    return IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh", **extra)


def _row(kind: RowKind, k: int, n: int, day: int = 1) -> ChangelogRow:
    return ChangelogRow(kind, {"id": k, "region": f"r{k % 3}", "at": dt.datetime(2026, 1, day, 12), "n": n})


def _state(options: IcebergSinkOptions) -> dict[int, tuple[int, int]]:
    rows = read_table(options, T).to_pylist()
    assert len(rows) == len({r["id"] for r in rows}), "a key appears twice"
    return {r["id"]: (r["n"], r["at"].day) for r in rows}


def test_partition_key_parses_flink_cdc_spelling_with_iceberg_transforms():
    keys = parse_partition_keys("shop.orders:bucket[16](id), day(at) ,region;shop.events:truncate[4](name);db.t:")
    assert keys[TableId("shop", "orders")] == (PartitionField("id", "bucket[16]"), PartitionField("at", "day"),
                                               PartitionField("region"))
    assert keys[TableId("shop", "events")] == (PartitionField("name", "truncate[4]"),)
    assert keys[TableId("db", "t")] == ()
    for bad in ("shop.orders", "shop.orders:bucket[0](id)", "shop.orders:frobnicate(id)", ":id"):
        with pytest.raises(OptionValidationError, match="partition.key"):
            parse_partition_keys(bad)


def test_default_bucket_count_follows_table_size_and_topic_partitions():
    assert default_bucket_count(0, 1) == 8
    assert default_bucket_count(100_000, 12) == 16
    assert default_bucket_count(5_000_000, 1) == 64
    assert default_bucket_count(10**12, 1) == 1024


def test_an_upsert_table_is_bucketed_by_key_and_a_commit_rewrites_only_its_buckets(tmp_path):
    options = _options(tmp_path)
    with IcebergSink(options) as sink:
        sink.write(T, [_row(RowKind.INSERT, k, 0) for k in range(4000)], SCHEMA, {"shop.orders/0": 4000})
        table = sink.load_table(T)
        assert [str(f.transform) for f in table.spec().fields] == ["bucket[8]"]
        assert [f.source_id for f in table.sort_order().fields] == [table.schema().find_field("id").field_id]
        assert len(table.inspect.files()) == 8
        result = sink.write(T, [_row(RowKind.UPDATE_AFTER, 7, 1), _row(RowKind.DELETE, 8, 0)], SCHEMA,
                            {"shop.orders/0": 4002})
        summary = sink.load_table(T).current_snapshot().summary.additional_properties
    # Two keys touch at most two of the 8 buckets (about 500 rows each), not the 4000-row table.
    assert 0 < result.rows_rewritten <= 1100
    assert summary[ROWS_CHANGED_PROPERTY] == "2" and summary[ROWS_REWRITTEN_PROPERTY] == str(result.rows_rewritten)
    assert float(summary[WRITE_AMPLIFICATION_PROPERTY]) == pytest.approx((result.rows_rewritten + 1) / 2, abs=1e-3)
    assert result.write_amplification == pytest.approx((result.rows_rewritten + 1) / 2)
    state = _state(options)
    assert len(state) == 3999 and state[7] == (1, 1) and 8 not in state


def test_partition_key_with_transforms_keeps_upserts_exact_when_a_row_moves_partition(tmp_path):
    options = _options(tmp_path, **{"partition.key": "shop.orders:day(at),bucket[4](id),truncate[1](region)"})
    rng = random.Random(7)
    model: dict[int, tuple[int, int]] = {}
    offset = 0
    with IcebergSink(options) as sink:
        for round_no in range(6):
            rows = []
            for _ in range(300):
                k, day = rng.randrange(500), rng.randrange(1, 5)
                if rng.random() < 0.2:
                    rows.append(_row(RowKind.DELETE, k, 0, day))
                    model.pop(k, None)
                else:
                    rows.append(_row(RowKind.UPDATE_AFTER if k in model else RowKind.INSERT, k, round_no, day))
                    model[k] = (round_no, day)
            offset += len(rows)
            sink.write(T, rows, SCHEMA, {"shop.orders/0": offset})
        table = sink.load_table(T)
        assert [str(f.transform) for f in table.spec().fields] == ["day", "bucket[4]", "truncate[1]"]
        assert sink.committed_offsets(T) == {"shop.orders/0": offset}
    assert _state(options) == model


def test_unknown_partition_column_is_refused_naming_the_table_and_column(tmp_path):
    with IcebergSink(_options(tmp_path, **{"partition.key": "shop.orders:month(nope)"})) as sink:
        with pytest.raises(OptionValidationError, match=r"shop\.orders.*'nope'"):
            sink.write(T, [_row(RowKind.INSERT, 1, 0)], SCHEMA, {"shop.orders/0": 1})


def test_unpartitioned_when_asked(tmp_path):
    for extra in ({"bucket-by-key": "false"}, {"partition.key": "shop.orders:"}):
        path = tmp_path / str(len(list(tmp_path.iterdir())))
        path.mkdir()
        with IcebergSink(_options(path, **extra)) as sink:
            sink.write(T, [_row(RowKind.INSERT, 1, 0)], SCHEMA, {"shop.orders/0": 1})
            assert sink.load_table(T).spec().is_unpartitioned()


def test_maintenance_compacts_each_bucket_and_keeps_content_and_offsets(tmp_path):
    options = _options(tmp_path, **{"partition.key": "shop.orders:bucket[4](id)"})
    offset = 0
    with IcebergSink(options) as sink:
        for round_no in range(5):
            rows = [_row(RowKind.INSERT, k, round_no) for k in range(round_no * 100, round_no * 100 + 100)]
            rows += [_row(RowKind.UPDATE_AFTER, k, round_no) for k in range(0, round_no * 100, 7)]
            offset += len(rows)
            sink.write(T, rows, SCHEMA, {"shop.orders/0": offset})
        before = _state(options)
        table = sink.load_table(T)
        assert len(table.inspect.files()) > 4
        result = maintain_table(table, MaintenanceOptions(max_snapshot_age_ms=0, orphan_older_than_ms=0, min_input_files=2))
        table = sink.load_table(T)
        files = table.inspect.files()
        assert result.files_compacted > 0 and len(files) == 4
        assert len(set(files.column("partition").to_pylist()[i]["id_bucket"] for i in range(4))) == 4
        assert sink.committed_offsets(T) == {"shop.orders/0": offset}
        # A second run finds one file per bucket: nothing to compact.
        assert maintain_table(table, MaintenanceOptions(max_snapshot_age_ms=0, orphan_older_than_ms=0,
                                                        min_input_files=2)).files_compacted == 0
    assert _state(options) == before


def test_a_composite_key_is_bucketed_by_its_first_column_and_stays_exact(tmp_path):
    schema = Schema.of([("a", parse_data_type("INT NOT NULL")), ("b", parse_data_type("STRING NOT NULL")),
                        ("n", parse_data_type("INT"))], ["a", "b"])
    t = TableId("shop", "pairs")
    options = _options(tmp_path)
    with IcebergSink(options) as sink:
        rows = [ChangelogRow(RowKind.INSERT, {"a": a, "b": b, "n": 0}) for a in range(50) for b in ("x", "y")]
        sink.write(t, rows, schema, {"p/0": 100})
        assert [str(f.transform) for f in sink.load_table(t).spec().fields] == ["bucket[8]"]
        # (1, x) and (2, y) change; the coarse filter also matches (1, y) and (2, x), re-appended unchanged.
        result = sink.write(t, [ChangelogRow(RowKind.UPDATE_AFTER, {"a": 1, "b": "x", "n": 5}),
                                ChangelogRow(RowKind.DELETE, {"a": 2, "b": "y", "n": 0})], schema, {"p/0": 102})
        assert result.rows_rewritten >= 2
    state = {(r["a"], r["b"]): r["n"] for r in read_table(options, t).to_pylist()}
    assert len(state) == 99 and state[(1, "x")] == 5 and state[(1, "y")] == 0 and state[(2, "x")] == 0
    assert (2, "y") not in state


def test_a_schema_change_in_the_middle_of_a_buffered_batch_evolves_a_bucketed_table(tmp_path):
    v2 = Schema.of([*((c.name, c.type) for c in SCHEMA.columns), ("note", parse_data_type("STRING"))], ["id"])
    options = _options(tmp_path, **{"partition.key": "shop.orders:bucket[4](id),day(at)"})
    with IcebergSink(options) as sink:
        sink.add(T, [_row(RowKind.INSERT, k, 0) for k in range(100)], SCHEMA, {"shop.orders/0": 100})
        changed = [ChangelogRow(RowKind.UPDATE_AFTER, {**_row(RowKind.INSERT, k, 1, day=2).values, "note": "v2"})
                   for k in range(0, 100, 10)]
        sink.add(T, changed, v2, {"shop.orders/0": 110})  # commits the rows of the old schema first
        assert sink.committed_offsets(T) == {"shop.orders/0": 100}
        results = sink.flush()
        # flush() also reports the commit that the schema change forced in add() (the 100 rows)
        assert [r.rows_upserted for r in results] == [100, 10]
        assert sink.committed_offsets(T) == {"shop.orders/0": 110}
        assert [str(f.transform) for f in sink.load_table(T).spec().fields] == ["bucket[4]", "day"]
    rows = {r["id"]: r for r in read_table(options, T).to_pylist()}
    assert len(rows) == 100
    assert rows[10]["note"] == "v2" and rows[10]["n"] == 1 and rows[10]["at"].day == 2
    assert rows[11]["note"] is None and rows[11]["n"] == 0


def test_a_new_tables_buckets_are_sized_from_the_write_that_creates_it(tmp_path):
    """The topic partitions of the creating write (16 here) and its rows size the key buckets; a
    later write's size does not change the spec."""
    offsets = {f"shop.orders/{p}": 1 for p in range(16)}
    with IcebergSink(_options(tmp_path)) as sink:
        sink.write(T, [_row(RowKind.INSERT, k, 0) for k in range(100)], SCHEMA, offsets)
        assert [str(f.transform) for f in sink.load_table(T).spec().fields] == ["bucket[16]"]
        sink.write(T, [_row(RowKind.INSERT, k, 0) for k in range(100, 200)], SCHEMA, {"shop.orders/0": 2})
        assert [str(f.transform) for f in sink.load_table(T).spec().fields] == ["bucket[16]"]
        assert sink.creation_hint == (0, 1)  # outside a write
