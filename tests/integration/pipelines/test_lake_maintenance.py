"""Iceberg maintenance between Pipeline 2 runs (as the Dagster schedule runs it): the lake stays
readable and equal to MySQL, the resume offsets survive snapshot expiry, and the file count stays
bounded over rounds of changes."""

from __future__ import annotations

import pytest

from changelake.changelog import TableId
from changelake.connectors.iceberg import IcebergSink, parse_sink_options
from changelake.connectors.iceberg.maintenance import MaintenanceOptions
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.maintenance import maintain_pipeline_lake
from changelake.pipeline.runner import read_checkpoint, run_pipeline
from changelake.pipeline.verify import verify_lake_table

pytestmark = pytest.mark.integration

NOW = MaintenanceOptions(max_snapshot_age_ms=0, min_snapshots_to_keep=1, orphan_older_than_ms=0, min_input_files=2)


def _data_files(p2, table_id: TableId) -> int:
    sink = IcebergSink(parse_sink_options(p2.options("sink")))
    with sink:
        table = sink.load_table(table_id)
        assert table is not None
        return len(table.inspect.files())


#: Sink options: unpartitioned; bucketed by key; partitioned by a column that updates change (rows
#: move partition) and bucketed.
PARTITIONING = {
    "unpartitioned": {"bucket-by-key": "false"},
    "bucketed": {"partition.key": "{db}.items:bucket[4](id)"},
    "partitioned": {"partition.key": "{db}.items:truncate[4](qty),bucket[2](id)"},
}


def _partitions(p2, table_id: TableId) -> int:
    with IcebergSink(parse_sink_options(p2.options("sink"))) as sink:
        table = sink.load_table(table_id)
        assert table is not None
        return 1 if table.spec().is_unpartitioned() else table.inspect.partitions().num_rows


@pytest.mark.parametrize("lake", ["iceberg"])  # maintenance is Iceberg's (pypaimon has no expiry/compaction)
@pytest.mark.parametrize("partitioning", list(PARTITIONING))
def test_maintenance_keeps_the_lake_readable_offsets_resumable_and_files_bounded(
    database_factory, mysql_exec, mysql_params, pipeline_pair, partitioning
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE items (id INT PRIMARY KEY, qty INT, note VARCHAR(16))")
    p1, p2 = pipeline_pair(db, ["items"])
    extra = PARTITIONING[partitioning]
    p2 = parse_pipeline({"pipeline": p2.pipeline, "source": p2.source, "transform": p2.transform,
                         "sink": {**p2.sink, **{k: v.format(db=db) for k, v in extra.items()}}}, env={})
    items = TableId(db, "items")
    sink_options = parse_sink_options(p2.options("sink"))
    files_after: list[int] = []
    for round_ in range(4):
        # Several small Pipeline 2 runs per round: many snapshots and small files.
        for step in range(3):
            base = round_ * 100 + step * 10
            mysql_exec(
                db,
                "INSERT INTO items VALUES " + ",".join(f"({base + i},{i},'r{round_}')" for i in range(10)),
                f"UPDATE items SET qty = qty + 1 WHERE id % 7 = {step}",
                f"DELETE FROM items WHERE id = {base + 3}",
            )
            run_pipeline(p1, until_caught_up=True)
            run_pipeline(p2, until_caught_up=True)
        with IcebergSink(sink_options) as sink:
            offsets_before = sink.committed_offsets(items)
            checkpoint_before = read_checkpoint(sink.catalog, p2.name)
        results = maintain_pipeline_lake(p2, NOW)
        assert [r.table for r in results] == [f"{db}.items"]
        assert results[0].snapshots <= 2, results
        # The lake reads the same, and both resume positions survive expiry and compaction.
        result = verify_lake_table(p2, items, mysql=mysql_params)
        assert result.passed, result.metadata()
        with IcebergSink(sink_options) as sink:
            assert sink.committed_offsets(items) == offsets_before
            assert read_checkpoint(sink.catalog, p2.name) == checkpoint_before
        # A run after maintenance re-applies nothing.
        again = run_pipeline(p2, until_caught_up=True)
        assert again.events == 0, again
        files_after.append(_data_files(p2, items) - _partitions(p2, items))
    # Files stay bounded although every round added snapshots and files: about one per partition.
    assert max(files_after) <= 2, files_after
    mysql_exec(db, "UPDATE items SET note = 'last'")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    result = verify_lake_table(p2, items, mysql=mysql_params)
    assert result.passed, result.metadata()
