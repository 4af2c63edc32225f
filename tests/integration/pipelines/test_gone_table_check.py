"""The key-state check of a lake table whose MySQL table is gone (``DROP TABLE``, ``RENAME TABLE``),
MariaDB -> Kafka -> both lakes. A gone table has an empty key state: the check passes once the lake
table is empty and fails, naming the table and its ``extra_in_lake`` rows, while it still holds
rows. Before, both cases failed alike with ``SourceError: table ... not found in information_schema``.
A missing database and an unreachable server still fail loudly."""

from __future__ import annotations

import pymysql
import pytest

from changelake.changelog import TableId
from changelake.connectors.errors import SourceError, SourceTableNotFoundError
from changelake.errors import ChangelakeError
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, read_mysql_table, verify_lake_table

pytestmark = pytest.mark.integration


def test_a_dropped_or_renamed_table_checks_green_when_emptied_and_red_while_the_lake_holds_rows(
        database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO t VALUES (1,'a'),(2,'b')",
               "CREATE TABLE r (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO r VALUES (1,'r1')")
    p1, p2 = pipeline_pair(db, ["t", "r"])
    t, r, r2 = TableId(db, "t"), TableId(db, "r"), TableId(db, "r2")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert verify_lake_table(p2, t, mysql=mysql_params).passed

    # Pipeline 2 not run after the DROP: the lake table still holds MySQL's former rows -> red
    mysql_exec(db, "DROP TABLE t", "RENAME TABLE r TO r2")
    run_pipeline(p1, until_caught_up=True)
    p1, p2 = pipeline_pair(db, ["t", "r", "r2"])  # the same pipelines, now also reading the new name's topic
    for table, held in ((t, 2), (r, 1)):
        red = verify_lake_table(p2, table, mysql=mysql_params, recheck_after_s=0.1)
        md = red.metadata()
        assert not red.passed and red.mysql_table_exists is False, md
        assert (md["extra_in_lake"], md["rows_source"], md["rows_lake"], md["missing_in_lake"]) == (held, 0, held, 0), md
        assert f"MySQL table {table} no longer exists" in md["reason"], md
        assert f"extra_in_lake={held}" in md["reason"], md
        assert sorted(k["id"] for k in md["sample_extra"]) == list(range(1, held + 1)), md

    # Pipeline 2 applies the DROP and the RENAME: the emptied lake tables are green
    run_pipeline(p2, until_caught_up=True)
    for table in (t, r):
        assert read_lake_table(p2, table).num_rows == 0
        green = verify_lake_table(p2, table, mysql=mysql_params)
        assert green.passed and green.mysql_table_exists is False, green.metadata()
        assert "reason" not in green.metadata()
    assert verify_lake_table(p2, r2, mysql=mysql_params).mysql_table_exists is True


def test_only_no_such_table_counts_as_gone(database_factory, mysql_exec, mysql_params):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    schema, rows = read_mysql_table(mysql_params, TableId(db, "t"))
    assert list(schema.primary_key) == ["id"] and rows == [{"id": 1}]
    assert read_mysql_table(mysql_params, TableId(db, "never_created")) == (None, [])

    # a missing database is not a dropped table: the error stays (not SourceTableNotFoundError)
    with pytest.raises(SourceError, match="not found in information_schema") as missing_db:
        read_mysql_table(mysql_params, TableId(f"{db}_no_such_db", "t"))
    assert not isinstance(missing_db.value, SourceTableNotFoundError)
    # a server that cannot be reached stays an error too
    with pytest.raises(pymysql.err.OperationalError):
        read_mysql_table({**mysql_params, "port": _free_port()}, TableId(db, "t"))


def test_a_gone_table_without_a_lake_table_still_fails_loudly(database_factory, mysql_params, pipeline_pair):
    db = database_factory()
    _, p2 = pipeline_pair(db, ["nothing"])
    with pytest.raises(ChangelakeError, match="does not exist"):  # IcebergSinkError / PaimonSinkError
        verify_lake_table(p2, TableId(db, "nothing"), mysql=mysql_params)


def _free_port() -> int:
    from changelake.services import free_port

    return free_port()
