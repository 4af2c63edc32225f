"""DROP DATABASE / DROP SCHEMA: statement parsing and the DROP TABLE events the binlog handler emits
for the captured tables that exist at that point (pure logic; end to end:
tests/integration/pipelines/test_drop_database.py)."""

from types import SimpleNamespace

from changelake.changelog import TableId
from changelake.changelog.event import DROP_TABLE, Op
from changelake.connectors.mysql_cdc.binlog.event_handler import (
    EventHandler,
    parse_create_table,
    parse_drop_database,
    parse_replaced_table,
)
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SourcePosition
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker


def T(db: str, t: str) -> TableId:
    return TableId(db, t)


def test_drop_database_and_schema_with_if_exists_quotes_and_comments():
    assert parse_drop_database("DROP DATABASE tz") == "tz"
    assert parse_drop_database("drop schema if exists `odd``db`;") == "odd`db"
    assert parse_drop_database("/* c */ DROP DATABASE IF EXISTS `a b`") == "a b"
    for q in ("DROP TABLE tz", "DROP DATABASE", "CREATE DATABASE tz", "DROP USER tz", "DROP DATABASE a, b",
              "DROP INDEX i ON t", "DROP VIEW tz"):
        assert parse_drop_database(q) is None, q


def test_create_table_forms_but_not_temporary_ones():
    assert parse_create_table("CREATE TABLE t (id INT PRIMARY KEY)", "d") == T("d", "t")
    assert parse_create_table("create table if not exists `x`.`odd``t`(id int)", "d") == T("x", "odd`t")
    assert parse_create_table("CREATE OR REPLACE TABLE e.u LIKE e.v", None) == T("e", "u")
    assert parse_create_table("CREATE TABLE u SELECT * FROM v", "d") == T("d", "u")
    assert parse_create_table("CREATE TABLE t (id INT)", None) is None  # no database to name it
    for q in ("CREATE TEMPORARY TABLE t (id INT)", "CREATE DATABASE t", "CREATE VIEW t AS SELECT 1",
              "CREATE INDEX i ON t (a)", "ALTER TABLE t ADD c INT"):
        assert parse_create_table(q, "d") is None, q


def _handler(existing: set[TableId], captured=lambda t: t.database in ("tz", "ta")):
    out: list = []
    h = EventHandler(SourcePosition(BinlogPosition("mysql-bin.000001", 4)), captured,
                     SchemaTracker(lambda t: None), out.append, existing=existing)
    return h, out


def _ddl(h: EventHandler, query: str, db: str | None = None, pos: int = 100) -> None:
    h._on_query(SimpleNamespace(query=query, schema=db, timestamp=1), "QUERY_EVENT", pos, pos + 50)


def _drops(out: list) -> list[TableId]:
    return [e.table for kind, e in out if kind == "event" and e.op is Op.TRUNCATE and e.schema_change == DROP_TABLE]


def test_drop_database_drops_the_existing_captured_tables_of_that_database_in_name_order():
    existing = {T("tz", "s_b"), T("tz", "s_a"), T("ta", "s_a")}
    h, out = _handler(existing)
    _ddl(h, "CREATE TABLE s_c (id INT PRIMARY KEY)", "tz")   # created after the start: tracked
    _ddl(h, "CREATE TABLE other.x (id INT PRIMARY KEY)")     # not captured: never dropped
    _ddl(h, "CREATE TEMPORARY TABLE tz.tmp (id INT)")        # temporary: not a captured table
    _ddl(h, "DROP TABLE s_b", "tz", pos=300)                 # dropped before: not dropped again
    _ddl(h, "RENAME TABLE tz.s_a TO tz.s_r", pos=400)
    out.clear()
    _ddl(h, "DROP DATABASE IF EXISTS `tz`", pos=500)
    assert _drops(out) == [T("tz", "s_c"), T("tz", "s_r")]
    assert [e.position["row"] for kind, e in out if kind == "event"] == [1, 2]  # one position per table
    assert existing == {T("ta", "s_a")}
    out.clear()
    _ddl(h, "DROP SCHEMA tz", pos=600)  # nothing left of it
    assert _drops(out) == []
    # a re-CREATE of the database and table: tracked again
    _ddl(h, "CREATE DATABASE tz", pos=700)
    _ddl(h, "CREATE TABLE tz.s_a (id INT PRIMARY KEY, w INT)", pos=800)
    out.clear()
    _ddl(h, "DROP DATABASE tz", pos=900)
    assert _drops(out) == [T("tz", "s_a")]


def test_the_set_is_shared_across_connections_and_a_swap_keeps_both_names():
    existing = {T("tz", "a"), T("tz", "b")}
    h, _ = _handler(existing)
    _ddl(h, "RENAME TABLE a TO tmp, b TO a, tmp TO b", "tz")
    assert existing == {T("tz", "a"), T("tz", "b")}
    h2, out = _handler(existing)  # the next connection's handler, same set
    _ddl(h2, "DROP DATABASE tz", pos=200)
    assert _drops(out) == [T("tz", "a"), T("tz", "b")]


def test_create_or_replace_names_the_table_it_replaces():
    assert parse_replaced_table("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)", "db") == TableId("db", "t")
    assert parse_replaced_table("/* c */ create or replace table `x`.`t t` LIKE y", None) == TableId("x", "t t")
    for q in ("CREATE TABLE t (id INT)", "CREATE TABLE IF NOT EXISTS t (id INT)", "CREATE OR REPLACE VIEW t AS SELECT 1",
              "CREATE TEMPORARY TABLE t (id INT)", "CREATE OR REPLACE TEMPORARY TABLE t (id INT)"):
        assert parse_replaced_table(q, "db") is None, q
