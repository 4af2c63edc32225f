"""``scan.incremental.snapshot.enabled``: Flink CDC's chunked snapshot with low/high watermarks,
against the real MariaDB: concurrent writes while the chunks are read, parallel chunk readers, a
restart in the middle of a chunk, and the memory bound."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pymysql
import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc import MySqlSource
from changelake.connectors.mysql_cdc.errors import SnapshotInterruptedError
from changelake.connectors.mysql_cdc.options import MySqlSourceOptions
from changelake.connectors.mysql_cdc.snapshot import incremental
from changelake.services import MariaDBService, free_port
from mysql_cdc_support import drain, run_sql, source_options

ROWS = 6000


def _incremental(params: dict, db: str, **extra: str) -> MySqlSourceOptions:
    opts = {"scan.incremental.snapshot.enabled": "true", "scan.incremental.snapshot.chunk.size": "250",
            "scan.snapshot.fetch.size": "100"}
    opts.update(extra)
    return source_options(params, db, **opts)


def _table(params: dict, db: str, rows: int = ROWS, gaps: bool = False) -> None:
    run_sql(params, db, "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(40))",
            f"INSERT INTO t SELECT seq * {7 if gaps else 1}, seq, REPEAT('x', seq % 40) FROM seq_1_to_{rows}")


def _mysql_state(params: dict, db: str) -> dict[int, tuple[int, str | None]]:
    conn = pymysql.connect(host=params["host"], port=params["port"], user=params["user"],
                           password=params["password"], database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, v, pad FROM t")
            return {int(r[0]): (int(r[1]), r[2]) for r in cur.fetchall()}
    finally:
        conn.close()


def _fold(events: list[DataChangeEvent]) -> dict[int, tuple[int, str | None]]:
    """The changelog applied by key, failing on what an exact changelog cannot contain: an insert
    (+I/r) of a key already present, an update or delete of a key absent."""
    state: dict[int, tuple[int, str | None]] = {}
    for i, e in enumerate(events):
        if e.op is Op.TRUNCATE:
            state.clear()
            continue
        if e.before is not None:
            key = e.before["id"]
            assert key in state, f"event {i} ({e.op.value}) changes key {key}, which is not there"
            del state[key]
        if e.after is not None:
            key = e.after["id"]
            assert key not in state, f"event {i} ({e.op.value}) inserts key {key} twice"
            state[key] = (e.after["v"], e.after["pad"])
    return state


class _Writer(threading.Thread):
    """INSERT / UPDATE (also of the primary key, moving rows between chunks) / DELETE at random
    keys until stopped; every statement autocommitted."""

    def __init__(self, params: dict, db: str, seed: int, key_space: int) -> None:
        super().__init__(daemon=True)
        self.params, self.db, self.rng, self.key_space = params, db, random.Random(seed), key_space
        self.stop = threading.Event()
        self.done = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        conn = pymysql.connect(host=self.params["host"], port=self.params["port"], user=self.params["user"],
                               password=self.params["password"], database=self.db, autocommit=True)
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    k = self.rng.randint(1, self.key_space)
                    op = self.rng.random()
                    if op < 0.3:
                        cur.execute("INSERT IGNORE INTO t VALUES (%s, %s, 'ins')", (self.key_space + k, k))
                    elif op < 0.65:
                        cur.execute("UPDATE t SET v = v + 1, pad = 'upd' WHERE id = %s", (k,))
                    elif op < 0.75:  # a primary-key change: the row moves to another chunk
                        cur.execute("UPDATE IGNORE t SET id = %s WHERE id = %s", (3 * self.key_space + k, k))
                    else:
                        cur.execute("DELETE FROM t WHERE id = %s", (k,))
                    self.done += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            conn.close()


def _run_with_writer(params: dict, db: str, opts: dict[str, str], src_events: list[DataChangeEvent],
                     src: MySqlSource, writer: _Writer, snapshot_polls: int | None = None) -> None:
    writer.start()
    try:
        polls = 0
        while src.position is None or src.position.get("phase") == "snapshot":
            src_events += src.poll(200, 0.5)
            polls += 1
            if snapshot_polls is not None and polls >= snapshot_polls:
                return
            time.sleep(0.01)  # leave the writer time between chunks
    finally:
        writer.stop.set()
        writer.join()
    assert writer.error is None, writer.error


def test_concurrent_writes_while_chunks_are_read_in_parallel_end_exactly_at_the_table(mysql_params, database_factory):
    db = database_factory()
    _table(mysql_params, db)
    opts = _incremental(mysql_params, db, **{"server-id": "5700-5703"})
    src = MySqlSource(opts)
    src.open()
    events: list[DataChangeEvent] = []
    writer = _Writer(mysql_params, db, seed=9, key_space=ROWS)
    try:
        _run_with_writer(mysql_params, db, opts, events, src, writer)
        events += drain(src)
        stats = dict(src.snapshot_stats)
    finally:
        src.close()
    assert writer.done > 100, "the writer must have run during the snapshot"
    assert stats["parallelism"] == 4
    assert stats["chunks"] >= ROWS // 250
    # rows inserted above the max during the snapshot are chunked too: buffers stay bounded
    assert stats["peak_buffered_rows"] <= 4 * 300, stats  # 4 readers x ~250 rows (+ inserts into a chunk)
    assert stats["backfills"] > 0, stats  # some chunks saw changes between their watermarks
    reads = [e for e in events if e.op is Op.READ]
    assert len({e.after["id"] for e in reads}) == len(reads)
    assert _fold(events) == _mysql_state(mysql_params, db)


def test_restart_in_the_middle_of_a_chunk_while_writing_resumes_without_loss_or_duplicate(mysql_params, database_factory):
    db = database_factory()
    _table(mysql_params, db, gaps=True)  # ids 7, 14, ...: still split evenly (factor 7)
    opts = _incremental(mysql_params, db, **{"server-id": "5710-5711"})
    first: list[DataChangeEvent] = []
    src = MySqlSource(opts)
    src.open()
    writer = _Writer(mysql_params, db, seed=3, key_space=7 * ROWS)
    try:
        _run_with_writer(mysql_params, db, opts, first, src, writer, snapshot_polls=8)
        more = src.poll(137, 0.5)  # stop inside a chunk (250 rows each)
        first += more
    finally:
        src.close()
    assert first and first[-1].op is Op.READ, "the restart must fall inside the snapshot"
    stored = first[-1].position
    assert stored["phase"] == "snapshot" and stored["snapshot"]["marks"]["current"] is not None
    assert len(str(stored)) < 4000, "the position keeps chunk marks, not rows"
    run_sql(mysql_params, db, "UPDATE t SET v = -1 WHERE id % 13 = 0", "DELETE FROM t WHERE id % 17 = 0",
            "INSERT INTO t SELECT 900000 + seq, seq, 'late' FROM seq_1_to_50")
    again = MySqlSource(opts, stored)
    again.open()
    writer2 = _Writer(mysql_params, db, seed=4, key_space=7 * ROWS)
    rest: list[DataChangeEvent] = []
    try:
        _run_with_writer(mysql_params, db, opts, rest, again, writer2)
        rest += drain(again)
        # a second restart in the binlog phase keeps filtering by the chunks' high watermarks
        mid = again.position
    finally:
        again.close()
    assert writer2.done > 0
    read_ids = [e.after["id"] for e in first + rest if e.op is Op.READ]
    assert len(read_ids) == len(set(read_ids)), "a row snapshotted twice"
    assert _fold(first + rest) == _mysql_state(mysql_params, db)
    assert mid is not None and mid["phase"] == "binlog"


def test_binlog_restart_before_the_largest_high_watermark_keeps_filtering(mysql_params, database_factory):
    db = database_factory()
    _table(mysql_params, db, rows=3000)
    opts = _incremental(mysql_params, db, **{"server-id": "5720-5722"})
    src = MySqlSource(opts)
    src.open()
    events: list[DataChangeEvent] = []
    writer = _Writer(mysql_params, db, seed=5, key_space=3000)
    try:
        _run_with_writer(mysql_params, db, opts, events, src, writer)
        # the first binlog events after the snapshot: their positions carry the watermarks
        restart_at = None
        deadline = time.monotonic() + 30
        while restart_at is None and time.monotonic() < deadline:
            for e in src.poll(50, 0.5):
                events.append(e)
                if "watermarks" in (e.position or {}):
                    restart_at = len(events)
                    break
    finally:
        src.close()
    if restart_at is None:
        pytest.skip("no binlog event before the largest high watermark in this run")
    kept = events[:restart_at]
    again = MySqlSource(opts, kept[-1].position)
    again.open()
    try:
        rest = drain(again)
    finally:
        again.close()
    assert _fold(kept + rest) == _mysql_state(mysql_params, db)


def test_quiet_table_reads_every_row_once_with_bounded_buffers_and_no_backfill(mysql_params, database_factory):
    db = database_factory()
    _table(mysql_params, db, rows=5000)
    opts = _incremental(mysql_params, db, **{"server-id": "5730-5732", "scan.startup.mode": "snapshot",
                                             "scan.incremental.snapshot.chunk.size": "200"})
    src = MySqlSource(opts)
    src.open()
    try:
        events = drain(src)
        stats = dict(src.snapshot_stats)
    finally:
        src.close()
    assert [e.after["id"] for e in events] == list(range(1, 5001))  # key order, each once
    assert stats["backfills"] == 0 and stats["parallelism"] == 3
    assert 0 < stats["peak_buffered_rows"] <= 200 * 3


def test_uneven_keys_are_split_by_queries_and_read_whole(mysql_params, database_factory):
    db = database_factory()
    # two dense clusters far apart: distribution factor far above the upper bound
    run_sql(mysql_params, db, "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(40))",
            "INSERT INTO t SELECT seq, seq, NULL FROM seq_1_to_700",
            "INSERT INTO t SELECT 1000000000000 + seq, seq, NULL FROM seq_1_to_700", "ANALYZE TABLE t")
    opts = _incremental(mysql_params, db, **{"scan.startup.mode": "snapshot", "scan.incremental.snapshot.chunk.size": "100",
                                             "chunk-key.even-distribution.factor.upper-bound": "10"})
    src = MySqlSource(opts)
    src.open()
    try:
        events = drain(src)
        stats = dict(src.snapshot_stats)
    finally:
        src.close()
    assert len(events) == 1400 and len({e.after["id"] for e in events}) == 1400
    assert 10 <= stats["chunks"] <= 20  # about 100 rows each, not one chunk per key value range


def test_a_table_without_primary_key_is_refused_with_the_way_out(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (id INT, v INT)")
    src = MySqlSource(_incremental(mysql_params, db))
    with pytest.raises(SourceError, match="no primary key.*'scan.incremental.snapshot.enabled' = 'false'"):
        src.open()
    src.close()


def test_a_string_chunk_key_is_refused(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t (k VARCHAR(10) PRIMARY KEY, v INT)")
    src = MySqlSource(_incremental(mysql_params, db))
    with pytest.raises(SourceError, match="chunk key 'k'.*varchar|chunk key 'k'"):
        src.open()
    src.close()


def test_newly_added_table_is_snapshotted_incrementally_and_joined_without_replay(mysql_params, database_factory):
    db = database_factory()
    run_sql(mysql_params, db, "CREATE TABLE t1 (id INT PRIMARY KEY)", "CREATE TABLE t2 (id INT PRIMARY KEY)",
            "INSERT INTO t1 VALUES (1)", "INSERT INTO t2 VALUES (1),(2)")
    opts = _incremental(mysql_params, db, **{"tables": f"{db}.t1"})
    src = MySqlSource(opts)
    src.open()
    try:
        drain(src)
        stored = src.position
    finally:
        src.close()
    run_sql(mysql_params, db, "INSERT INTO t1 VALUES (10)", "INSERT INTO t2 VALUES (3)", "DELETE FROM t2 WHERE id = 1")
    both = _incremental(mysql_params, db, **{"tables": f"{db}.t1,{db}.t2", "scan.newly-added-table.enabled": "true"})
    src = MySqlSource(both, stored)
    src.open()
    try:
        events = drain(src)
        run_sql(mysql_params, db, "INSERT INTO t2 VALUES (4)")
        events += drain(src)
    finally:
        src.close()
    t1 = [(e.op, e.after["id"]) for e in events if e.table.table == "t1"]
    t2 = [(e.op, (e.after or e.before)["id"]) for e in events if e.table.table == "t2"]
    assert t1 == [(Op.CREATE, 10)]  # streamed from the stored position, not snapshotted again
    # the snapshot holds 2 and 3; the binlog changes before its high watermark are not replayed
    assert t2 == [(Op.READ, 2), (Op.READ, 3), (Op.CREATE, 4)]


def _source_with_ddl_after_a_chunks_definition(monkeypatch, params: dict, db: str, ddl: str) -> tuple[MySqlSource, list[int]]:
    """An incremental snapshot source of ``db.t`` (chunks of 100 rows) that runs ``ddl`` right
    after the second chunk's definition read, before its SELECT: the race happens every time.
    Returns the source (not opened) and the list of definition reads so far."""
    real = incremental.load_table_schema
    calls: list[int] = []

    def load_then_alter(conn, table_id, **kw):
        table = real(conn, table_id, **kw)
        calls.append(1)
        if len(calls) == 3:  # open() reads the definition once; then chunk 0, then this chunk
            run_sql(params, db, ddl)
        return table

    monkeypatch.setattr(incremental, "load_table_schema", load_then_alter)
    return MySqlSource(_incremental(params, db, **{"scan.incremental.snapshot.chunk.size": "100"})), calls


@pytest.mark.parametrize("ddl, after", [
    ("ALTER TABLE t DROP COLUMN pad", ["id", "v"]),
    ("ALTER TABLE t RENAME COLUMN pad TO note", ["id", "v", "note"]),
    ("ALTER TABLE t CHANGE pad pad2 VARCHAR(60)", ["id", "v", "pad2"]),
], ids=["drop", "rename", "change"])
def test_a_column_gone_between_a_chunks_definition_and_its_select_reads_the_chunk_again(
        mysql_params, database_factory, monkeypatch, ddl, after):
    """The race of session 7's CI: the chunk's definition is read, then ``ALTER TABLE`` drops or
    renames a column, then the chunk's ``SELECT`` names it (``ER_BAD_FIELD_ERROR``); the chunk is
    read again with the new definition and the snapshot ends exactly at the table."""
    db = database_factory()
    _table(mysql_params, db, rows=1000)
    src, calls = _source_with_ddl_after_a_chunks_definition(monkeypatch, mysql_params, db, ddl)
    src.open()
    try:
        events = drain(src)
    finally:
        src.close()
    assert len(calls) > 3, "the DDL did not run during the snapshot"
    reads = [e for e in events if e.op is Op.READ]
    # a column rename re-reads the whole table after the statement (the old rows show their values
    # under the new name): keys may come twice, the last read of each is the table's row
    last = {e.after["id"]: e for e in reads}
    assert sorted(last) == list(range(1, 1001))
    assert all(e.after["v"] == e.after["id"] for e in last.values())
    # the chunk whose SELECT met the DDL was read again with the new definition
    assert any([c.name for c in e.schema.columns] == after for e in reads)
    assert all(set(e.after) == {c.name for c in e.schema.columns} for e in reads)


def test_a_chunk_key_renamed_during_the_incremental_snapshot_is_refused(mysql_params, database_factory, monkeypatch):
    db = database_factory()
    _table(mysql_params, db, rows=1000)
    src, _calls = _source_with_ddl_after_a_chunks_definition(monkeypatch, mysql_params, db,
                                                             "ALTER TABLE t RENAME COLUMN id TO k")
    src.open()
    try:
        with pytest.raises(SourceError, match="(primary key|chunk key column 'id') of .*t.* (changed|was dropped or "
                                              "renamed) during its incremental snapshot"):
            drain(src)
    finally:
        src.close()


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


def test_server_restart_during_the_incremental_snapshot_fails_fast_and_a_relaunch_resumes_exactly(own_mariadb):
    params = {"host": "127.0.0.1", "port": own_mariadb.port, "user": own_mariadb.user, "password": own_mariadb.password}
    run_sql(params, None, "CREATE DATABASE r")
    _table(params, "r", rows=4000)
    opts = _incremental(params, "r", **{"server-id": "5740-5741", "scan.incremental.snapshot.chunk.size": "300"})
    src = MySqlSource(opts)
    src.open()
    try:
        first = src.poll(450, 1.0)
        stored = first[-1].position
        own_mariadb.stop()
        with pytest.raises(SnapshotInterruptedError) as err:
            for _ in range(200):
                more = src.poll(100, 0.2)  # rows of chunks read before the loss are still valid
                if more:
                    first += more
                    stored = more[-1].position
    finally:
        src.close()
    assert err.value.table == "r.t" and "Relaunch" in str(err.value)
    own_mariadb.start()
    run_sql(params, "r", "UPDATE t SET v = -v WHERE id % 9 = 0", "DELETE FROM t WHERE id % 31 = 0")
    again = MySqlSource(opts, stored)
    again.open()
    try:
        rest = drain(again)
    finally:
        again.close()
    assert [e.op for e in first] == [Op.READ] * len(first) and len(first) < 4000
    assert _fold(first + rest) == _mysql_state(params, "r")
    read_ids = [e.after["id"] for e in first + rest if e.op is Op.READ]
    assert len(read_ids) == len(set(read_ids))
