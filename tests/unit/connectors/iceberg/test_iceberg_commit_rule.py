"""The multi-writer commit rule (:class:`changelake.connectors.iceberg.writer.OffsetsCheckedTransaction`),
on an embedded SqlCatalog: a commit planned against offsets that another writer moved never lands (a zombie
cannot land older rows over newer ones); the sink redoes it against the winner's offsets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions, read_table
from changelake.connectors.iceberg.writer import MULTI_WRITER_RETRIES, OffsetsCheckedTransaction, OffsetsMovedError
from changelake.connectors.iceberg.offsets import read_committed_offsets

T = TableId("shop", "orders")
SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("v", parse_data_type("STRING"))], ["id"])


@pytest.fixture
def options(tmp_path: Path) -> IcebergSinkOptions:
    (tmp_path / "catalog").mkdir()
    return IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/catalog/catalog.db", f"file://{tmp_path}/warehouse")


def rec(key: int, value: str, partition: int, offset: int) -> ChangelogRow:
    return ChangelogRow(RowKind.INSERT, {"id": key, "v": value},
                        metadata={"topic": "orders", "partition": partition, "offset": offset})


def lake(options: IcebergSinkOptions) -> dict[int, Any]:
    return {r["id"]: r["v"] for r in read_table(options, T).to_pylist()}


def test_new_tables_get_a_multi_writer_retry_budget(options: IcebergSinkOptions) -> None:
    with IcebergSink(options) as sink:
        table = sink.ensure_table(T, SCHEMA)
    assert table.properties["commit.retry.num-retries"] == str(MULTI_WRITER_RETRIES)


def test_a_commit_planned_before_another_writers_offsets_does_not_land(options: IcebergSinkOptions) -> None:
    with IcebergSink(options) as winner, IcebergSink(options) as zombie:
        winner.write(T, [rec(1, "old", 0, 0)], SCHEMA, {"orders/0": 1})
        stale = zombie.load_table(T)  # the zombie planned here ...
        planned = read_committed_offsets(stale)
        winner.write(T, [rec(1, "new", 0, 5)], SCHEMA, {"orders/0": 6})  # ... then lost its partition
        with pytest.raises(OffsetsMovedError, match="orders/0"):
            with OffsetsCheckedTransaction(stale, planned) as tx:
                tx.append(pa.Table.from_pylist([{"id": 1, "v": "older"}], schema=stale.schema().as_arrow()),
                          snapshot_properties={"changelake.kafka-offsets": '{"orders/0":3}'})
    assert lake(options) == {1: "new"}
    with IcebergSink(options) as check:
        assert check.committed_offsets(T) == {"orders/0": 6}


def test_a_commit_racing_a_foreign_commit_is_rebased(options: IcebergSinkOptions) -> None:
    """A commit that stored no offsets (a manual append, a compaction) moved the table: pyiceberg's
    own retry rebases onto it, the offsets are unchanged."""
    with IcebergSink(options) as sink:
        sink.write(T, [rec(1, "a", 0, 0)], SCHEMA, {"orders/0": 1})
        stale = sink.load_table(T)
        planned = read_committed_offsets(stale)
        other = sink.catalog.load_table(("shop", "orders"))
        other.append(pa.Table.from_pylist([{"id": 9, "v": "manual"}], schema=other.schema().as_arrow()))
        with OffsetsCheckedTransaction(stale, planned) as tx:
            tx.append(pa.Table.from_pylist([{"id": 2, "v": "b"}], schema=stale.schema().as_arrow()),
                      snapshot_properties={"changelake.kafka-offsets": '{"orders/0":2}'})
    assert lake(options) == {1: "a", 2: "b", 9: "manual"}


def test_the_sink_redoes_a_lost_race_against_the_winners_offsets(options: IcebergSinkOptions,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers write one table (partitions 0 and 1); between the zombie's planning and its
    commit the winner absorbs partition 0 further and partition 1. The zombie's redo drops its
    stale rows of partition 0 and keeps both writers' offsets."""
    with IcebergSink(options) as winner, IcebergSink(options) as zombie:
        winner.write(T, [rec(1, "v0", 0, 0)], SCHEMA, {"orders/0": 1})
        original = IcebergSink._commit_batch
        raced: list[bool] = []

        def commit_after_the_winner(self: IcebergSink, *args: Any, **kwargs: Any) -> Any:
            if self is zombie and not raced:
                raced.append(True)
                winner.write(T, [rec(1, "v2", 0, 2), rec(7, "w", 1, 0)], SCHEMA, {"orders/0": 3, "orders/1": 1})
            return original(self, *args, **kwargs)

        monkeypatch.setattr(IcebergSink, "_commit_batch", commit_after_the_winner)
        # the zombie still holds offsets 1..1 of partition 0 (v1) and a row of partition 2
        result = zombie.write(T, [rec(1, "v1", 0, 1), rec(5, "z", 2, 0)], SCHEMA, {"orders/0": 2, "orders/2": 1})
        assert zombie.commit_redos == 1 and not result.skipped
        assert zombie.committed_offsets(T) == {"orders/0": 3, "orders/1": 1, "orders/2": 1}
    assert lake(options) == {1: "v2", 5: "z", 7: "w"}
