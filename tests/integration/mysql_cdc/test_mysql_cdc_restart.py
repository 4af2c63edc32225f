"""Issue 10: the MySQL server restarts under a running binlog reader - it reconnects with back-off
and resumes at its own position (nothing lost, nothing twice), or fails promptly with the cause.

These tests start a MariaDB of their own (the session's server is shared by the other tests)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pymysql
import pytest

from changelake.connectors.mysql_cdc import MySqlSource
from changelake.connectors.mysql_cdc.errors import BinlogConnectionLostError, SnapshotInterruptedError
from changelake.services import MariaDBService, free_port
from mysql_cdc_support import drain, run_sql, source_options

pytestmark = pytest.mark.integration


@pytest.fixture
def own_mariadb(tmp_path: Path):
    if os.environ.get("CHANGELAKE_TEST_MYSQL_HOST"):
        pytest.skip("needs a local MariaDB it may restart")
    server = MariaDBService(home=tmp_path / "mariadb", port=free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _params(server: MariaDBService) -> dict:
    return {"host": "127.0.0.1", "port": server.port, "user": server.user, "password": server.password}


def _kill9(server: MariaDBService) -> None:
    pid = int(server.pid_file.read_text())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def _poll_until(src: MySqlSource, n: int, timeout_s: float) -> list:
    events: list = []
    deadline = time.monotonic() + timeout_s
    while len(events) < n and time.monotonic() < deadline:
        events += src.poll(1000, 0.5)
    return events


@pytest.mark.parametrize("how", ["shutdown", "sigkill"])
def test_server_restart_under_a_running_reader_resumes_with_nothing_lost_or_twice(own_mariadb, how):
    params = _params(own_mariadb)
    run_sql(params, None, "CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY)")
    src = MySqlSource(source_options(params, "r", **{"connect.timeout": "60s"}))
    src.open()
    try:
        drain(src)
        run_sql(params, "r", "INSERT INTO t VALUES (1),(2)")
        before = _poll_until(src, 2, 30)
        if how == "shutdown":
            own_mariadb.stop()
        else:
            _kill9(own_mariadb)
        time.sleep(2)  # down for a few seconds while the reader runs
        assert src.poll(100, 0.5) == []
        own_mariadb.start()
        run_sql(params, "r", "INSERT INTO t VALUES (3)", "INSERT INTO t VALUES (4),(5)")
        after = _poll_until(src, 3, 60)
        after += drain(src, timeout_s=30)
        reconnects = src.binlog_connections - 1
    finally:
        src.close()
    assert [e.after["id"] for e in before + after] == [1, 2, 3, 4, 5]
    assert reconnects >= 1


def test_server_down_longer_than_connect_timeout_fails_promptly_naming_the_cause(own_mariadb):
    params = _params(own_mariadb)
    run_sql(params, None, "CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY)")
    src = MySqlSource(source_options(params, "r", **{"connect.timeout": "3s"}))
    src.open()
    try:
        drain(src)
        own_mariadb.stop()
        t0 = time.monotonic()
        with pytest.raises(BinlogConnectionLostError) as err:
            while time.monotonic() - t0 < 60:
                src.poll(100, 0.5)
        waited = time.monotonic() - t0
    finally:
        src.close()
    assert waited < 20
    assert err.value.attempts >= 2 and "connect.timeout" in str(err.value)
    assert "2003" in err.value.cause or "Can't connect" in err.value.cause or "Lost" in err.value.cause
    assert params["password"] not in str(err.value)


def test_local_services_keep_account_statements_out_of_the_binlog(own_mariadb):
    params = _params(own_mariadb)
    own_mariadb.stop()
    own_mariadb.start()  # the user set-up runs on every start
    conn = pymysql.connect(**params)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            text = ""
            for (name, *_rest) in cur.fetchall():
                cur.execute(f"SHOW BINLOG EVENTS IN '{name}'")
                text += "\n".join(str(r) for r in cur.fetchall())
    finally:
        conn.close()
    assert text  # the binlog is on
    assert params["password"] not in text and "IDENTIFIED" not in text.upper() and "GRANT" not in text.upper()


def test_server_restart_during_the_snapshot_fails_fast_and_a_relaunch_resumes_it(own_mariadb):
    params = _params(own_mariadb)
    run_sql(params, None, "CREATE DATABASE r")
    run_sql(params, "r", "CREATE TABLE t (id INT PRIMARY KEY, pad CHAR(100))", "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_3000")
    opts = {"scan.incremental.snapshot.chunk.size": "200", "scan.snapshot.fetch.size": "50"}
    src = MySqlSource(source_options(params, "r", **opts))
    src.open()
    try:
        first = src.poll(500, 1.0)
        stored = first[-1].position
        own_mariadb.stop()
        t0 = time.monotonic()
        with pytest.raises(SnapshotInterruptedError) as err:
            for _ in range(100):
                more = src.poll(500, 0.5)
                if more:  # rows already fetched before the loss are still valid
                    first += more
                    stored = more[-1].position
        assert time.monotonic() - t0 < 15
    finally:
        src.close()
    assert err.value.table == "r.t" and "Relaunch" in str(err.value)
    own_mariadb.start()
    again = MySqlSource(source_options(params, "r", **opts), stored)
    again.open()
    try:
        rest = drain(again)
    finally:
        again.close()
    ids = [e.after["id"] for e in first + rest]
    assert ids == list(range(1, 3001))  # nothing lost, nothing twice


def test_killed_binlog_connection_reconnects_and_resumes_exactly(mysql_params, database_factory):
    """The server drops the binlog connection (KILL of the dump thread) inside and between transactions."""
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, pad CHAR(50))")
    src = MySqlSource(source_options(mysql_params, db, **{"server-id": "5960"}))
    src.open()

    def kill_dump_thread() -> None:
        conn = pymysql.connect(host=mysql_params["host"], port=mysql_params["port"], user=mysql_params["user"],
                               password=mysql_params["password"], autocommit=True)
        try:
            with conn.cursor() as cur:
                deadline = time.monotonic() + 15
                while True:  # (re)connected and registered
                    cur.execute("SHOW SLAVE HOSTS")
                    if any(int(r[0]) == 5960 for r in cur.fetchall()):
                        break
                    assert time.monotonic() < deadline, "the reader did not reconnect"
                    time.sleep(0.2)
                cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
                for (pid,) in cur.fetchall():
                    try:
                        cur.execute(f"KILL CONNECTION {int(pid)}")
                    except pymysql.err.OperationalError:
                        pass  # another test's reader: it reconnects as well
        finally:
            conn.close()

    try:
        drain(src)
        run_sql(mysql_params, db, "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_3000")
        events = src.poll(50, 5.0)
        kill_dump_thread()
        run_sql(mysql_params, db, "INSERT INTO t VALUES (3001, 'y')")
        kill_dump_thread()
        run_sql(mysql_params, db, "INSERT INTO t VALUES (3002, 'z')")
        deadline = time.monotonic() + 60
        while len(events) < 3002 and time.monotonic() < deadline:
            events += src.poll(1000, 0.5)
        events += drain(src, timeout_s=30)
        reconnects = src.binlog_connections - 1
    finally:
        src.close()
    assert [e.after["id"] for e in events] == list(range(1, 3003))
    assert reconnects >= 2


def test_hung_server_is_noticed_and_fails_the_reader_instead_of_silence(own_mariadb):
    """SIGSTOP: the socket stays open but nothing arrives (no heartbeat): the read times out, the
    reconnects time out, and the reader fails with the cause rather than wait forever."""
    params = _params(own_mariadb)
    run_sql(params, None, "CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY)")
    src = MySqlSource(source_options(params, "r", **{"connect.timeout": "3s"}))
    src.open()
    pid = int(own_mariadb.pid_file.read_text())
    try:
        drain(src)
        os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            with pytest.raises(BinlogConnectionLostError) as err:
                while time.monotonic() - t0 < 90:
                    src.poll(100, 0.5)
            waited = time.monotonic() - t0
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        src.close()
    assert waited < 60 and err.value.attempts >= 1
