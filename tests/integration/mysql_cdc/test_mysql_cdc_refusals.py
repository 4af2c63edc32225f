"""Issue 10: every binlog event understood, or the reader stops by name - on the real MariaDB.

Compressed events (log_bin_compress), a non-FULL row image in one session, statement-format DML in
one session, XA transactions (incl. a restart between XA PREPARE and XA COMMIT) and account
statements (passwords) in the binlog."""

from __future__ import annotations

import json
import logging
import uuid

import pymysql
import pytest

from changelake.changelog.event import Op
from changelake.connectors.mysql_cdc import MySqlSource
from changelake.connectors.mysql_cdc.errors import RowImageError, StatementFormatError, XaTransactionError
from changelake.connectors.mysql_cdc.binlog.event_policy import EVENT_RULES, Action
from mysql_cdc_support import drain, run_sql, source_options

pytestmark = pytest.mark.integration


def _open(params, db, tables="t", start=None, **extra):
    src = MySqlSource(source_options(params, db, tables, **extra), start)
    src.open()
    return src


def _query(params, sql, args=None):
    conn = pymysql.connect(host=params["host"], port=params["port"], user=params["user"], password=params["password"],
                           autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    finally:
        conn.close()


def _binlog_event_types(params, since_file: str) -> set[str]:
    files = [r[0] for r in _query(params, "SHOW BINARY LOGS")]
    seen: set[str] = set()
    for f in files[files.index(since_file):]:
        seen |= {str(r[2]) for r in _query(params, f"SHOW BINLOG EVENTS IN '{f}'")}
    return seen


def _drain_until_error(src, error_type, timeout_s=30.0):
    events = []
    with pytest.raises(error_type) as err:
        for _ in range(int(timeout_s / 0.3)):
            events += src.poll(1000, 0.3)
    return events, err.value


def _xid() -> str:
    return "x" + uuid.uuid4().hex[:10]


# -- compressed binlog ---------------------------------------------------------------------------
def test_compressed_row_and_query_events_are_decoded(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(1000))")
    first_file = _query(mysql_params, "SHOW MASTER STATUS")[0][0]
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, None, "SET GLOBAL log_bin_compress=ON")
        try:
            long_comment = "c" * 400  # makes the DDL longer than log_bin_compress_min_len: QUERY_COMPRESSED_EVENT
            run_sql(mysql_params, db,
                    "INSERT INTO t VALUES (1, REPEAT('z', 500)), (2, REPEAT('w', 600))",
                    "UPDATE t SET a = REPEAT('y', 700) WHERE id = 1",
                    "DELETE FROM t WHERE id = 2",
                    f"ALTER TABLE t ADD COLUMN b INT COMMENT '{long_comment}'",
                    "INSERT INTO t VALUES (3, REPEAT('v', 300), 33)",
                    "TRUNCATE TABLE t /* " + "p" * 300 + " */")
        finally:
            run_sql(mysql_params, None, "SET GLOBAL log_bin_compress=OFF")
        events = drain(src)
    finally:
        src.close()
    kinds = _binlog_event_types(mysql_params, first_file)
    assert {"Write_rows_compressed_v1", "Update_rows_compressed_v1", "Delete_rows_compressed_v1", "Query_compressed"} <= kinds
    assert [(e.op, (e.before or {}).get("id"), (e.after or {}).get("id")) for e in events] == [
        (Op.CREATE, None, 1), (Op.CREATE, None, 2), (Op.UPDATE, 1, 1), (Op.DELETE, 2, None), (Op.CREATE, None, 3),
        (Op.TRUNCATE, None, None),
    ]
    assert events[0].after["a"] == "z" * 500 and events[1].after["a"] == "w" * 600
    assert events[2].before["a"] == "z" * 500 and events[2].after["a"] == "y" * 700
    assert events[3].before == {"id": 2, "a": "w" * 600}
    assert events[4].after == {"id": 3, "a": "v" * 300, "b": 33}  # the compressed ALTER was understood


# -- binlog_row_image ----------------------------------------------------------------------------
def test_minimal_row_image_in_one_session_stops_naming_the_setting_table_and_position(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), b INT)", "INSERT INTO t VALUES (1,'a',10)")
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (2,'b',20)",
                "SET SESSION binlog_row_image=MINIMAL", "UPDATE t SET a='A1' WHERE id=1",
                "SET SESSION binlog_row_image=FULL", "INSERT INTO t VALUES (3,'c',30)")
        events, err = _drain_until_error(src, RowImageError)
        stored = src.position
    finally:
        src.close()
    # what came before is delivered; nothing of the update, nothing after it
    assert [(e.op, e.after["id"]) for e in events] == [(Op.CREATE, 2)]
    message = str(err)
    assert "binlog_row_image" in message and f"{db}.t" in message and "UPDATE_ROWS_EVENT_V1" in message
    assert f"{err.file}:{err.pos}" in message and err.table == f"{db}.t" and err.image == "before"
    assert set(err.missing) == {"a", "b"}
    # the position did not move past the refused event: a restart stops there again
    again = _open(mysql_params, db, start=stored)
    try:
        events2, err2 = _drain_until_error(again, RowImageError)
    finally:
        again.close()
    assert events2 == [] and (err2.file, err2.pos) == (err.file, err.pos)


# -- binlog_format -------------------------------------------------------------------------------
def test_statement_format_dml_on_a_captured_table_stops_naming_the_setting_table_and_position(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(20))", "CREATE TABLE other (id INT PRIMARY KEY)")
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db,
                "SET SESSION binlog_format=STATEMENT", "INSERT INTO other VALUES (1)",  # not captured: ignored
                "SET SESSION binlog_format=ROW", "INSERT INTO t VALUES (1,'row')",
                "SET SESSION binlog_format=STATEMENT", "INSERT INTO t VALUES (2,'secret-value')", "UPDATE t SET a='F' WHERE id=2",
                "SET SESSION binlog_format=ROW")
        events, err = _drain_until_error(src, StatementFormatError)
    finally:
        src.close()
    assert [(e.op, e.after["id"]) for e in events] == [(Op.CREATE, 1)]
    message = str(err)
    assert "binlog_format" in message and f"{db}.t" in message and "QUERY_EVENT" in message
    assert f"{err.file}:{err.pos}" in message and err.table == f"{db}.t"
    assert "secret-value" not in message  # the statement's values are not copied into the error


# -- XA ------------------------------------------------------------------------------------------
def test_xa_only_committed_work_is_published(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10))", "INSERT INTO t VALUES (1,'a'),(2,'b')")
    x1, x2, x3 = _xid(), _xid(), _xid()
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db, f"XA START '{x1}'", "INSERT INTO t VALUES (10,'rolled')", "UPDATE t SET a='RB' WHERE id=2",
                f"XA END '{x1}'", f"XA PREPARE '{x1}'")
        run_sql(mysql_params, db, f"XA START '{x2}'", "INSERT INTO t VALUES (20,'kept')", "UPDATE t SET a='K' WHERE id=1",
                f"XA END '{x2}'", f"XA PREPARE '{x2}'")
        assert drain(src) == []  # prepared, not yet committed: nothing is published
        run_sql(mysql_params, db, f"XA COMMIT '{x2}'")
        run_sql(mysql_params, db, f"XA ROLLBACK '{x1}'")
        run_sql(mysql_params, db, f"XA START '{x3}'", "INSERT INTO t VALUES (30,'one')", f"XA END '{x3}'", f"XA COMMIT '{x3}' ONE PHASE")
        events = drain(src)
        assert "xa_prepared" not in src.position
    finally:
        src.close()
    assert [(e.op, e.after["id"], e.after["a"]) for e in events] == [
        (Op.CREATE, 20, "kept"), (Op.UPDATE, 1, "K"), (Op.CREATE, 30, "one"),
    ]


def test_xa_restart_between_prepare_and_commit_publishes_exactly_once(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    x1, x2 = _xid(), _xid()
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db, f"XA START '{x1}'", "INSERT INTO t VALUES (1),(2),(3)", f"XA END '{x1}'", f"XA PREPARE '{x1}'")
        run_sql(mysql_params, db, f"XA START '{x2}'", "INSERT INTO t VALUES (7)", f"XA END '{x2}'", f"XA PREPARE '{x2}'")
        run_sql(mysql_params, db, "INSERT INTO t VALUES (4)")  # committed after the prepares: the position moves past them
        events = drain(src)
        stored = json.loads(json.dumps(src.position))  # as a sink stores it
    finally:
        src.close()
    assert [e.after["id"] for e in events] == [4]
    assert len(stored["xa_prepared"]) == 2
    run_sql(mysql_params, db, f"XA COMMIT '{x1}'")
    run_sql(mysql_params, db, f"XA ROLLBACK '{x2}'")
    run_sql(mysql_params, db, "INSERT INTO t VALUES (5)")
    # restart inside the XA COMMIT's rows as well: after its first row
    again = _open(mysql_params, db, start=stored)
    try:
        first = []
        while not first:
            first = again.poll(1, 0.5)
        mid = json.loads(json.dumps(first[-1].position))
    finally:
        again.close()
    assert [e.after["id"] for e in first] == [1] and mid["row"] == 1 and mid["xa_prepared"]
    third = _open(mysql_params, db, start=mid)
    try:
        rest = drain(third)
        final = third.position
    finally:
        third.close()
    assert [e.after["id"] for e in rest] == [2, 3, 5]  # the committed XA once, the rolled-back one never
    assert "xa_prepared" not in final


def test_xa_commit_of_work_prepared_before_the_start_is_refused(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    x1 = _xid()
    run_sql(mysql_params, db, f"XA START '{x1}'", "INSERT INTO t VALUES (1)", f"XA END '{x1}'", f"XA PREPARE '{x1}'")
    src = _open(mysql_params, db, **{"scan.startup.mode": "latest-offset"})
    try:
        drain(src)
        run_sql(mysql_params, db, f"XA COMMIT '{x1}'")
        _, err = _drain_until_error(src, XaTransactionError)
    finally:
        src.close()
    assert "XA COMMIT" in str(err) and err.xid.startswith(x1.encode().hex())


# -- secrets -------------------------------------------------------------------------------------
def test_account_statements_are_never_logged_published_or_kept_in_errors(mysql_params, database_factory, caplog):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    user, secret = "u" + uuid.uuid4().hex[:8], "pw-" + uuid.uuid4().hex
    caplog.set_level(logging.DEBUG)
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (1)",
                f"CREATE USER '{user}'@'%' IDENTIFIED BY '{secret}'",
                f"ALTER USER '{user}'@'%' IDENTIFIED BY '{secret}2'",
                f"GRANT SELECT ON `{db}`.* TO '{user}'@'%'",
                f"SET PASSWORD FOR '{user}'@'%' = PASSWORD('{secret}3')",
                "INSERT INTO t VALUES (2)",
                "SET SESSION binlog_format=STATEMENT", "INSERT INTO t VALUES (3)", "SET SESSION binlog_format=ROW")
        events, err = _drain_until_error(src, StatementFormatError)
        position = json.dumps(src.position)
    finally:
        src.close()
        run_sql(mysql_params, None, f"DROP USER IF EXISTS '{user}'@'%'")
    binlog_text = json.dumps([list(map(str, r)) for r in _query(mysql_params, f"SHOW BINLOG EVENTS IN '{json.loads(position)['file']}'")])
    assert secret in binlog_text  # the statement really is in the binlog the reader read
    assert [e.after["id"] for e in events] == [1, 2]
    published = json.dumps([[str(e.table), e.op.value, e.before, e.after, e.position] for e in events])
    for text in (caplog.text, published, position, str(err), repr(err.__dict__)):
        assert secret not in text and "IDENTIFIED" not in text


def test_every_event_type_of_the_workloads_is_delivered_or_deliberately_ignored(mysql_params, database_factory):
    """The event types the server wrote for the cases above all have a rule that is not STOP."""
    names = {r.name for r in EVENT_RULES.values() if r.action is not Action.STOP}
    first = _query(mysql_params, "SHOW BINARY LOGS")[0][0]
    shown_as = {  # SHOW BINLOG EVENTS spelling -> policy name
        "Format_desc": "FORMAT_DESCRIPTION_EVENT", "Gtid_list": "GTID_LIST_EVENT", "Binlog_checkpoint": "BINLOG_CHECKPOINT_EVENT",
        "Gtid": "GTID_EVENT", "Query": "QUERY_EVENT", "Annotate_rows": "ANNOTATE_ROWS_EVENT", "Table_map": "TABLE_MAP_EVENT",
        "Write_rows_v1": "WRITE_ROWS_EVENT_V1", "Update_rows_v1": "UPDATE_ROWS_EVENT_V1", "Delete_rows_v1": "DELETE_ROWS_EVENT_V1",
        "Xid": "XID_EVENT", "XA_prepare": "XA_PREPARE_LOG_EVENT", "Rotate": "ROTATE_EVENT", "Stop": "STOP_EVENT",
        "Query_compressed": "QUERY_COMPRESSED_EVENT", "Write_rows_compressed_v1": "WRITE_ROWS_COMPRESSED_EVENT_V1",
        "Update_rows_compressed_v1": "UPDATE_ROWS_COMPRESSED_EVENT_V1", "Delete_rows_compressed_v1": "DELETE_ROWS_COMPRESSED_EVENT_V1",
        "Intvar": "INTVAR_EVENT", "User var": "USER_VAR_EVENT", "RAND": "RAND_EVENT",
    }
    seen = _binlog_event_types(mysql_params, first)
    assert seen, "no binlog events"
    assert {s for s in seen if s not in shown_as} == set(), "an event type without a known policy name"
    assert {shown_as[s] for s in seen} <= names


# -- signal.data.collection naming no table ------------------------------------------------------
def test_a_signal_table_that_does_not_exist_is_warned_about_at_start(mysql_params, database_factory, caplog):
    """A typo in ``signal.data.collection`` would make every signal row silently unseen: the start
    warns naming the option and the table; an existing signal table gives no such warning."""
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)",
            "CREATE TABLE debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048))")
    for signal_table, warned in ((f"{db}.debezium_signals", True), (f"{db}.debezium_signal", False)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="changelake.connectors.mysql_cdc.source"):
            src = _open(mysql_params, db, **{"signal.data.collection": signal_table})
            src.close()
        hits = [r.getMessage() for r in caplog.records if "signal.data.collection" in r.getMessage()]
        assert bool(hits) is warned, hits
        if warned:
            assert f"'{signal_table}': no such table" in hits[0]
