"""DDL on a captured table the lock-free snapshot has not read yet (issue 17 class).

``START TRANSACTION WITH CONSISTENT SNAPSHOT`` holds a table's metadata lock only from its first
SELECT on, so a DDL on a table not read yet commits freely while the snapshot reads another one.
Each test captures two tables, ``a`` (read first) and ``b``, and runs -- right after the snapshot's
``open()``, so the race happens every time -- a row change of ``b``, a DDL of ``b``, and another
row change of ``b``: the binlog from the snapshot's position then holds rows events of the old
definition, the DDL and rows events of the new one. The folded changelog must equal MySQL's final
state, each event's row must have its schema's columns, and the events before the DDL must carry
the old definition with its values (decoded by the definition they were written with).
"""

from __future__ import annotations

import logging
from typing import Any

import pymysql
import pytest

from changelake.changelog import TableId
from changelake.changelog.event import DROP_TABLE, DataChangeEvent, Op
from changelake.connectors.mysql_cdc import MySqlSource
from changelake.connectors.mysql_cdc.snapshot import incremental, reader
from changelake.connectors.mysql_cdc.snapshot.reader import read_table
from changelake.connectors.errors import SourceTableNotFoundError
from mysql_cdc_support import drain, run_sql, source_options

pytestmark = pytest.mark.integration

ROWS = 30

#: (DDL of b, statement after it, b's columns after the DDL)
CASES = {
    "drop-column": (["ALTER TABLE b DROP COLUMN s"], "INSERT INTO b VALUES (1000, 1000)", ["id", "v"]),
    "rename-column": (["ALTER TABLE b RENAME COLUMN s TO w"], "INSERT INTO b VALUES (1000, 1000, 'n')",
                      ["id", "v", "w"]),
    "add-column-default": (["ALTER TABLE b ADD COLUMN d INT NOT NULL DEFAULT 5"],
                           "INSERT INTO b VALUES (1000, 1000, 'n', 6)", ["id", "v", "s", "d"]),
    "modify-bigint": (["ALTER TABLE b MODIFY v BIGINT"], "INSERT INTO b VALUES (1000, 30000000000, 'n')",
                      ["id", "v", "s"]),
    "drop-table": (["DROP TABLE b"], None, None),
    "drop-create": (["DROP TABLE b", "CREATE TABLE b (id BIGINT PRIMARY KEY, x VARCHAR(5), y INT)"],
                    "INSERT INTO b VALUES (1000, 'x', 7), (2, 'y', 8)", ["id", "x", "y"]),
}


def _setup(params: dict, db: str) -> None:
    run_sql(params, db,
            "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO a SELECT seq, seq FROM seq_1_to_{ROWS}",
            "CREATE TABLE b (id INT PRIMARY KEY, v INT, s VARCHAR(10))",
            f"INSERT INTO b SELECT seq, seq, CONCAT('s', seq) FROM seq_1_to_{ROWS}")


def _statements(case: str) -> list[str]:
    ddl, after, _ = CASES[case]
    # a row change before the DDL (old definition in the binlog) and one after it (new definition)
    out = ["UPDATE b SET v = v + 100 WHERE id = 1", *ddl]
    if after is not None:
        out.append(after)
        if case != "drop-create":
            out.append("UPDATE b SET v = v + 1000 WHERE id = 1")
    return out


def _fold(events: list[DataChangeEvent], table: TableId) -> dict[Any, dict[str, Any]]:
    state: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e.table != table:
            continue
        if e.op is Op.TRUNCATE:
            state.clear()
        elif e.op is Op.DELETE:
            assert e.before is not None
            state.pop(e.before["id"], None)
        else:
            assert e.after is not None
            state[e.after["id"]] = dict(e.after)
    return state


def _mysql_rows(params: dict, table: TableId) -> tuple[list[str] | None, dict[Any, dict[str, Any]]]:
    conn = {k: params[k] for k in ("host", "port", "user", "password")}
    try:
        schema, rows = read_table(conn, table)
    except SourceTableNotFoundError:
        return None, {}
    return [c.name for c in schema.columns], {r["id"]: r for r in rows}


def _run(params: dict, db: str, case: str, monkeypatch, **extra: str) -> list[DataChangeEvent]:
    """The source's events, the statements of ``case`` run right after its snapshot's ``open()``
    (it has read every table's definition, no row yet)."""
    cls: Any = (incremental.IncrementalSnapshotReader if extra.get("scan.incremental.snapshot.enabled") == "true"
                else reader.SnapshotReader)
    real_open = cls.open
    ran: list[bool] = []

    def open_then_ddl(self: Any) -> Any:
        at = real_open(self)
        if not ran:
            ran.append(True)
            run_sql(params, db, *_statements(case))
        return at

    monkeypatch.setattr(cls, "open", open_then_ddl)
    src = MySqlSource(source_options(params, db, "(a|b)", **extra))
    src.open()
    try:
        events = drain(src)
    finally:
        src.close()
    assert ran, "the DDL did not run during the snapshot"
    return events


def _check(params: dict, db: str, case: str, events: list[DataChangeEvent], lock_free: bool = True) -> None:
    a, b = TableId(db, "a"), TableId(db, "b")
    for e in events:
        row = e.after if e.after is not None else e.before
        if row is not None:
            assert e.schema is not None
            assert set(row) == {c.name for c in e.schema.columns}, (e.op, e.table, row, e.schema)
    # table a: untouched, read whole
    assert _fold(events, a) == {i: {"id": i, "v": i} for i in range(1, ROWS + 1)}
    columns, final = _mysql_rows(params, b)
    folded = _fold(events, b)
    if columns is None and lock_free:  # dropped: the DROP TABLE event clears it
        assert any(e.table == b and e.schema_change == DROP_TABLE for e in events)
    assert folded == final
    if columns is not None:
        assert columns == CASES[case][2]
    if not lock_free:
        # the binlog changes of a table before its chunk are the chunk's rows (watermarks): none here
        return
    # the row change before the DDL: the old definition, its values decoded with it
    before_ddl = [e for e in events if e.table == b and e.op is Op.UPDATE and e.before and e.before["v"] == 1]
    assert len(before_ddl) == 1, before_ddl
    assert before_ddl[0].schema is not None
    assert [c.name for c in before_ddl[0].schema.columns] == ["id", "v", "s"]
    assert dict(before_ddl[0].after or {}) == {"id": 1, "v": 101, "s": "s1"}


@pytest.mark.parametrize("case", list(CASES))
def test_ddl_on_a_table_the_lock_free_snapshot_has_not_read_yet(mysql_params, database_factory, monkeypatch, caplog,
                                                              case):
    db = database_factory()
    _setup(mysql_params, db)
    with caplog.at_level(logging.INFO, logger=reader.__name__):
        events = _run(mysql_params, db, case, monkeypatch)
    _check(mysql_params, db, case, events)
    said = caplog.text
    # a table rebuilt (MODIFY to a wider type) or re-created cannot be read by the transaction
    # (ER_TABLE_DEF_CHANGED): a new consistent snapshot reads it; a dropped one is skipped
    assert ("new consistent snapshot reads it" in said) == (case in ("modify-bigint", "drop-create")), said
    assert ("is gone" in said) == (case == "drop-table"), said
    reads_b = [e for e in events if e.table == TableId(db, "b") and e.op is Op.READ]
    if case in ("drop-column", "rename-column", "add-column-default", "modify-bigint"):
        # the snapshot read b with the definition MariaDB read it with: the new one
        assert reads_b and all([c.name for c in e.schema.columns] == CASES[case][2] for e in reads_b if e.schema)
    if case == "add-column-default":  # MySQL filled the old rows
        assert {e.after["d"] for e in reads_b if e.after and e.after["id"] <= ROWS} == {5}


@pytest.mark.parametrize("case", ["drop-column", "rename-column", "drop-create", "drop-table"])
def test_ddl_on_a_table_the_incremental_snapshot_has_not_chunked_yet(mysql_params, database_factory, monkeypatch,
                                                                     case):
    """The same class in the incremental snapshot: it reads every table's definition at ``open()``
    too; the DDL runs before any chunk of ``b`` (chunks of 10 rows: ``a`` takes three)."""
    db = database_factory()
    _setup(mysql_params, db)
    events = _run(mysql_params, db, case, monkeypatch, **{"scan.incremental.snapshot.enabled": "true",
                                                          "scan.incremental.snapshot.chunk.size": "10"})
    _check(mysql_params, db, case, events, lock_free=False)


@pytest.mark.parametrize("case", ["drop-column", "modify-bigint", "drop-create"])
def test_ddl_on_a_table_a_signalled_snapshot_has_not_read_yet(mysql_params, database_factory, monkeypatch, case):
    """The same class in Debezium's ``execute-snapshot`` signal (an ad-hoc lock-free snapshot from
    the signal's binlog position): the DDL runs right after that snapshot's ``open()``."""
    db = database_factory()
    _setup(mysql_params, db)
    run_sql(mysql_params, db, "CREATE TABLE sig (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                              "data VARCHAR(2048))")
    real_open = reader.SnapshotReader.open
    opened: list[bool] = []

    def open_then_ddl(self: reader.SnapshotReader) -> Any:
        at = real_open(self)
        opened.append(True)
        if len(opened) == 2:  # the signal's snapshot (the first is the initial one)
            run_sql(mysql_params, db, *_statements(case))
        return at

    monkeypatch.setattr(reader.SnapshotReader, "open", open_then_ddl)
    src = MySqlSource(source_options(mysql_params, db, "(a|b)", **{"signal.data.collection": f"{db}.sig"}))
    src.open()
    try:
        events = drain(src)
        run_sql(mysql_params, db, "INSERT INTO sig VALUES ('ad-hoc-1', 'execute-snapshot', "
                                  f"'{{\"data-collections\": [\"{db}.a\", \"{db}.b\"], \"type\": \"incremental\"}}')")
        events += drain(src)
        events += drain(src)  # (streaming on after the signal's snapshot)
    finally:
        src.close()
    assert len(opened) >= 2, "the signal's snapshot did not run"
    _check(mysql_params, db, case, events)
    reads_a = [e for e in events if e.table == TableId(db, "a") and e.op is Op.READ]
    assert len(reads_a) == 2 * ROWS  # the initial snapshot and the signal's


@pytest.mark.parametrize("mode", ["lock-free", "incremental"])
@pytest.mark.parametrize("case", ["drop-column", "drop-table", "drop-create"])
def test_a_snapshot_stopped_before_a_table_resumes_after_its_ddl(mysql_params, database_factory, case, mode):
    """Pipeline 1 stops while the snapshot reads ``a`` (position: P1, tables a and b, a's last
    key); ``b`` then changes, is altered, dropped or re-created; the restarted source (a new
    consistent snapshot for the rest, the binlog from P1) ends equal to MySQL instead of failing
    to start (``b`` no longer in information_schema)."""
    db = database_factory()
    _setup(mysql_params, db)
    opts = source_options(mysql_params, db, "(a|b)", **{"scan.incremental.snapshot.chunk.size": "10",
                                                         "scan.incremental.snapshot.enabled": "true" if mode == "incremental" else "false"})
    src = MySqlSource(opts)
    src.open()
    try:
        events = src.poll(5, 1.0)
    finally:
        src.close()
    assert events and all(e.table == TableId(db, "a") and e.op is Op.READ for e in events), events
    stored = events[-1].position
    run_sql(mysql_params, db, *_statements(case))
    again = MySqlSource(opts, stored)
    again.open()
    try:
        events += drain(again)
    finally:
        again.close()
    _check(mysql_params, db, case, events, lock_free=mode == "lock-free")


def test_a_table_renamed_before_the_lock_free_snapshot_reads_it_is_read_under_its_new_name(
        mysql_params, database_factory, monkeypatch):
    """``RENAME TABLE b TO c`` (both captured) before the snapshot reads ``b``: ``b`` is gone for
    the transaction (skipped), and the binlog's RENAME re-reads ``c``: nothing of b's rows lost."""
    db = database_factory()
    _setup(mysql_params, db)
    real_open = reader.SnapshotReader.open
    ran: list[bool] = []

    def open_then_rename(self: reader.SnapshotReader) -> Any:
        at = real_open(self)
        if not ran:
            ran.append(True)
            run_sql(mysql_params, db, "UPDATE b SET v = v + 100 WHERE id = 1", "RENAME TABLE b TO c",
                    "UPDATE c SET v = v + 1000 WHERE id = 2")
        return at

    monkeypatch.setattr(reader.SnapshotReader, "open", open_then_rename)
    src = MySqlSource(source_options(mysql_params, db, "(a|b|c)"))
    src.open()
    try:
        events = drain(src)
    finally:
        src.close()
    assert ran
    c = TableId(db, "c")
    columns, final = _mysql_rows(mysql_params, c)
    assert columns == ["id", "v", "s"] and len(final) == ROWS
    assert final[1]["v"] == 101 and final[2]["v"] == 1002
    assert _fold(events, c) == final
    assert _fold(events, TableId(db, "b")) == {}
