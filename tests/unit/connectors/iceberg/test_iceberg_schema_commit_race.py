"""Two Pipeline 2 workers evolving one Iceberg table at the same schema change (an embedded
SqlCatalog): the worker whose schema commit loses the race re-plans on the refreshed table instead
of failing with ``CommitFailedException`` (CI saw it: two workers of a hash-by-key topic reading an
``ALTER TABLE … DROP COLUMN`` under ``schema.change.behavior: evolve``). The interleaving is driven
by hand: worker B commits inside worker A's planning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions, read_table
from changelake.connectors.iceberg import evolve, writer as iceberg_writer

T = TableId("shop", "orders")


def schema(*columns: tuple[str, str]) -> Schema:
    return Schema.of([("id", parse_data_type("BIGINT NOT NULL")), *((n, parse_data_type(t)) for n, t in columns)], ["id"])


BASE = schema(("v", "INT"), ("s", "STRING"))


def options(tmp_path: Path) -> IcebergSinkOptions:
    (tmp_path / "catalog").mkdir(exist_ok=True)
    return IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/catalog/catalog.db", f"file://{tmp_path}/warehouse")


def rec(values: dict[str, Any], partition: int, offset: int) -> ChangelogRow:
    return ChangelogRow(RowKind.INSERT, values, metadata={"topic": "orders", "partition": partition, "offset": offset})


def columns(opts: IcebergSinkOptions) -> dict[str, str]:
    with IcebergSink(opts) as check:
        table = check.load_table(T)
        assert table is not None
        return {f.name: str(f.field_type) for f in table.schema().fields}


@pytest.mark.parametrize("a_wants, b_wants, expected", [
    # both add the same column (the DDL both workers read): A's plan turns out already made
    (schema(("v", "INT"), ("s", "STRING"), ("w", "INT")), schema(("v", "INT"), ("s", "STRING"), ("w", "INT")),
     {"id": "long", "v": "int", "s": "string", "w": "int"}),
    # B adds one column, A another: both land
    (schema(("v", "INT"), ("s", "STRING"), ("x", "STRING")), schema(("v", "INT"), ("s", "STRING"), ("w", "INT")),
     {"id": "long", "v": "int", "s": "string", "w": "int", "x": "string"}),
    # both widen v
    (schema(("v", "BIGINT"), ("s", "STRING")), schema(("v", "BIGINT"), ("s", "STRING")),
     {"id": "long", "v": "long", "s": "string"}),
])
def test_a_schema_evolution_that_loses_the_race_is_re_planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              a_wants: Schema, b_wants: Schema,
                                                              expected: dict[str, str]) -> None:
    opts = options(tmp_path)
    with IcebergSink(opts) as a, IcebergSink(opts) as b:
        a.write(T, [rec({"id": 1, "v": 1, "s": "a"}, 0, 0)], BASE, {"orders/0": 1})
        b.ensure_table(T, BASE)
        original = evolve.apply_evolution
        raced: list[bool] = []

        def b_commits_first(table: Any, changes: list[Any]) -> None:
            if not raced and changes:  # A planned on the table before B's commit
                raced.append(True)
                b.ensure_table(T, b_wants)
            original(table, changes)

        monkeypatch.setattr(iceberg_writer, "apply_evolution", b_commits_first)
        a.write(T, [rec({"id": 2, "v": 2, "s": "b", **{c.name: None for c in a_wants.columns[3:]}}, 0, 1)], a_wants,
                {"orders/0": 2})
        assert raced
    assert columns(opts) == expected
    assert sorted(r["id"] for r in read_table(opts, T).to_pylist()) == [1, 2]


def test_a_column_drop_that_loses_the_race_is_re_planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``evolve``'s ``drop.column`` read by both workers: B deletes ``s`` inside A's planning; A's
    stale commit is re-planned and finds nothing left to delete."""
    opts = options(tmp_path)
    with IcebergSink(opts) as a, IcebergSink(opts) as b:
        a.write(T, [rec({"id": 1, "v": 1, "s": "a"}, 0, 0)], BASE, {"orders/0": 1})
        original = evolve.delete_columns
        calls: list[list[str]] = []

        def b_drops_first(table: Any, names: list[str]) -> None:
            calls.append(list(names))
            if len(calls) == 1:
                b.drop_columns(T, ["s"])
            original(table, names)

        monkeypatch.setattr(iceberg_writer, "delete_columns", b_drops_first)
        a.drop_columns(T, ["s"])
        assert calls == [["s"], ["s"], []]  # A, B (inside A), then A re-planned on the table B changed
    assert columns(opts) == {"id": "long", "v": "int"}


def test_a_recreate_that_loses_the_race_is_re_planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DROP TABLE + CREATE with a changed type read by both workers: both give the emptied
    table the new definition; the loser's re-plan finds it done."""
    opts = options(tmp_path)
    new = schema(("v", "STRING"))
    with IcebergSink(opts) as a, IcebergSink(opts) as b:
        a.write(T, [rec({"id": 1, "v": 1, "s": "a"}, 0, 0)], BASE, {"orders/0": 1})
        original = evolve.apply_recreate
        raced: list[bool] = []

        def b_recreates_first(table: Any, incoming: Schema, *, table_name: str) -> list[str]:
            if not raced:
                raced.append(True)
                b.recreate_schema(T, new)
            return original(table, incoming, table_name=table_name)

        monkeypatch.setattr(iceberg_writer, "apply_recreate", b_recreates_first)
        assert a.recreate_schema(T, new) == []  # B made every change
        assert raced
    assert columns(opts) == {"id": "long", "v": "string"}
