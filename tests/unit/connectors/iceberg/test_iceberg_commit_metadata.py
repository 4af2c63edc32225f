"""A commit's transaction computes its staged table metadata once per staged state
(``OffsetsCheckedTransaction.table_metadata``): pyiceberg 0.12 replays the staged updates and
deep-copies the whole metadata, snapshot list included, on each of ~60 reads per commit
(iceberg-python #2673), so a commit's cost followed the table's history."""

from __future__ import annotations

from pathlib import Path

import pyiceberg.table as pyiceberg_table
import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions, read_table

T = TableId("shop", "orders")
SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("name", parse_data_type("STRING"))], ["id"])


def _rows(version: int) -> list[ChangelogRow]:
    return [ChangelogRow(RowKind.UPDATE_AFTER, {"id": k, "name": f"v{version}"}) for k in range(version % 3, version % 3 + 4)]


def test_a_commit_computes_the_staged_metadata_once_per_staged_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "catalog").mkdir()
    sink = IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/catalog/c.db", f"file://{tmp_path}/wh"))
    replays: list[int] = []
    original = pyiceberg_table.update_table_metadata

    def counted(base, updates, *args, **kwargs):  # type: ignore[no-untyped-def]
        replays.append(len(updates))
        return original(base, updates, *args, **kwargs)

    with sink:
        sink.write(T, _rows(0), SCHEMA, {"t/0": 1})
        monkeypatch.setattr(pyiceberg_table, "update_table_metadata", counted)
        for version in range(1, 4):  # a copy-on-write overwrite and an append each
            replays.clear()
            result = sink.write(T, _rows(version), SCHEMA, {"t/0": version + 1})
            assert result.rows_upserted == 4
            # one per staged state (the overwrite, the append; with nothing staged none), not one per read (~60)
            assert len(replays) <= 3, replays
        monkeypatch.undo()
        assert sink.committed_offsets(T) == {"t/0": 4}
    rows = {r["id"]: r["name"] for r in read_table(sink.options, T).to_pylist()}
    # the last commit's keys 0-3 at v3; keys 4 and 5 from earlier commits (v2: 2-5, v1: 1-4)
    assert rows == {0: "v3", 1: "v3", 2: "v3", 3: "v3", 4: "v2", 5: "v2"}


def test_a_write_refreshes_the_table_once_and_sees_another_writers_commit(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "catalog").mkdir()
    options = IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/catalog/c.db", f"file://{tmp_path}/wh")
    ours, other = IcebergSink(options), IcebergSink(options)
    refreshes: list[str] = []
    original = pyiceberg_table.Table.refresh

    def counted(self):  # type: ignore[no-untyped-def]
        refreshes.append(str(self.name()))
        return original(self)

    with ours, other:
        ours.write(T, _rows(0), SCHEMA, {"t/0": 1})
        monkeypatch.setattr(pyiceberg_table.Table, "refresh", counted)
        ours.write(T, _rows(1), SCHEMA, {"t/0": 2})
        assert len(refreshes) == 1, refreshes  # was 3: the write's first read, ensure_table, its schema check
        other.write(T, _rows(2), SCHEMA, {"t/1": 5})  # another writer's commit, between two of ours
        refreshes.clear()
        ours.write(T, _rows(3), SCHEMA, {"t/0": 3})
        assert len(refreshes) == 1, refreshes
        monkeypatch.undo()
        assert ours.committed_offsets(T) == {"t/0": 3, "t/1": 5}  # planned on the winner's table, nothing lost
