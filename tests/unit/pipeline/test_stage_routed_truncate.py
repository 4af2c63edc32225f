"""A TRUNCATE / DROP TABLE of one source table that a route merges with others into one sink table
(issue 17): stopped by name, or ignored under ``lenient`` / ``ignore``; never a truncate of the others."""

from __future__ import annotations

from dataclasses import replace

import pytest

from changelake.changelog import DataChangeEvent, Op, TableId
from changelake.changelog.event import DROP_TABLE
from changelake.errors import PipelineDataError
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.stage import Stage


def _stage(route: list[dict], behavior: str | None = None) -> Stage:
    block = {"pipeline": {"name": "p", **({"schema.change.behavior": behavior} if behavior else {})},
             "source": {"type": "kafka"}, "sink": {"type": "iceberg"}, "route": route}
    return Stage(parse_pipeline(block, env={}))


A, B = TableId("app", "a"), TableId("app", "b")
TRUNCATE_A = DataChangeEvent(A, Op.TRUNCATE, None, None, None, 1, {})
MERGE = [{"source-table": "app.a, app.b", "sink-table": "ods.ab"}]


@pytest.mark.parametrize("event, what", [(TRUNCATE_A, "TRUNCATE TABLE"),
                                         (replace(TRUNCATE_A, schema_change=DROP_TABLE), "DROP TABLE")])
def test_a_truncate_of_one_merged_table_stops_naming_both_tables_and_the_route(event, what):
    with pytest.raises(PipelineDataError) as err:
        _stage(MERGE).apply([event])
    message = str(err.value)
    assert f"{what} of app.a cannot be applied to ods.ab" in message and "'app.a, app.b' -> 'ods.ab'" in message
    assert err.value.table == "app.a"


@pytest.mark.parametrize("behavior", ["lenient", "ignore"])
def test_lenient_and_ignore_drop_the_truncate_of_a_merged_table(behavior):
    assert _stage(MERGE, behavior).apply([TRUNCATE_A]) == []


def test_a_truncate_routed_to_a_table_of_its_own_passes():
    (out,) = _stage([{"source-table": "app.a", "sink-table": "ods.a"}]).apply([TRUNCATE_A])
    assert out.op is Op.TRUNCATE and out.table == TableId("ods", "a")
    (out,) = _stage([]).apply([TRUNCATE_A])
    assert out.table == A
