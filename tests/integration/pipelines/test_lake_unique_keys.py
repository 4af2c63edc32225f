"""The ``no_duplicate_primary_keys`` check on either lake: the key comes from the lake table's own
declaration (Iceberg identifier fields, Paimon primary keys) through the lake sink, with no
per-lake branch; a table that does not exist is an error of the lake, not a pass."""

from __future__ import annotations

import pytest

from changelake.changelog import TableId
from changelake.connectors.lake.errors import LakeSinkError
from changelake.pipeline.lake_checks import check_unique_keys
from changelake.pipeline.lake_checkpoint import open_lake_sink
from changelake.pipeline.runner import run_pipeline

pytestmark = pytest.mark.integration


def test_unique_keys_of_a_lake_table_use_the_key_the_table_declares(database_factory, mysql_exec, pipeline_pair):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (a INT, b INT, v INT, PRIMARY KEY (a, b))",
               "INSERT INTO t VALUES (1, 1, 0), (1, 2, 0), (2, 1, 0)", "UPDATE t SET v = 5 WHERE a = 1")
    p1, p2 = pipeline_pair(db, ["t"], primary_keys="a,b")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)

    sink = open_lake_sink(p2)
    try:
        assert sorted(sink.primary_key(TableId(db, "t"))) == ["a", "b"]
    finally:
        sink.close()
    result = check_unique_keys(p2, TableId(db, "t"))
    assert result.passed, result
    with pytest.raises(LakeSinkError, match="does not exist"):
        check_unique_keys(p2, TableId(db, "missing"))
