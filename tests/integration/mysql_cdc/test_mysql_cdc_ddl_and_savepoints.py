"""Issue 17 at the source: a ``timestamp`` start before the oldest binlog is refused (as a GTID
start already is), savepoints inside XA transactions beside a non-transactional table, and
TRUNCATE / DROP / ALTER in the middle of both snapshot modes."""

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


# -- DDL in the middle of a snapshot, both snapshot modes ------------------------------------------
def _fold(events):
    state = {}
    for e in events:
        if e.op is Op.TRUNCATE:
            state.clear()
            continue
        if e.before is not None:
            state.pop(e.before["id"], None)
        if e.after is not None:
            state[e.after["id"]] = e.after.get("v")
    return state


def _mysql(params, db):
    conn = pymysql.connect(host=params["host"], port=params["port"], user=params["user"], password=params["password"],
                           database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, v FROM t")
            return {int(r[0]): int(r[1]) for r in cur.fetchall()}
    finally:
        conn.close()


@pytest.mark.parametrize("repeat", [1, 2, 3])  # the DDL lands at a different moment of the chunks each time
@pytest.mark.parametrize("mode", [{}, {"scan.incremental.snapshot.enabled": "true",
                                       "scan.incremental.snapshot.chunk.size": "200"}], ids=["lock-free", "incremental"])
@pytest.mark.parametrize("ddl", [
    ["TRUNCATE TABLE t", "INSERT INTO t VALUES (100001, 1), (100002, 2)"],
    ["ALTER TABLE t ADD COLUMN w INT", "INSERT INTO t VALUES (100003, 3, 30)", "UPDATE t SET v = v + 1 WHERE id <= 10"],
    ["DROP TABLE t", "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (7, 70)"],
], ids=["truncate", "alter", "drop"])
def test_ddl_in_the_middle_of_a_snapshot_leaves_the_changelog_equal_to_mysql(mysql_params, database_factory, mode, ddl,
                                                                             repeat):
    import threading

    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)",
            "INSERT INTO t SELECT seq, seq FROM seq_1_to_3000")
    run_sql(mysql_params, db, "CREATE TABLE other (id INT PRIMARY KEY)")
    src = MySqlSource(source_options(mysql_params, db, "t|other", **{"scan.snapshot.fetch.size": "100", **mode}))
    src.open()
    events = []
    try:
        events += src.poll(300, 0.5)  # part of the snapshot
        assert src.position is None or src.position.get("phase") == "snapshot"
        done = threading.Event()
        errors = []

        def run_ddl():
            try:
                run_sql(mysql_params, db, *ddl)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                done.set()

        worker = threading.Thread(target=run_ddl, daemon=True)
        worker.start()
        deadline = time.monotonic() + 120
        while not (done.is_set() and src.caught_up()):
            events += src.poll(500, 0.3)
            assert time.monotonic() < deadline, "not caught up"
        events += drain(src)
        assert not errors, errors
    finally:
        src.close()
    assert _fold([e for e in events if e.table.table == "t"]) == _mysql(mysql_params, db)
    if ddl[0].startswith("DROP"):
        assert any(e.is_drop for e in events)


@pytest.mark.parametrize("parallel", [False, True], ids=["one-reader", "three-readers"])
@pytest.mark.parametrize("ddl", [
    ["TRUNCATE TABLE t", "INSERT INTO t VALUES (100001, 1), (2500, 2)"],
    ["DROP TABLE t", "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (7, 70), (2600, 26)"],
], ids=["truncate", "drop"])
def test_truncate_between_incremental_snapshot_chunks_keeps_the_rows_written_after_it(mysql_params, database_factory,
                                                                                       ddl, parallel):
    """The TRUNCATE (DROP) lands after the first chunks were read and before the others: the chunks
    read after it hold the new rows, which the truncate replayed from the binlog must not wipe."""
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)",
            "INSERT INTO t SELECT seq, seq FROM seq_1_to_3000")
    mode = {"scan.incremental.snapshot.enabled": "true", "scan.incremental.snapshot.chunk.size": "200",
            "scan.snapshot.fetch.size": "100", **({"server-id": "5400-5402"} if parallel else {})}
    src = MySqlSource(source_options(mysql_params, db, "t", **mode))
    src.open()
    try:
        events = src.poll(300, 0.5)  # chunks 1-2 (and those read ahead) are read before the DDL
        assert len(events) == 300 and src.position.get("phase") == "snapshot"
        run_sql(mysql_params, db, *ddl)
        events += drain(src)
    finally:
        src.close()
    reads_after = [e.after["id"] for e in events[300:] if e.op is Op.READ]
    assert reads_after and max(reads_after) >= 2500  # a chunk read after the DDL holds a new row
    assert [e.op for e in events].count(Op.TRUNCATE) == 1
    assert _fold(events) == _mysql(mysql_params, db)


def test_a_filter_that_no_longer_fits_a_changed_table_names_its_signal(mysql_params, database_factory):
    """The ad-hoc snapshot checks its ``additional-conditions`` again when it (re)opens: after an
    ALTER dropped the filtered column, the error names the signal, the table and the filter."""
    from changelake.connectors.mysql_cdc.positions import SnapshotProgress
    from changelake.connectors.mysql_cdc.snapshot.conditions import AdditionalConditionError
    from changelake.connectors.mysql_cdc.snapshot.reader import SnapshotReader

    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY, c INT)", "INSERT INTO t VALUES (1, 1), (2, 2)",
            "ALTER TABLE t DROP COLUMN c")  # after the signal's check, before the snapshot (re)opens
    opts = source_options(mysql_params, db)
    reader = SnapshotReader(opts.connection_kwargs(), SnapshotProgress((f"{db}.t",)), 100, 100,
                            conditions={f"{db}.t": ["c > 1"]}, signal_id="sig-17")
    try:
        with pytest.raises(AdditionalConditionError) as err:
            reader.open()
    finally:
        reader.close()
    assert err.value.signal_id == "sig-17" and err.value.table == f"{db}.t"
    assert "'sig-17'" in str(err.value) and "c > 1" in str(err.value)


@pytest.mark.parametrize("mode", ["specific-offset-file-pos", "specific-offset-gtid"])
def test_a_specific_offset_start_in_purged_binlogs_is_refused_with_the_oldest_position(mysql_params, database_factory,
                                                                                        mode):
    """As the ``timestamp`` start above (and a stored position, test_mysql_cdc_binlog.py): a
    ``specific-offset`` start (file/pos or GTID) whose changes after it were purged is refused,
    naming the oldest position the server still has; nothing is read."""
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT PRIMARY KEY)")
    conn = pymysql.connect(host=mysql_params["host"], port=mysql_params["port"], user=mysql_params["user"],
                           password=mysql_params["password"], autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
            cur.execute("SELECT @@gtid_binlog_pos")
            gtid = cur.fetchone()[0]
    finally:
        conn.close()
    run_sql(mysql_params, db, "INSERT INTO t VALUES (1)")  # after the start position, then purged
    oldest = _purge_all_but_current(mysql_params)
    assert oldest != file
    extra = ({"scan.startup.specific-offset.file": file, "scan.startup.specific-offset.pos": str(pos)}
             if mode == "specific-offset-file-pos" else {"scan.startup.specific-offset.gtid-set": gtid.split(",")[-1]})
    src = MySqlSource(source_options(mysql_params, db, **{"scan.startup.mode": "specific-offset", **extra}))
    with pytest.raises(SourceError) as err:
        src.open()
    src.close()
    message = str(err.value)
    assert f"oldest position {oldest}:4" in message and "purged" in message
    assert (f"{file}:{pos}" if mode == "specific-offset-file-pos" else "specific-offset.gtid-set") in message
    assert mysql_params["password"] not in message
