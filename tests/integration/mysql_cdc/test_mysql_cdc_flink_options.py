"""Flink CDC's remaining MySQL source options against the real MariaDB: startup modes
(earliest-offset, timestamp, specific-offset by GTID set; a stored position wins), newly added
tables, comments, metadata columns, TINYINT(1), server-time-zone, chunk key column, privileges."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid

import pymysql
import pytest

from changelake.changelog.event import Op
from changelake.changelog.schema import TableId
from changelake.changelog.types import TypeRoot
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.mysql_cdc import MySqlSource, validate_options
from changelake.connectors.mysql_cdc.errors import MissingPrivilegeError, ServerTimeZoneMismatchError
from mysql_cdc_support import drain, run_sql, source_options

pytestmark = pytest.mark.integration


def _open(params, db, tables="t", start=None, **extra):
    src = MySqlSource(source_options(params, db, tables, **extra), start)
    src.open()
    return src


def _read(params, db, tables="t", start=None, **extra):
    src = _open(params, db, tables, start, **extra)
    try:
        return drain(src), json.loads(json.dumps(src.position))
    finally:
        src.close()


def _ids(events, op=None):
    return [(e.after or e.before)["id"] for e in events if op is None or e.op is op]


def _query(params, sql):
    conn = pymysql.connect(host=params["host"], port=params["port"], user=params["user"], password=params["password"])
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchone()
    finally:
        conn.close()


# -- scan.startup.mode ----------------------------------------------------------------------------


def test_earliest_offset_reads_the_oldest_binlog_without_snapshot(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1),(2)", "DELETE FROM t WHERE id = 1")
    events, _ = _read(mysql_params, db, **{"scan.startup.mode": "earliest-offset"})
    assert [(e.op, _ids([e])[0]) for e in events] == [(Op.CREATE, 1), (Op.CREATE, 2), (Op.DELETE, 1)]


def test_timestamp_starts_at_the_first_change_at_or_after_it(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    # binlog timestamps have second resolution: start at the next full second
    ts_ms = (int(time.time()) + 1) * 1000
    time.sleep(ts_ms / 1000 - time.time() + 0.05)
    run_sql(mysql_params, db, "INSERT INTO t VALUES (2)", "UPDATE t SET id = 3 WHERE id = 1")
    events, _ = _read(mysql_params, db, **{"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": str(ts_ms)})
    assert [(e.op, (e.after or e.before)["id"]) for e in events] == [(Op.CREATE, 2), (Op.UPDATE, 3)]
    assert all(e.ts_ms >= ts_ms for e in events)


def test_specific_offset_by_gtid_set_starts_after_that_transaction(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    (gtid_pos,) = _query(mysql_params, "SELECT @@gtid_binlog_pos")
    run_sql(mysql_params, db, "INSERT INTO t VALUES (2)", "INSERT INTO t VALUES (3)")
    events, _ = _read(mysql_params, db, **{"scan.startup.mode": "specific-offset",
                                           "scan.startup.specific-offset.gtid-set": gtid_pos})
    assert _ids(events) == [2, 3]


def test_gtid_set_is_validated():
    base = {"hostname": "h", "username": "u", "password": "", "tables": "d.t", "scan.startup.mode": "specific-offset"}
    with pytest.raises(OptionValidationError, match="domain-server-seq"):
        validate_options({**base, "scan.startup.specific-offset.gtid-set": "3E11FA47-71CA:1-5"})
    with pytest.raises(OptionValidationError, match="only one domain"):
        validate_options({**base, "scan.startup.specific-offset.gtid-set": "0-1-5,1-2-7"})
    with pytest.raises(OptionValidationError, match="gtid-set"):
        validate_options(base)
    with pytest.raises(OptionValidationError, match="timestamp-millis"):
        validate_options({**base, "scan.startup.mode": "timestamp"})


def test_a_stored_position_wins_over_the_startup_mode(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    _, stored = _read(mysql_params, db, **{"scan.startup.mode": "latest-offset"})
    run_sql(mysql_params, db, "INSERT INTO t VALUES (2)")
    for mode in ("earliest-offset", "initial", "latest-offset"):
        events, _ = _read(mysql_params, db, start=stored, **{"scan.startup.mode": mode})
        assert [(e.op, _ids([e])[0]) for e in events] == [(Op.CREATE, 2)], mode


# -- scan.newly-added-table.enabled ---------------------------------------------------------------


def test_newly_added_table_is_snapshotted_then_streamed_others_keep_streaming(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t1 (id INT PRIMARY KEY)", "CREATE TABLE t2 (id INT PRIMARY KEY)",
            "INSERT INTO t1 VALUES (1)", "INSERT INTO t2 VALUES (1),(2)")
    events, stored = _read(mysql_params, db, tables="t1")
    assert [(str(e.table), e.op) for e in events] == [(f"{db}.t1", Op.READ)]
    assert stored["tables"] == [f"{db}.t1"]
    run_sql(mysql_params, db, "INSERT INTO t1 VALUES (10)", "INSERT INTO t2 VALUES (3)")

    both = f"t1,{db}.t2"
    events, stored2 = _read(mysql_params, db, both, stored, **{"scan.newly-added-table.enabled": "true"})
    t1 = [(e.op, _ids([e])[0]) for e in events if e.table.table == "t1"]
    t2 = [(e.op, _ids([e])[0]) for e in events if e.table.table == "t2"]
    assert t1 == [(Op.CREATE, 10)]  # not snapshotted again, streamed from the stored position
    assert [i for op, i in t2 if op is Op.READ] == [1, 2, 3]  # snapshot first ...
    assert events[0].op is Op.READ and events[0].table.table == "t2"
    assert {i for _, i in t2} == {1, 2, 3}  # ... then the binlog (row 3 again by key)
    assert stored2["tables"] == [f"{db}.t1", f"{db}.t2"]

    run_sql(mysql_params, db, "INSERT INTO t2 VALUES (4)")
    events, _ = _read(mysql_params, db, both, stored2, **{"scan.newly-added-table.enabled": "true"})
    assert [(e.table.table, e.op, _ids([e])[0]) for e in events] == [("t2", Op.CREATE, 4)]


def test_without_the_option_a_new_table_is_only_streamed(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t1 (id INT PRIMARY KEY)", "CREATE TABLE t2 (id INT PRIMARY KEY)",
            "INSERT INTO t2 VALUES (1)")
    _, stored = _read(mysql_params, db, tables="t1")
    run_sql(mysql_params, db, "INSERT INTO t2 VALUES (2)")
    events, _ = _read(mysql_params, db, f"t1,{db}.t2", stored)
    assert [(e.table.table, e.op, _ids([e])[0]) for e in events] == [("t2", Op.CREATE, 2)]


# -- schema options ----------------------------------------------------------------------------------


def test_include_comments_in_snapshot_and_binlog_schemas(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY COMMENT 'the key', v VARCHAR(5)) COMMENT 'orders'",
            "INSERT INTO t VALUES (1, 'a')")
    src = _open(mysql_params, db, **{"include-comments.enabled": "true"})
    try:
        snap = drain(src)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (2, 'b')")
        binlog = drain(src)
    finally:
        src.close()
    for e in (snap[0], binlog[0]):
        assert e.schema.comment == "orders"
        assert [(c.name, c.comment) for c in e.schema.columns] == [("id", "the key"), ("v", None)]
    plain, _ = _read(mysql_params, db, **{"scan.startup.mode": "snapshot"})
    assert plain[0].schema.comment is None and plain[0].schema.columns[0].comment is None


def test_metadata_columns(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
    src = _open(mysql_params, db, **{"metadata.list": "op_ts,database_name,table_name,row_kind"})
    try:
        snap = drain(src)
        run_sql(mysql_params, db, "UPDATE t SET v = 2", "DELETE FROM t")
        binlog = drain(src)
    finally:
        src.close()
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    assert snap[0].after == {"id": 1, "v": 1, "op_ts": epoch, "database_name": db, "table_name": "t", "row_kind": "+I"}
    upd, dele = binlog
    assert upd.before["row_kind"] == "-U" and upd.after["row_kind"] == "+U" and dele.before["row_kind"] == "-D"
    assert upd.after["op_ts"] == epoch + dt.timedelta(milliseconds=upd.ts_ms) and upd.ts_ms > 0
    assert upd.schema.names == ["id", "v", "op_ts", "database_name", "table_name", "row_kind"]
    assert upd.schema.column("op_ts").type.root is TypeRoot.TIMESTAMP_LTZ and upd.schema.primary_key == ("id",)
    with pytest.raises(OptionValidationError, match="op_ts, database_name, table_name, row_kind"):
        validate_options({"hostname": "h", "username": "u", "password": "", "tables": "d.t", "metadata.list": "op_ts,source"})


@pytest.mark.parametrize("enabled", [None, "false"])
def test_treat_tinyint1_as_boolean(mysql_params, database_factory, enabled):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, f TINYINT(1))", "INSERT INTO t VALUES (1, 1)")
    extra = {"treat-tinyint1-as-boolean.enabled": enabled} if enabled else {}
    src = _open(mysql_params, db, **extra)
    try:
        snap = drain(src)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (2, 0)")
        binlog = drain(src)
    finally:
        src.close()
    expected_root, values = (TypeRoot.BOOLEAN, (True, False)) if enabled is None else (TypeRoot.TINYINT, (1, 0))
    assert [snap[0].after["f"], binlog[0].after["f"]] == list(values)
    assert all(type(v) is type(values[0]) for v in (snap[0].after["f"], binlog[0].after["f"]))
    assert snap[0].schema.column("f").type.root is binlog[0].schema.column("f").type.root is expected_root


def test_server_time_zone_is_checked_against_the_server(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    (offset,) = _query(mysql_params, "SELECT TIME_TO_SEC(TIMEDIFF(NOW(), UTC_TIMESTAMP()))")
    right = "UTC" if int(offset) == 0 else f"Etc/GMT{-int(offset) // 3600:+d}"
    wrong = "Asia/Kathmandu"  # +05:45, no daylight saving time
    _read(mysql_params, db, **{"server-time-zone": right})
    with pytest.raises(ServerTimeZoneMismatchError, match="does not match the configured timezone Asia/Kathmandu") as err:
        _open(mysql_params, db, **{"server-time-zone": wrong})
    assert err.value.configured_offset_s == 20700 and err.value.server_offset_s == int(offset)


# -- scan.incremental.snapshot.chunk.key-column ------------------------------------------------------


def test_chunk_key_column_without_primary_key_reads_every_row_once(mysql_params, database_factory):
    db = database_factory()
    rows = [(i, k) for i, k in enumerate([5, 1, 1, 1, None, 3, 3, 2, None, 9, 9, 9, 9], start=1)]
    run_sql(mysql_params, db, "CREATE TABLE t (n INT, k INT)",
            "INSERT INTO t VALUES " + ",".join(f"({n},{'NULL' if k is None else k})" for n, k in rows))
    opts = {"scan.startup.mode": "snapshot", "scan.incremental.snapshot.chunk.size": "2",
            "scan.incremental.snapshot.chunk.key-column": f"{db}.t:k"}
    events, _ = _read(mysql_params, db, **opts)
    assert sorted(e.after["n"] for e in events) == [n for n, _ in rows]
    # ranges of 2 smallest values, the boundary's duplicates included (NULLs with the first):
    # {NULL, 1}, (1, 3], (3, 9] -- not ordered inside a range
    keys = [e.after["k"] for e in events]
    assert [set(keys[:5]), sorted(keys[5:8]), keys[8:]] == [{None, 1}, [2, 3, 3], [5, 9, 9, 9, 9]]


def test_chunk_key_column_with_primary_key_orders_by_it_and_resumes(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL)",
            "INSERT INTO t SELECT seq, 100 - (seq % 7) FROM seq_1_to_50")
    opts = {"scan.startup.mode": "snapshot", "scan.incremental.snapshot.chunk.size": "4",
            "scan.incremental.snapshot.chunk.key-column": f"{db}.t:k"}
    src = _open(mysql_params, db, **opts)
    try:
        first = src.poll(23, 1.0)
        stored = json.loads(json.dumps(src.position))
    finally:
        src.close()
    rest, _ = _read(mysql_params, db, start=stored, **opts)
    got = [(e.after["k"], e.after["id"]) for e in first + rest]
    assert got == sorted((100 - (i % 7), i) for i in range(1, 51))


def test_chunk_key_column_must_exist(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(Exception, match="does not have"):
        _read(mysql_params, db, **{"scan.incremental.snapshot.chunk.key-column": f"{db}.t:nope"})


# -- least privilege -----------------------------------------------------------------------------------


@pytest.fixture
def make_user(mysql_params):
    made: list[str] = []

    def make(db: str, *grants: str) -> dict:
        name = f"cdc_{uuid.uuid4().hex[:8]}"
        stmts = [f"CREATE USER '{name}'@'%' IDENTIFIED BY 'pw'"] + [g.format(user=f"'{name}'@'%'", db=db) for g in grants]
        run_sql(mysql_params, None, *stmts)
        made.append(name)
        return {**mysql_params, "user": name, "password": "pw"}

    yield make
    for name in made:
        run_sql(mysql_params, None, f"DROP USER IF EXISTS '{name}'@'%'")


def test_least_privilege_user_can_snapshot_and_stream(mysql_params, database_factory, make_user):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "CREATE TABLE secret (id INT PRIMARY KEY)",
            "INSERT INTO t VALUES (1)")
    user = make_user(db, "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {user}", "GRANT SELECT ON `{db}`.`t` TO {user}")
    src = _open(user, db)
    try:
        snap = drain(src)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (2)")
        binlog = drain(src)
    finally:
        src.close()
    assert (_ids(snap), _ids(binlog)) == ([1], [2])


@pytest.mark.parametrize("grants, missing", [
    (["GRANT SELECT ON *.* TO {user}"], ["REPLICATION SLAVE", "BINLOG MONITOR"]),
    (["GRANT SELECT, REPLICATION SLAVE ON *.* TO {user}"], ["BINLOG MONITOR"]),
    (["GRANT SELECT, BINLOG MONITOR ON *.* TO {user}"], ["REPLICATION SLAVE"]),
    (["GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {user}", "GRANT INSERT ON `{db}`.* TO {user}"], ["SELECT"]),
])
def test_a_missing_privilege_is_named(mysql_params, database_factory, make_user, grants, missing):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    user = make_user(db, *grants)
    with pytest.raises(MissingPrivilegeError) as err:
        _open(user, db)
    assert list(err.value.missing) == missing
    for priv in missing:
        assert priv in str(err.value)
    assert user["user"] in str(err.value) and "pw" not in str(err.value)
