"""The schema tracker's last-known schema of a dropped table (pure logic; end to end:
tests/integration/pipelines/test_drop_with_schema.py): a restarted reader that read no table map
of a table before its DROP still knows the table's schema (warm-up at start), the binlog's table
maps win over information_schema, nothing is lost on ``invalidate``, and a re-created table of the
same name does not inherit the old one's schema."""

from types import SimpleNamespace

from changelake.changelog import TableId
from changelake.changelog.event import DROP_TABLE, Op
from changelake.connectors.mysql_cdc.binlog.event_handler import EventHandler
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SourcePosition
from changelake.connectors.mysql_cdc.schema.columns import MySqlColumn
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker, TableSchema

A, B = TableId("d", "a"), TableId("d", "b")


def _schema(t: TableId, *extra: str) -> TableSchema:
    cols = (MySqlColumn("id", "int", nullable=False), MySqlColumn("v", "varchar", charset="utf8mb4"),
            *(MySqlColumn(n, "bigint") for n in extra))
    return TableSchema(t, cols, ("id",))


class Server:
    """information_schema as a dict; counts the lookups."""

    def __init__(self, **tables: TableSchema) -> None:
        self.tables = {TableId("d", k): v for k, v in tables.items()}
        self.lookups: list[TableId] = []

    def __call__(self, t: TableId) -> TableSchema | None:
        self.lookups.append(t)
        return self.tables.get(t)


def _table_map(t: TableId, key: bytes, table_id: int = 7) -> SimpleNamespace:
    """A FULL-metadata table map of (id INT NOT NULL PRIMARY KEY, v BIGINT)."""
    cols = [SimpleNamespace(type=3, name="id", unsigned=False, data={"n": "id"}),
            SimpleNamespace(type=8, name="v", unsigned=False, data={"n": "v"})]
    return SimpleNamespace(schema=t.database, table=t.table, table_id=table_id, cache_key=key, columns=cols,
                           null_bitmask=b"\x02", optional_metadata=SimpleNamespace(simple_primary_key_list=[0]))


def test_warm_up_keeps_the_definition_after_the_table_is_gone_and_reads_each_table_once():
    server = Server(a=_schema(A))
    tracker = SchemaTracker(server)
    tracker.warm_up([A, B])  # b: not in information_schema, stays unknown
    tracker.warm_up([A, B])  # a reconnect's handler: no new lookups
    assert server.lookups == [A, B]
    del server.tables[A]
    tracker.invalidate(None)  # after any DDL: hints go, the last-known schema stays
    assert tracker.last_known(A) == _schema(A)
    assert tracker.last_known(B) is None


def test_the_binlog_table_map_wins_over_information_schema_and_survives_invalidate():
    server = Server(a=_schema(A, "w"))  # information_schema is ahead of the reader (a later ADD COLUMN w)
    tracker = SchemaTracker(server)
    tracker.warm_up([A])
    mapped = tracker.on_table_map(_table_map(A, b"k1"))
    assert [c.name for c in mapped.columns] == ["id", "v"]
    del server.tables[A]
    tracker.invalidate(None)
    tracker.invalidate(A)
    assert tracker.last_known(A) is mapped  # the binlog's definition at that point, not the newer one


def test_a_dropped_and_re_created_table_gets_the_new_definition_or_none():
    server = Server(a=_schema(A))
    tracker = SchemaTracker(server)
    tracker.on_table_map(_table_map(A, b"k1"))
    tracker.on_drop(A)
    del server.tables[A]
    tracker.on_create(A, existed=False)  # already gone again when read (the reader lags): unknown
    assert tracker.last_known(A) is None
    server.tables[A] = _schema(A, "z")
    tracker.on_create(A, existed=False)  # read while it exists: its definition now
    del server.tables[A]
    tracker.invalidate(None)
    assert tracker.last_known(A) == _schema(A, "z")
    tracker.on_create(A, existed=True)  # CREATE TABLE IF NOT EXISTS of the existing table: kept
    assert tracker.last_known(A) == _schema(A, "z")


def _ddl(h: EventHandler, query: str, db: str | None = "d", pos: int = 100) -> None:
    h._on_query(SimpleNamespace(query=query, schema=db, timestamp=1), "QUERY_EVENT", pos, pos + 50)


def test_drops_after_a_restart_carry_the_warmed_up_schemas():
    server = Server(a=_schema(A), b=_schema(B, "w"), c=_schema(TableId("d", "c")))
    existing = {A, B, TableId("d", "c")}
    out: list = []
    h = EventHandler(SourcePosition(BinlogPosition("mysql-bin.000001", 4)), lambda t: t.database == "d",
                     SchemaTracker(server), out.append, existing=existing)
    h.warm_up()  # the binlog reader's start
    server.tables.clear()  # the statements below are read after the tables are gone (the reader lags)
    _ddl(h, "DROP TABLE a", pos=100)
    _ddl(h, "RENAME TABLE b TO b2", pos=200)
    _ddl(h, "TRUNCATE TABLE c", pos=300)  # dropped since: the last-known schema
    _ddl(h, "DROP DATABASE d", pos=400)
    events = [(e.table, e.op, e.schema_change, e.schema) for kind, e in out if kind == "event"]
    assert events == [
        (A, Op.TRUNCATE, DROP_TABLE, _schema(A).schema),
        (B, Op.TRUNCATE, DROP_TABLE, _schema(B, "w").schema),
        (TableId("d", "c"), Op.TRUNCATE, None, _schema(TableId("d", "c")).schema),
        # b2 is the renamed b: its definition moved with it
        (TableId("d", "b2"), Op.TRUNCATE, DROP_TABLE, _schema(TableId("d", "b2"), "w").schema),
        (TableId("d", "c"), Op.TRUNCATE, DROP_TABLE, _schema(TableId("d", "c")).schema),
    ]


def test_a_swap_by_rename_moves_each_definition_to_the_other_name():
    server = Server(a=_schema(A), b=_schema(B, "w"))
    out: list = []
    h = EventHandler(SourcePosition(BinlogPosition("mysql-bin.000001", 4)), lambda t: t.database == "d",
                     SchemaTracker(server), out.append, existing={A, B})
    h.warm_up()
    server.tables.clear()
    _ddl(h, "RENAME TABLE a TO tmp, b TO a, tmp TO b", pos=100)
    out.clear()
    _ddl(h, "DROP TABLE a, b", pos=200)
    assert [(e.table, e.schema) for kind, e in out if kind == "event"] == [
        (A, _schema(A, "w").schema), (B, _schema(B).schema)]


def test_the_snapshot_definitions_are_the_last_known_schemas_of_tables_gone_before_the_reader_starts():
    # the snapshot read a and b; a is dropped before the binlog reader's warm-up, b is altered
    # (information_schema's definition at the warm-up wins over the snapshot's)
    server = Server(b=_schema(B, "w"))
    tracker = SchemaTracker(server, [_schema(A), _schema(B)])
    tracker.warm_up([A, B])
    assert server.lookups == [A, B]
    server.tables.clear()
    tracker.invalidate(None)
    assert tracker.last_known(A) == _schema(A)
    assert tracker.last_known(B) == _schema(B, "w")
    mapped = tracker.on_table_map(_table_map(A, b"k1"))  # a table map wins over both
    assert tracker.last_known(A) is mapped
    tracker.on_drop(A)  # a re-created a does not inherit it
    assert tracker.last_known(A) is None


def test_a_drop_of_a_captured_name_no_table_of_which_is_known_gives_no_event():
    out: list = []
    h = EventHandler(SourcePosition(BinlogPosition("mysql-bin.000001", 4)), lambda t: t.database == "d",
                     SchemaTracker(Server(a=_schema(A))), out.append, existing={A})
    h.warm_up()
    _ddl(h, "DROP TABLE IF EXISTS never, a", pos=100)
    _ddl(h, "DROP TABLE IF EXISTS d.never2", pos=200)
    assert [(e.table, e.schema_change) for kind, e in out if kind == "event"] == [(A, DROP_TABLE)]
    # a table the reader knows nothing of but that exists in its set (a restart after it was
    # delivered): the DROP still goes, without a schema (Pipeline 2 empties the lake table)
    out.clear()
    h2 = EventHandler(SourcePosition(BinlogPosition("mysql-bin.000001", 4)), lambda t: t.database == "d",
                      SchemaTracker(Server()), out.append, existing={B})
    h2.warm_up()
    _ddl(h2, "DROP TABLE b", pos=100)
    assert [(e.table, e.schema) for kind, e in out if kind == "event"] == [(B, None)]


def test_a_readers_warm_up_hands_its_definitions_to_the_next_reader():
    # a re-read (RENAME TABLE r TO r2) stops the reader and starts another; a DROP DATABASE
    # committed before the new reader's warm-up finds nothing in information_schema: the
    # definitions the first reader's warm-up put out are the new tracker's ``known``
    server = Server(a=_schema(A), b=_schema(B, "w"))
    out: list = []
    h = EventHandler(SourcePosition(BinlogPosition("mysql-bin.000001", 4)), lambda t: t.database == "d",
                     SchemaTracker(server), out.append, existing={A, B})
    h.warm_up()
    handed = [item for kind, item in out if kind == "schemas"]
    assert handed == [(_schema(A), _schema(B, "w"))]
    server.tables.clear()  # the database is gone before the next reader starts
    out.clear()
    h2 = EventHandler(SourcePosition(BinlogPosition("mysql-bin.000001", 100)), lambda t: t.database == "d",
                      SchemaTracker(server, handed[0]), out.append, existing={A, B})
    h2.warm_up()
    _ddl(h2, "DROP DATABASE d", pos=200)
    assert [(e.table, e.schema) for kind, e in out if kind == "event"] == [
        (A, _schema(A).schema), (B, _schema(B, "w").schema)]
    # without the hand-over the second reader knows neither
    out.clear()
    h3 = EventHandler(SourcePosition(BinlogPosition("mysql-bin.000001", 100)), lambda t: t.database == "d",
                      SchemaTracker(server), out.append, existing={A, B})
    h3.warm_up()
    _ddl(h3, "DROP DATABASE d", pos=200)
    assert [(e.table, e.schema) for kind, e in out if kind == "event"] == [(A, None), (B, None)]
