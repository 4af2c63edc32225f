"""DROP DATABASE end to end (MariaDB -> Kafka -> both lakes), issue 17: every captured table of the
dropped database that existed at that point of the binlog reaches the lake as a DROP TABLE, also
after a restart of Pipeline 1 from its stored position (a table created after the snapshot, and
one created while Pipeline 1 was down), with ``all-to-zero`` and ``hash-by-key`` topics; a
re-CREATE starts from the new definition. Before, both pipelines exited 0 and the lake kept the
dropped tables' rows."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from changelake.changelog import TableId
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration

HASH3 = {"partition.strategy": "hash-by-key", "sink.topic.partitions": 3}


def _rows(p2, table: TableId) -> list[tuple]:
    return sorted((r["id"], r["v"]) for r in read_lake_table(p2, table).to_pylist())


@pytest.mark.parametrize("p1_extra", [{}, HASH3], ids=["all-to-zero", "hash-by-key"])
def test_drop_database_empties_its_tables_in_the_lake(database_factory, mysql_exec, mysql_params, pipeline_pair, p1_extra):
    ta, tz = database_factory(), database_factory()
    mysql_exec(ta, "CREATE TABLE s_a (id INT PRIMARY KEY, v INT)", "INSERT INTO s_a VALUES (1,10),(2,20)")
    mysql_exec(tz, "CREATE TABLE s_a (id INT PRIMARY KEY, v INT)", "INSERT INTO s_a VALUES (1,1),(2,2)")
    p1, p2 = pipeline_pair(tz, ["s_a"], p1_extra=p1_extra)
    # as the trial: Pipeline 1 reads both databases, Pipeline 2 a topic pattern over both
    p1 = replace(p1, source={**p1.source, "tables": f"{ta}.\\.*,{tz}.\\.*"})
    p2 = replace(p2, source={**{k: v for k, v in p2.source.items() if k != "topic"},
                             "topic-pattern": f"({re.escape(ta)}|{re.escape(tz)})\\.s_.*"})
    run_pipeline(p1, until_caught_up=True)  # the snapshot
    # a table created after the snapshot: only the binlog (and then the stored position) knows it
    mysql_exec(tz, "CREATE TABLE s_b (id INT PRIMARY KEY, v INT)", "INSERT INTO s_b VALUES (3,3),(4,4)",
               "INSERT INTO s_a VALUES (5,5)")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert _rows(p2, TableId(tz, "s_a")) == [(1, 1), (2, 2), (5, 5)]
    assert _rows(p2, TableId(tz, "s_b")) == [(3, 3), (4, 4)]

    # while Pipeline 1 is stopped: one more table, then the database goes. The restart from the
    # stored position finds none of them in information_schema.
    mysql_exec(ta, f"CREATE TABLE `{tz}`.s_c (id INT PRIMARY KEY, v INT)", f"INSERT INTO `{tz}`.s_c VALUES (6,6)",
               f"DROP DATABASE `{tz}`", "INSERT INTO s_a VALUES (3,30)")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    for t in ("s_a", "s_b", "s_c"):
        assert _rows(p2, TableId(tz, t)) == [], t  # MySQL has no such table: the lake table is emptied
    assert _rows(p2, TableId(ta, "s_a")) == [(1, 10), (2, 20), (3, 30)]  # the other database is untouched
    assert verify_lake_table(p2, TableId(ta, "s_a"), mysql=mysql_params).passed

    # a re-CREATE of the database and the table starts from the new definition
    mysql_exec(ta, f"CREATE DATABASE `{tz}`", f"CREATE TABLE `{tz}`.s_a (id INT PRIMARY KEY, v VARCHAR(10), w INT)",
               f"INSERT INTO `{tz}`.s_a VALUES (7,'x',70)")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert read_lake_table(p2, TableId(tz, "s_a")).to_pylist() == [{"id": 7, "v": "x", "w": 70}]
    result = verify_lake_table(p2, TableId(tz, "s_a"), mysql=mysql_params)
    assert result.passed, result.metadata()

    # DROP SCHEMA IF EXISTS, then the database again, in one read of each pipeline
    mysql_exec(ta, f"DROP SCHEMA IF EXISTS `{tz}`", f"CREATE DATABASE `{tz}`",
               f"CREATE TABLE `{tz}`.s_a (id INT PRIMARY KEY, v VARCHAR(10), w INT)",
               f"INSERT INTO `{tz}`.s_a VALUES (8,'y',80)")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert read_lake_table(p2, TableId(tz, "s_a")).to_pylist() == [{"id": 8, "v": "y", "w": 80}]
    result = verify_lake_table(p2, TableId(tz, "s_a"), mysql=mysql_params)
    assert result.passed, result.metadata()
    assert _rows(p2, TableId(tz, "s_b")) == []


@pytest.mark.parametrize("p1_extra", [{}, HASH3], ids=["all-to-zero", "hash-by-key"])
def test_create_or_replace_table_replaces_the_lake_table(database_factory, mysql_exec, mysql_params, pipeline_pair,
                                                         p1_extra):
    """MariaDB's ``CREATE OR REPLACE TABLE`` drops the old table: its rows leave the lake, the new
    definition (and the rows of a ``... SELECT``) arrive. Before, the lake kept the old rows."""
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1,1),(2,2),(3,3)",
               "CREATE TABLE src (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO src VALUES (10,'a'),(11,'b')",
               "CREATE TABLE u (id INT PRIMARY KEY, v INT)", "INSERT INTO u VALUES (1,1),(2,2)")
    p1, p2 = pipeline_pair(db, ["t", "src", "u"], p1_extra=p1_extra)
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert _rows(p2, TableId(db, "t")) == [(1, 1), (2, 2), (3, 3)]

    mysql_exec(db,
               # a new, empty definition, then one row of it
               "CREATE OR REPLACE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO t VALUES (4,'new')",
               # the ... SELECT form: the new table's rows come from the select
               "CREATE OR REPLACE TABLE u (id INT PRIMARY KEY, v VARCHAR(10)) SELECT id, v FROM src")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert _rows(p2, TableId(db, "t")) == [(4, "new")]
    assert _rows(p2, TableId(db, "u")) == [(10, "a"), (11, "b")]
    for t in ("t", "u", "src"):
        result = verify_lake_table(p2, TableId(db, t), mysql=mysql_params)
        assert result.passed, (t, result.metadata())
