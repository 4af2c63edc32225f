"""RENAME TABLE end to end (MariaDB -> Kafka -> both lakes): the lake equals MySQL after a rename,
a swap through a temporary name, ``ALTER TABLE ... RENAME`` and gh-ost's cut-over, with
``all-to-zero`` and ``hash-by-key`` topics. Before, both pipelines exited 0 while the old name's
lake table kept its rows and the new name held only the rows changed after the rename."""

from __future__ import annotations

import pytest

from changelake.changelog import TableId
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration

HASH3 = {"partition.strategy": "hash-by-key", "sink.topic.partitions": 3}


def _rows(p2, table: TableId) -> list[tuple]:
    return sorted((r["id"], r["v"]) for r in read_lake_table(p2, table).to_pylist())


@pytest.mark.parametrize("p1_extra", [{}, HASH3], ids=["all-to-zero", "hash-by-key"])
def test_renamed_tables_hold_what_mysql_holds(database_factory, mysql_exec, mysql_params, pipeline_pair, p1_extra):
    db = database_factory()
    mysql_exec(db,
               "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO a VALUES (1,'a1'),(2,'a2')",
               "CREATE TABLE s1 (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO s1 VALUES (1,'one1'),(2,'one2')",
               "CREATE TABLE s2 (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO s2 VALUES (1,'two1'),(3,'two3')",
               "CREATE TABLE c (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO c VALUES (1,'c1')",
               "CREATE TABLE g (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO g VALUES (1,'g1'),(2,'g2')")
    p1, p2 = pipeline_pair(db, ["a", "s1", "s2", "c", "g"], p1_extra=p1_extra)
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert _rows(p2, TableId(db, "a")) == [(1, "a1"), (2, "a2")]

    mysql_exec(db,
               # rows 2 of b and 3 of s1 never change again: only a re-read brings them
               "RENAME TABLE a TO b", "INSERT INTO b VALUES (3,'b3')", "UPDATE b SET v='b1' WHERE id=1",
               "RENAME TABLE s1 TO tmp, s2 TO s1, tmp TO s2", "UPDATE s1 SET v='two1-upd' WHERE id=1",
               "ALTER TABLE c RENAME TO c2", "INSERT INTO c2 VALUES (2,'c2')",
               # gh-ost's cut-over: the ghost table, filled by INSERT ... SELECT, takes the name
               "CREATE TABLE _g_gho LIKE g", "INSERT INTO _g_gho SELECT id, CONCAT(v, '-gho') FROM g",
               "RENAME TABLE g TO _g_del, _g_gho TO g", "INSERT INTO g VALUES (3,'g3')")
    run_pipeline(p1, until_caught_up=True)
    # the same two pipelines (names, so positions and checkpoints), now also reading the new names' topics
    p1, p2 = pipeline_pair(db, ["a", "b", "s1", "s2", "c", "c2", "g", "_g_del"], p1_extra=p1_extra)
    run_pipeline(p2, until_caught_up=True)

    assert _rows(p2, TableId(db, "b")) == [(1, "b1"), (2, "a2"), (3, "b3")]
    assert _rows(p2, TableId(db, "a")) == []  # MySQL has no table a: the lake table is emptied
    assert _rows(p2, TableId(db, "s1")) == [(1, "two1-upd"), (3, "two3")]
    assert _rows(p2, TableId(db, "s2")) == [(1, "one1"), (2, "one2")]
    assert _rows(p2, TableId(db, "c")) == []
    assert _rows(p2, TableId(db, "c2")) == [(1, "c1"), (2, "c2")]
    assert _rows(p2, TableId(db, "g")) == [(1, "g1-gho"), (2, "g2-gho"), (3, "g3")]
    assert _rows(p2, TableId(db, "_g_del")) == [(1, "g1"), (2, "g2")]
    for t in ("b", "s1", "s2", "c2", "g", "_g_del"):
        result = verify_lake_table(p2, TableId(db, t), mysql=mysql_params)
        assert result.passed, (t, result.metadata())
