"""Changed keys outside every data file's key range are not deleted (real Iceberg tables)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import Column, Schema, TableId
from changelake.changelog.types import DataType
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions
from changelake.connectors.iceberg.key_bounds import key_ranges, possibly_present


def test_possibly_present_tests_keys_against_merged_ranges():
    keys = pa.array([1, 5, 10, 11, 20, 31, -3])
    assert possibly_present(keys, [(1, 10), (20, 30)]).to_pylist() == [True, True, True, False, True, False, False]
    assert possibly_present(keys, []).to_pylist() == [False] * 7
    assert possibly_present(keys, None).to_pylist() == [True] * 7
    names = pa.array(["a", "m", "z", "b"])
    assert possibly_present(names, [("b", "n")]).to_pylist() == [False, True, False, True]


@pytest.mark.parametrize("key_type, make", [("BIGINT", lambda i: i), ("STRING", lambda i: f"k{i:05d}")])
def test_ranges_come_from_the_data_files_and_upserts_stay_exact(tmp_path, key_type, make):
    # Unpartitioned, so each write is one file with one key range (bucketed tables: test_iceberg_partitioning).
    sink = IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{tmp_path / 'c.db'}", f"file://{tmp_path / 'wh'}",
                                              **{"bucket-by-key": "false"}))
    schema = Schema((Column("id", DataType.of(key_type, False)), Column("v", DataType.of("BIGINT"))), ("id",))
    t = TableId("db", "t")
    with sink:
        sink.write(t, [ChangelogRow.insert({"id": make(i), "v": 0}) for i in range(10, 20)], schema, {"x/0": 1})
        sink.write(t, [ChangelogRow.insert({"id": make(i), "v": 0}) for i in range(40, 50)], schema, {"x/0": 2})
        table = sink.load_table(t)
        assert key_ranges(table, "id") == [(make(10), make(19)), (make(40), make(49))]
        # New keys (outside both ranges), an update inside a range and a delete inside a range.
        rows = [ChangelogRow.insert({"id": make(i), "v": 1}) for i in (1, 25, 60)]
        rows += [ChangelogRow.update_after({"id": make(15), "v": 2}), ChangelogRow.delete({"id": make(41), "v": 0})]
        sink.write(t, rows, schema, {"x/0": 3})
        got = {r["id"]: r["v"] for r in sink.load_table(t).scan().to_arrow().to_pylist()}
    want = {make(i): 0 for i in [*range(10, 20), *range(40, 50)]}
    want.update({make(1): 1, make(25): 1, make(60): 1, make(15): 2})
    del want[make(41)]
    assert got == want
