"""Cases V11-V15 (schema at each event, truncate, mid-statement restart, purged binlog, server-id
clash), positions, startup modes and preflight against the real MariaDB."""

from __future__ import annotations

import json
import time

import pymysql
import pytest

from changelake.changelog.event import Op
from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError, SourceError
from changelake.connectors.mysql_cdc import BinlogPurgedError, MySqlSource, ServerIdClashError
from changelake.connectors.mysql_cdc.preflight import check_binlog_settings, read_variables
from mysql_cdc_support import drain, json_row, run_sql, source_options

pytestmark = pytest.mark.integration


def _open(params, db, tables="t", start=None, **extra):
    src = MySqlSource(source_options(params, db, tables, **extra), start)
    src.open()
    return src


def test_v11_schema_at_each_event(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (1,10,20)", "ALTER TABLE t DROP COLUMN a", "INSERT INTO t VALUES (2,30)")
        events = drain(src)
    finally:
        src.close()
    assert [json_row(e.after, e) for e in events] == ['{"id":1,"a":10,"b":20}', '{"id":2,"b":30}']
    assert events[0].schema.names == ["id", "a", "b"] and events[1].schema.names == ["id", "b"]
    assert events[0].schema.primary_key == events[1].schema.primary_key == ("id",)


def test_v12_truncate_is_an_event(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "CREATE TABLE other (id INT PRIMARY KEY)")
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (1),(2)", "TRUNCATE TABLE t", "TRUNCATE other",
                "INSERT INTO other VALUES (9)", "INSERT INTO t VALUES (3)")
        events = drain(src)
    finally:
        src.close()
    assert [(e.op, e.after) for e in events] == [
        (Op.CREATE, {"id": 1}), (Op.CREATE, {"id": 2}), (Op.TRUNCATE, None), (Op.CREATE, {"id": 3})
    ]
    trunc = events[2]
    assert trunc.table == TableId(db, "t") and trunc.before is None and trunc.ts_ms > 0
    assert trunc.to_rows() == []


def test_v13_restart_inside_one_statement_gives_exactly_the_rest(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, pad CHAR(200))")
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db, "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_5000")
        first: list = []
        deadline = time.monotonic() + 60
        while len(first) < 2100:
            first += src.poll(700, 1.0)
            assert time.monotonic() < deadline
        first = first[:2100]  # a batch boundary in the middle of the statement
        stored = json.loads(json.dumps(first[-1].position))  # as a sink would store it
    finally:
        src.close()
    assert stored["phase"] == "binlog" and stored["row"] == 2100
    # every row of the statement names the same transaction start
    assert {e.position["pos"] for e in first} == {stored["pos"]}
    restarted = _open(mysql_params, db, start=stored)
    try:
        rest = drain(restarted)
    finally:
        restarted.close()
    ids = [e.after["id"] for e in first] + [e.after["id"] for e in rest]
    assert all(e.op is Op.CREATE for e in first + rest)
    assert ids == list(range(1, 5001))  # exactly 5000, no duplicate, none lost


def test_v13_restart_after_the_statement_emits_nothing_again(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (1),(2)", "INSERT INTO t VALUES (3)")
        events = drain(src)
        after_all = src.position
    finally:
        src.close()
    assert [e.after["id"] for e in events] == [1, 2, 3]
    for stored, expected in ((events[0].position, [2, 3]), (events[1].position, [3]), (after_all, [])):
        again = _open(mysql_params, db, start=stored)
        try:
            assert [e.after["id"] for e in drain(again)] == expected
        finally:
            again.close()


def _purge_all_but_current(params):
    run_sql(params, None, "FLUSH BINARY LOGS")
    conn = pymysql.connect(host=params["host"], port=params["port"], user=params["user"], password=params["password"], autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            current = cur.fetchone()[0]
            deadline = time.monotonic() + 20
            while True:  # a reader that just closed may still hold an old file for a moment
                cur.execute("PURGE BINARY LOGS TO %s", (current,))
                cur.execute("SHOW BINARY LOGS")
                if [r[0] for r in cur.fetchall()] == [current]:
                    return
                assert time.monotonic() < deadline, "binlogs could not be purged"
                time.sleep(0.5)
    finally:
        conn.close()


def test_v14_purged_position_is_refused_with_a_clear_error(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    src = _open(mysql_params, db)
    try:
        drain(src)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (1)")
        stored = drain(src)[-1].position
    finally:
        src.close()
    _purge_all_but_current(mysql_params)
    restarted = MySqlSource(source_options(mysql_params, db), stored)
    with pytest.raises(BinlogPurgedError) as err:
        restarted.open()
    restarted.close()
    message = str(err.value)
    assert f"{stored['file']}:{stored['pos']}" in message
    assert "no longer on the server" in message and "re-snapshot" in message and "scan.startup.mode" in message
    assert mysql_params["password"] not in message


def _registered_server_ids(params: dict) -> list[int]:
    from changelake.connectors.mysql_cdc.preflight import used_server_ids

    conn = pymysql.connect(host=params["host"], port=params["port"], user=params["user"], password=params["password"])
    try:
        return used_server_ids(conn)
    finally:
        conn.close()


def test_v15_same_server_id_is_refused_and_a_range_takes_the_next_id(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    first = _open(mysql_params, db, **{"server-id": "5690", "scan.startup.mode": "latest-offset"})
    try:
        first.poll(10, 0.5)
        # The binlog reader (a worker process by default) registers with the server on its own
        # time: wait until the server lists it, or the clash below is a race with that start.
        deadline = time.monotonic() + 30
        while 5690 not in _registered_server_ids(mysql_params) and time.monotonic() < deadline:
            first.poll(10, 0.2)
        second = MySqlSource(source_options(mysql_params, db, **{"server-id": "5690", "scan.startup.mode": "latest-offset"}))
        with pytest.raises(ServerIdClashError) as err:
            second.open()
        second.close()
        assert "5690" in str(err.value) and "server-id" in str(err.value)
        third = _open(mysql_params, db, **{"server-id": "5690-5691", "scan.startup.mode": "latest-offset"})
        try:
            assert first.server_id == 5690 and third.server_id == 5691
            run_sql(mysql_params, db, "INSERT INTO t VALUES (1)")
            # both readers keep running, each with its own id
            assert [e.after for e in drain(first)] == [{"id": 1}]
            assert [e.after for e in drain(third)] == [{"id": 1}]
        finally:
            third.close()
    finally:
        first.close()


def test_snapshot_resumes_with_the_remaining_chunks(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE u (k VARCHAR(8) PRIMARY KEY)",
            "INSERT INTO t SELECT seq, seq FROM seq_1_to_250", "INSERT INTO u VALUES ('a'),('b')")
    opts = {"scan.incremental.snapshot.chunk.size": "40", "scan.snapshot.fetch.size": "7"}
    src = _open(mysql_params, db, tables="t,u", **opts)
    try:
        first = src.poll(100, 1.0)
        stored = first[-1].position
    finally:
        src.close()
    assert stored["phase"] == "snapshot" and stored["snapshot"]["tables"][0] == f"{db}.t"
    run_sql(mysql_params, db, "INSERT INTO t VALUES (1000, 1)")  # after the snapshot's position
    again = _open(mysql_params, db, tables="t,u", start=stored, **opts)
    try:
        rest = drain(again)
    finally:
        again.close()
    reads = [e for e in first + rest if e.op is Op.READ]
    assert [e.after["id"] for e in reads if e.table.table == "t"][:250] == list(range(1, 251))
    assert [e.after["k"] for e in reads if e.table.table == "u"] == ["a", "b"]
    # the row inserted after the original snapshot position arrives (as r and/or c: upsert-equivalent)
    assert any(e.after and e.after.get("id") == 1000 for e in rest)
    assert len({e.after["id"] for e in reads if e.table.table == "t"} - {1000}) == 250


def test_initial_snapshot_then_binlog_without_gap(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1),(2)")
    src = _open(mysql_params, db)
    try:
        snap = src.poll(100, 1.0)
        run_sql(mysql_params, db, "INSERT INTO t VALUES (3)", "DELETE FROM t WHERE id = 1")
        rest = drain(src)
    finally:
        src.close()
    assert [(e.op, e.after) for e in snap] == [(Op.READ, {"id": 1}), (Op.READ, {"id": 2})]
    assert [(e.op, e.after or e.before) for e in rest] == [(Op.CREATE, {"id": 3}), (Op.DELETE, {"id": 1})]


def test_tables_selector_and_exclude(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE orders_1 (id INT PRIMARY KEY)", "CREATE TABLE orders_2 (id INT PRIMARY KEY)",
            "CREATE TABLE users (id INT PRIMARY KEY)")
    src = _open(mysql_params, db, tables="ORDERS_\\.*", **{"tables.exclude": f"{db}.orders_2"})
    try:
        assert src.captured_tables == [TableId(db, "orders_1")]
        drain(src)
        run_sql(mysql_params, db, "INSERT INTO orders_1 VALUES (1)", "INSERT INTO orders_2 VALUES (2)", "INSERT INTO users VALUES (3)")
        assert [(e.table.table, e.after) for e in drain(src)] == [("orders_1", {"id": 1})]
    finally:
        src.close()
    missing = MySqlSource(source_options(mysql_params, db, "nope_\\.*"))
    with pytest.raises(OptionValidationError, match=r"Cannot find any table by the option 'tables' = "):
        missing.open()
    missing.close()


def test_preflight_accepts_the_test_server_and_snapshot_mode_finishes(mysql_params, database_factory):
    conn = pymysql.connect(host=mysql_params["host"], port=mysql_params["port"], user=mysql_params["user"],
                           password=mysql_params["password"])
    try:
        variables = read_variables(conn)
    finally:
        conn.close()
    check_binlog_settings(variables)  # ROW / FULL / FULL: no error
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    src = _open(mysql_params, db, **{"scan.startup.mode": "snapshot"})
    try:
        assert [e.after for e in drain(src)] == [{"id": 1}]
        assert src.caught_up() and src.poll(10, 0.1) == []
    finally:
        src.close()


def test_position_beyond_the_end_of_a_file_is_refused(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    probe = _open(mysql_params, db, **{"scan.startup.mode": "latest-offset"})
    try:
        here = probe.position
    finally:
        probe.close()
    bogus = {"phase": "binlog", "file": here["file"], "pos": here["pos"] + 10_000_000, "row": 0}
    src = MySqlSource(source_options(mysql_params, db), bogus)
    with pytest.raises(SourceError, match="beyond the end of that file"):
        src.open()
    src.close()
