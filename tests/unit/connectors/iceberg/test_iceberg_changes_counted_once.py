"""Each change is counted once over the writers of a table (issue 22): a write result's
``rows_applied`` counts only the change events past the table's stored offsets, so rows re-read
after a consumer-group handover, a replay, or rows the winner of a commit race absorbed first are
not counted again. On an embedded SqlCatalog (a real Iceberg catalog)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions
from changelake.pipeline.loop import absorbed_per_table

T = TableId("shop", "orders")
SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("v", parse_data_type("STRING"))], ["id"])
SCHEMA2 = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("v", parse_data_type("STRING")),
                     ("w", parse_data_type("STRING"))], ["id"])


@pytest.fixture
def options(tmp_path: Path) -> IcebergSinkOptions:
    (tmp_path / "catalog").mkdir()
    return IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/catalog/catalog.db", f"file://{tmp_path}/warehouse")


def meta(offset: int, partition: int = 0) -> dict[str, Any]:
    return {"topic": "orders", "partition": partition, "offset": offset}


def insert(key: int, offset: int, partition: int = 0) -> list[ChangelogRow]:
    return [ChangelogRow(RowKind.INSERT, {"id": key, "v": f"v{offset}"}, metadata=meta(offset, partition))]


def update(key: int, offset: int) -> list[ChangelogRow]:  # one change event: its -U and +U rows
    m = meta(offset)
    return [ChangelogRow(RowKind.UPDATE_BEFORE, {"id": key, "v": "old"}, metadata=m),
            ChangelogRow(RowKind.UPDATE_AFTER, {"id": key, "v": f"v{offset}"}, metadata=m)]


def test_rows_re_read_after_a_handover_are_counted_by_the_first_writer_only(options: IcebergSinkOptions) -> None:
    first = [r for o in range(10) for r in insert(o, o)] + update(0, 10)  # 11 change events
    again = [r for o in range(5, 10) for r in insert(o, o)] + update(0, 10)  # re-read from a lagging checkpoint
    new = [r for o in range(11, 15) for r in insert(o, o)]  # 4 more
    with IcebergSink(options) as a, IcebergSink(options) as b:
        ra = a.write(T, first, SCHEMA, {"orders/0": 11})
        rb = b.write(T, again + new, SCHEMA, {"orders/0": 15})
        replay = b.write(T, again, SCHEMA, {"orders/0": 11})  # a pure replay: skipped
    assert (ra.rows_applied, rb.rows_applied, replay.rows_applied) == (11, 4, 0)
    assert replay.skipped
    assert absorbed_per_table([ra]) == {"shop.orders": 11}
    assert absorbed_per_table([rb, replay]) == {"shop.orders": 4}
    assert ra.rows_applied + rb.rows_applied + replay.rows_applied == 15  # the distinct change events


def test_a_redone_commit_counts_only_what_the_winner_did_not_absorb(options: IcebergSinkOptions,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with IcebergSink(options) as winner, IcebergSink(options) as loser:
        w1 = winner.write(T, insert(1, 0), SCHEMA, {"orders/0": 1})
        original = IcebergSink._commit_batch
        raced: list[Any] = []

        def commit_after_the_winner(self: IcebergSink, *args: Any, **kwargs: Any) -> Any:
            if self is loser and not raced:  # the winner commits offsets 1..2 of partition 0 meanwhile
                raced.append(winner.write(T, insert(1, 1) + insert(2, 2), SCHEMA, {"orders/0": 3}))
            return original(self, *args, **kwargs)

        monkeypatch.setattr(IcebergSink, "_commit_batch", commit_after_the_winner)
        # the loser read offsets 1..3 of partition 0 (a handover) and one record of partition 1
        lost = loser.write(T, insert(1, 1) + insert(2, 2) + insert(3, 3) + insert(9, 0, partition=1), SCHEMA,
                           {"orders/0": 4, "orders/1": 1})
    assert loser.commit_redos == 1
    assert (w1.rows_applied, raced[0].rows_applied, lost.rows_applied) == (1, 2, 2)  # offsets 3 and 1/0


def test_a_table_flushed_early_by_a_schema_change_is_reported_by_the_next_flush(options: IcebergSinkOptions) -> None:
    with IcebergSink(options) as sink:
        sink.add(T, insert(1, 0), SCHEMA, {"orders/0": 1})
        sink.add(T, [ChangelogRow(RowKind.INSERT, {"id": 2, "v": "b", "w": "x"}, metadata=meta(1))], SCHEMA2,
                 {"orders/0": 2})
        results = sink.flush()
    assert [r.rows_applied for r in results] == [1, 1]
    assert absorbed_per_table(results) == {"shop.orders": 2}


def test_results_that_do_not_name_their_table_fall_back_to_the_polled_count() -> None:
    class Foreign:
        skipped = False

    assert absorbed_per_table([Foreign()]) is None
    assert absorbed_per_table([]) == {}
