"""Iceberg maintenance (compaction, snapshot expiry, orphan files) on a real embedded SqlCatalog."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions, read_table
from changelake.connectors.iceberg.maintenance import (
    OPERATION_PROPERTY,
    MaintenanceOptions,
    compact_data_files,
    expire_snapshots,
    maintain_table,
    remove_orphan_files,
)

T = TableId("shop", "counters")
SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("n", parse_data_type("INT"))], ["id"])
NOW_AND_FOREVER = MaintenanceOptions(max_snapshot_age_ms=0, orphan_older_than_ms=0, min_input_files=2)


@pytest.fixture
def options(tmp_path: Path) -> IcebergSinkOptions:
    return IcebergSinkOptions.sql(
        f"sqlite:///{tmp_path}/catalog.db",
        f"file://{tmp_path}/warehouse",
        **{
            "table.properties.write.metadata.delete-after-commit.enabled": "true",
            "table.properties.write.metadata.previous-versions-max": "5",
            # unpartitioned: these tests count files of one partition (bucketed: test_iceberg_partitioning)
            "bucket-by-key": "false",
        },
    )


@pytest.fixture
def sink(options: IcebergSinkOptions):
    with IcebergSink(options) as s:
        yield s


def _write_rounds(sink: IcebergSink, keys: int, rounds: int, first_round: int = 0, offset: int = 0) -> int:
    """Commits ``first_round .. first_round+rounds-1``: round ``g`` inserts ids ``[g*keys, (g+1)*keys)``
    with ``n = g`` (a new file) and sets ``n = g`` on every 10th earlier id (a copy-on-write
    rewrite). One Kafka offset per row, starting at ``offset``; returns the next offset."""
    for g in range(first_round, first_round + rounds):
        first = g * keys
        rows = [ChangelogRow(RowKind.INSERT, {"id": k, "n": g}) for k in range(first, first + keys)]
        rows += [ChangelogRow(RowKind.UPDATE_AFTER, {"id": k, "n": g}) for k in range(0, first, 10)]
        offset += len(rows)
        sink.write(T, rows, SCHEMA, {"shop.counters/0": offset})
    return offset


def _expected(keys: int, rounds: int) -> dict[int, int]:
    state: dict[int, int] = {}
    for r in range(rounds):
        first = r * keys
        state.update({k: r for k in range(first, first + keys)})
        state.update({k: r for k in range(0, first, 10)})
    return state


def _files_on_disk(tmp_path: Path, suffix: str) -> int:
    return sum(1 for p in (tmp_path / "warehouse").rglob(f"*{suffix}") if p.is_file())


def _state(options: IcebergSinkOptions) -> dict[int, int]:
    return {r["id"]: r["n"] for r in read_table(options, T).to_pylist()}


def test_maintenance_keeps_files_bounded_and_content_and_offsets_unchanged(sink, options, tmp_path):
    next_offset = 0
    for run in range(5):  # five pipeline runs of 10 commits each, each run followed by maintenance
        next_offset = _write_rounds(sink, keys=100, rounds=10, first_round=run * 10, offset=next_offset)
        table = sink.load_table(T)
        before = _state(options)
        offsets_before = sink.committed_offsets(T)
        result = maintain_table(table, NOW_AND_FOREVER)
        assert _state(options) == before
        assert sink.committed_offsets(T) == offsets_before == {"shop.counters/0": next_offset}
        assert result.files_compacted >= 2 and result.data_files == 1
        # kept: the compacted file, and the files of the sink's last commit (its offsets snapshot
        # is the resume point until the sink commits again); the earlier runs' files are gone
        assert result.snapshots == 2
        assert _files_on_disk(tmp_path, ".parquet") <= 1 + 11
        assert _files_on_disk(tmp_path, ".avro") <= 2 + 2 * 12  # manifest lists + manifests of both
        assert _files_on_disk(tmp_path, ".metadata.json") <= 6
    assert _state(options) == _expected(keys=100, rounds=50)


def test_replay_after_maintenance_is_skipped_and_new_writes_apply(sink, options):
    end = _write_rounds(sink, keys=50, rounds=6)
    maintain_table(sink.load_table(T), NOW_AND_FOREVER)
    replay = sink.write(T, [ChangelogRow(RowKind.UPDATE_AFTER, {"id": 1, "n": -1})], SCHEMA, {"shop.counters/0": end})
    assert replay.skipped
    fresh = sink.write(T, [ChangelogRow(RowKind.DELETE, {"id": 1, "n": 5})], SCHEMA, {"shop.counters/0": end + 1})
    assert not fresh.skipped
    expected = _expected(keys=50, rounds=6)
    del expected[1]
    assert _state(options) == expected


def test_compaction_snapshot_carries_no_offsets_and_names_its_operation(sink):
    end = _write_rounds(sink, keys=20, rounds=4)
    table = sink.load_table(T)
    rewritten, written = compact_data_files(table, min_input_files=2)
    assert rewritten >= 2 and written == 1
    summary = table.current_snapshot().summary
    assert summary.get(OPERATION_PROPERTY) == "rewrite-data-files"
    assert summary.get("changelake.kafka-offsets") is None
    assert sink.committed_offsets(T) == {"shop.counters/0": end}


def test_compaction_below_min_input_files_does_nothing(sink):
    _write_rounds(sink, keys=10, rounds=1)
    assert compact_data_files(sink.load_table(T), min_input_files=5) == (0, 0)


def test_expiry_keeps_the_chain_down_to_the_newest_offsets_snapshot(sink):
    end = _write_rounds(sink, keys=10, rounds=3)
    table = sink.load_table(T)
    # two compactions in a row: the current snapshot and its parent carry no offsets
    compact_data_files(table, min_input_files=2)
    sink.write(T, [ChangelogRow(RowKind.INSERT, {"id": 999, "n": 1})], SCHEMA, {"shop.counters/0": end + 1})
    compact_data_files(table, min_input_files=2)
    assert table.current_snapshot().summary.get(OPERATION_PROPERTY) == "rewrite-data-files"
    expired, _ = expire_snapshots(table, max_snapshot_age_ms=0, min_snapshots_to_keep=1)
    assert expired > 0
    assert sink.committed_offsets(T) == {"shop.counters/0": end + 1}


def test_expiry_respects_age_and_table_properties(sink):
    _write_rounds(sink, keys=10, rounds=3)
    table = sink.load_table(T)
    assert expire_snapshots(table) == (0, 0)  # default: 5 days
    with table.transaction() as tx:
        tx.set_properties({"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "2"})
    time.sleep(0.01)
    expired, deleted = expire_snapshots(table)
    assert expired > 0 and deleted > 0
    table.refresh()
    assert len(table.metadata.snapshots) >= 2


def test_orphan_files_older_than_the_window_are_removed_young_ones_kept(sink, options, tmp_path):
    _write_rounds(sink, keys=10, rounds=2)
    table = sink.load_table(T)
    data_dir = tmp_path / "warehouse" / "shop" / "counters" / "data"
    old = data_dir / "failed-write-old.parquet"
    young = data_dir / "in-flight-young.parquet"
    old.write_bytes(b"not referenced")
    young.write_bytes(b"not referenced")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    assert remove_orphan_files(table, older_than_ms=10 * 60 * 1000) == 1
    assert not old.exists() and young.exists()
    assert read_table(options, T).num_rows == 20


def test_lake_maintain_command_maintains_every_table_of_the_pipeline_sink(sink, options, tmp_path, capsys):
    from cli.main import _build_parser

    _write_rounds(sink, keys=30, rounds=6)
    other = TableId("shop", "other")
    for i in range(6):
        sink.write(other, [ChangelogRow(RowKind.INSERT, {"id": i, "n": i})], SCHEMA, {"shop.other/0": i + 1})
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        "source: {type: kafka, properties.bootstrap.servers: 127.0.0.1:1, topic: shop.counters}\n"
        "sink:\n  type: iceberg\n"
        f"  catalog.properties.uri: sqlite:///{tmp_path}/catalog.db\n"
        f"  catalog.properties.warehouse: file://{tmp_path}/warehouse\n"
        "  bucket-by-key: false\n"
    )
    args = _build_parser().parse_args(
        ["lake", "maintain", str(pipeline), "--max-snapshot-age-ms", "0", "--orphan-older-than-ms", "0", "--min-input-files", "2"]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["shop.counters", "shop.other"]
    assert all("now 1 data files" in line for line in out)
    assert read_table(options, other).num_rows == 6
    assert sink.committed_offsets(other) == {"shop.other/0": 6}
