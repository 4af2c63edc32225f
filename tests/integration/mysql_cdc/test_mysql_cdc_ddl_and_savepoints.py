"""Issue 17 at the source: a ``timestamp`` start before the oldest binlog is refused (as a GTID
start already is), and savepoints inside XA transactions beside a non-transactional table."""

from __future__ import annotations

import time
import uuid

import pymysql
import pytest

from changelake.changelog.event import Op
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc import MySqlSource
from mysql_cdc_support import drain, run_sql, source_options

pytestmark = pytest.mark.integration


def _purge_all_but_current(params):
    run_sql(params, None, "FLUSH BINARY LOGS")
    conn = pymysql.connect(host=params["host"], port=params["port"], user=params["user"], password=params["password"],
                           autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            current = cur.fetchone()[0]
            deadline = time.monotonic() + 20
            while True:  # a reader that just closed may still hold an old file for a moment
                cur.execute("PURGE BINARY LOGS TO %s", (current,))
                cur.execute("SHOW BINARY LOGS")
                if [r[0] for r in cur.fetchall()] == [current]:
                    return current
                assert time.monotonic() < deadline, "binlogs could not be purged"
                time.sleep(0.5)
    finally:
        conn.close()


def test_timestamp_before_the_oldest_binlog_is_refused_with_the_oldest_position(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    before_ms = int(time.time() * 1000) - 1000
    run_sql(mysql_params, db, "INSERT INTO t VALUES (1)")  # committed after the timestamp, then purged
    time.sleep(1.1)  # binlog timestamps have second resolution: the new file opens after the insert
    oldest = _purge_all_but_current(mysql_params)
    src = MySqlSource(source_options(mysql_params, db, **{"scan.startup.mode": "timestamp",
                                                          "scan.startup.timestamp-millis": str(before_ms)}))
    with pytest.raises(SourceError) as err:
        src.open()
    src.close()
    message = str(err.value)
    assert f"{oldest}:4" in message and str(before_ms) in message and "purged" in message
    assert mysql_params["password"] not in message
    # a timestamp inside the remaining binlog still starts, at the first change at or after it
    time.sleep(1.1)
    inside_ms = (int(time.time()) + 1) * 1000
    time.sleep(inside_ms / 1000 - time.time() + 0.05)
    run_sql(mysql_params, db, "INSERT INTO t VALUES (2)")
    ok = MySqlSource(source_options(mysql_params, db, **{"scan.startup.mode": "timestamp",
                                                         "scan.startup.timestamp-millis": str(inside_ms)}))
    ok.open()
    try:
        events = drain(ok)
    finally:
        ok.close()
    assert [(e.op, e.after["id"]) for e in events] == [(Op.CREATE, 2)]


def test_savepoints_inside_xa_transactions_drop_what_followed_them(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB",
            "CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=Aria TRANSACTIONAL=0")
    x1, x2 = "x" + uuid.uuid4().hex[:10], "x" + uuid.uuid4().hex[:10]
    src = MySqlSource(source_options(mysql_params, db, "t|m"))
    src.open()
    try:
        drain(src)
        run_sql(mysql_params, db, f"XA START '{x1}'", "INSERT INTO t VALUES (1,'kept')", "SAVEPOINT s1",
                "INSERT INTO t VALUES (2,'gone')", "INSERT INTO m VALUES (3,'nontx')", "ROLLBACK TO SAVEPOINT s1",
                "INSERT INTO t VALUES (4,'kept')", f"XA END '{x1}'", f"XA PREPARE '{x1}'", f"XA COMMIT '{x1}'")
        run_sql(mysql_params, db, f"XA START '{x2}'", "SAVEPOINT s1", "INSERT INTO t VALUES (5,'gone')",
                "INSERT INTO m VALUES (6,'nontx')", "ROLLBACK TO s1", "INSERT INTO t VALUES (7,'kept')",
                f"XA END '{x2}'", f"XA COMMIT '{x2}' ONE PHASE")
        events = drain(src)
    finally:
        src.close()
    assert sorted((e.table.table, e.after["id"]) for e in events) == [("m", 3), ("m", 6), ("t", 1), ("t", 4), ("t", 7)]
