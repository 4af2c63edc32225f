"""DDL and transactions the lake never gets wrong (issue 17), on real MariaDB, Kafka and both
lakes (the ``lake`` fixture): TRUNCATE on a hash-by-key topic, ROLLBACK TO SAVEPOINT beside a
non-transactional table, DROP TABLE and its re-CREATE."""

from __future__ import annotations

from dataclasses import replace

import pytest

from changelake.changelog import TableId
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration

HASH3 = {"partition.strategy": "hash-by-key", "sink.topic.partitions": 3}


def run_workers(p2, workers: int, batch_size: int = 50) -> None:
    """``workers`` Pipeline 2 workers of one consumer group, as threads, until each is caught up."""
    import threading

    if p2.sink_type != "iceberg":
        pytest.skip("only a multi_writer lake sink (Iceberg) takes several Pipeline 2 workers")
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            run_pipeline(p2, until_caught_up=True, worker=True, worker_id=f"w{i}", batch_size=batch_size)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors


def _rows(p2, table: TableId) -> list[tuple]:
    return sorted((r["id"], r["v"]) for r in read_lake_table(p2, table).to_pylist())


# several Pipeline 2 workers only on Iceberg (Paimon takes one writer): the cases are listed per lake
# rather than collected for Paimon and skipped after Pipeline 1's work (run_workers' skip)
@pytest.mark.parametrize("lake, workers", [("iceberg", 1), ("paimon", 1), ("iceberg", 2)],
                         ids=["iceberg-1", "paimon-1", "iceberg-2"])
def test_truncate_on_a_hash_by_key_topic_is_one_ordered_event(database_factory, mysql_exec, mysql_params,
                                                              pipeline_pair, workers):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, v VARCHAR(20))",
               "INSERT INTO t VALUES (1,'o1'),(2,'o2'),(3,'o3'),(4,'o4'),(5,'o5'),(6,'o6')")
    p1, p2 = pipeline_pair(db, ["t"], p1_extra=HASH3)
    if workers > 1:
        p2 = replace(p2, pipeline={**p2.pipeline, "parallelism": str(workers)})

    def ingest():
        if workers > 1:
            return run_workers(p2, workers)
        return run_pipeline(p2, until_caught_up=True)

    run_pipeline(p1, until_caught_up=True)
    ingest()
    t = TableId(db, "t")
    assert len(_rows(p2, t)) == 6
    mysql_exec(db, "TRUNCATE TABLE t",
               "INSERT INTO t VALUES (1,'n1'),(2,'n2'),(3,'n3'),(4,'n4'),(5,'n5'),(6,'n6'),(7,'n7'),(8,'n8')")
    run_pipeline(p1, until_caught_up=True)
    ingest()
    assert _rows(p2, t) == [(i, f"n{i}") for i in range(1, 9)]
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, result.metadata()

    # A truncate in a batch that also holds rows before and after it, read in one go.
    mysql_exec(db, "INSERT INTO t VALUES (9,'x9'),(10,'x10')", "TRUNCATE TABLE t", "INSERT INTO t VALUES (11,'y'),(12,'y')")
    run_pipeline(p1, until_caught_up=True)
    ingest()
    assert _rows(p2, t) == [(11, "y"), (12, "y")]
    assert verify_lake_table(p2, t, mysql=mysql_params).passed


# -- ROLLBACK TO SAVEPOINT beside a non-transactional table --------------------------------------
def test_rollback_to_savepoint_drops_exactly_what_followed_it(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, v VARCHAR(30)) ENGINE=InnoDB",
               "CREATE TABLE m(id INT PRIMARY KEY, v VARCHAR(30)) ENGINE=Aria TRANSACTIONAL=0",
               "INSERT INTO t VALUES (1,'base')")
    p1, p2 = pipeline_pair(db, ["t", "m"])
    run_pipeline(p1, until_caught_up=True)  # the snapshot
    mysql_exec(db, "BEGIN", "INSERT INTO t VALUES (10,'kept')", "SAVEPOINT sp1", "INSERT INTO t VALUES (11,'rolled-back')",
               "UPDATE t SET v='rolled-back-upd' WHERE id=1", "INSERT INTO m VALUES (20,'nontx')",
               "ROLLBACK TO SAVEPOINT sp1", "INSERT INTO t VALUES (12,'kept')", "COMMIT")
    # a whole mixed transaction rolled back: only the non-transactional row stays
    mysql_exec(db, "BEGIN", "INSERT INTO t VALUES (13,'rolled-back')", "INSERT INTO m VALUES (21,'nontx2')", "ROLLBACK")
    # nested savepoints: rolling back to the outer one drops what followed the inner one too
    mysql_exec(db, "BEGIN", "SAVEPOINT a", "INSERT INTO t VALUES (14,'gone')", "SAVEPOINT b",
               "INSERT INTO t VALUES (15,'gone')", "INSERT INTO m VALUES (22,'nontx3')", "ROLLBACK TO a",
               "SAVEPOINT c", "INSERT INTO t VALUES (16,'kept')", "RELEASE SAVEPOINT c", "COMMIT")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert _rows(p2, TableId(db, "t")) == [(1, "base"), (10, "kept"), (12, "kept"), (16, "kept")]
    assert _rows(p2, TableId(db, "m")) == [(20, "nontx"), (21, "nontx2"), (22, "nontx3")]
    for table in ("t", "m"):
        result = verify_lake_table(p2, TableId(db, table), mysql=mysql_params)
        assert result.passed, result.metadata()


# -- DROP TABLE ----------------------------------------------------------------------------------
def _ids_in_history(p2, table: TableId) -> list[set]:
    """The ids of every earlier snapshot of the lake table (time travel)."""
    from changelake.connectors.registry import ConnectorContext, find_factory

    sink = find_factory(p2.sink_type).create_sink(p2.options("sink"), ConnectorContext(p2.name))
    out = []
    with sink:
        lake = sink.load_table(table)
        if p2.sink_type == "iceberg":
            for snap in lake.snapshots():
                out.append(set(lake.scan(snapshot_id=snap.snapshot_id, selected_fields=("id",)).to_arrow()
                               .column("id").to_pylist()))
        else:
            from changelake.connectors.paimon.reader import scan_table

            latest = lake.snapshot_manager().get_latest_snapshot().id
            for i in range(1, latest + 1):
                out.append(set(scan_table(lake.copy({"scan.snapshot-id": str(i)}), ["id"]).column("id").to_pylist()))
    return out


@pytest.mark.parametrize("lake, p1_extra, workers", [
    ("iceberg", {}, 1), ("paimon", {}, 1), ("iceberg", HASH3, 1), ("paimon", HASH3, 1), ("iceberg", HASH3, 2)],
    ids=["iceberg-one-partition", "paimon-one-partition", "iceberg-hash-by-key-3", "paimon-hash-by-key-3",
         "iceberg-hash-by-key-3-two-workers"])
def test_drop_table_reaches_the_lake_and_a_re_create_starts_from_the_new_definition(
        database_factory, mysql_exec, mysql_params, pipeline_pair, p1_extra, workers):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, v VARCHAR(20), gone INT)", "INSERT INTO t VALUES (1,'a',1),(2,'b',2)",
               "CREATE TABLE other(id INT PRIMARY KEY)")  # Pipeline 1 needs one table to start with
    p1, p2 = pipeline_pair(db, ["t"], p1_extra=p1_extra)
    t = TableId(db, "t")
    if workers > 1:
        p2 = replace(p2, pipeline={**p2.pipeline, "parallelism": str(workers)})

    def ingest():
        if workers > 1:
            return run_workers(p2, workers)
        return run_pipeline(p2, until_caught_up=True)

    run_pipeline(p1, until_caught_up=True)
    ingest()
    assert _rows(p2, t) == [(1, "a"), (2, "b")]

    mysql_exec(db, "DROP TABLE t")
    run_pipeline(p1, until_caught_up=True)
    ingest()
    assert _rows(p2, t) == []  # the dropped rows are gone from the current snapshot
    assert any({1, 2} <= ids for ids in _ids_in_history(p2, t))  # and readable by time travel

    # re-CREATE with other columns: v changes type, gone is gone, w is new
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, v INT, w VARCHAR(10))", "INSERT INTO t VALUES (7, 70, 'new')")
    run_pipeline(p1, until_caught_up=True)
    ingest()
    rows = read_lake_table(p2, t).to_pylist()
    assert rows == [{"id": 7, "v": 70, "w": "new"}]
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, result.metadata()
    # later changes evolve as usual (the re-created table keeps its rows)
    mysql_exec(db, "ALTER TABLE t ADD COLUMN x INT", "INSERT INTO t VALUES (8, 80, 'n', 1)")
    run_pipeline(p1, until_caught_up=True)
    ingest()
    assert verify_lake_table(p2, t, mysql=mysql_params).passed
    assert sorted(r["id"] for r in read_lake_table(p2, t).to_pylist()) == [7, 8]


# -- a route merging two source tables: a TRUNCATE of one must not delete the other's rows --------
def test_truncate_of_one_of_two_routed_tables_stops_or_is_ignored_never_wipes_the_other(
        database_factory, mysql_exec, mysql_params, pipeline_pair):
    from changelake.errors import PipelineDataError

    db = database_factory()
    mysql_exec(db, "CREATE TABLE a(id INT PRIMARY KEY, v VARCHAR(20))", "CREATE TABLE b(id INT PRIMARY KEY, v VARCHAR(20))",
               "INSERT INTO a VALUES (1,'a1'),(2,'a2'),(3,'a3')", "INSERT INTO b VALUES (11,'b11'),(12,'b12'),(13,'b13')")
    p1, p2 = pipeline_pair(db, ["a", "b"], p1_extra=HASH3)
    merged = TableId(db, "ab")
    p2 = replace(p2, route=[{"source-table": f"{db}.a, {db}.b", "sink-table": str(merged)}])
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    both = [(1, "a1"), (2, "a2"), (3, "a3"), (11, "b11"), (12, "b12"), (13, "b13")]
    assert _rows(p2, merged) == both

    mysql_exec(db, "INSERT INTO b VALUES (14,'b14')", "TRUNCATE TABLE a", "INSERT INTO b VALUES (15,'b15')")
    run_pipeline(p1, until_caught_up=True)
    with pytest.raises(PipelineDataError) as err:
        run_pipeline(p2, until_caught_up=True)
    assert f"TRUNCATE TABLE of {db}.a cannot be applied to {merged}" in str(err.value)
    assert _rows(p2, merged) == both + [(14, "b14")] or _rows(p2, merged) == both  # nothing past the truncate
    with pytest.raises(PipelineDataError):  # a relaunch stops at the same place
        run_pipeline(p2, until_caught_up=True)

    # lenient / ignore (which ignore truncates anyway) go on; b's rows are all there, a's stay
    lenient = replace(p2, pipeline={**p2.pipeline, "schema.change.behavior": "lenient"})
    run_pipeline(lenient, until_caught_up=True)
    assert _rows(lenient, merged) == both + [(14, "b14"), (15, "b15")]

    # Pipeline 1 with the same route (one merged topic) stops at the truncate too, before writing it
    p1_routed = replace(p1, name=p1.name + "-routed", pipeline={**p1.pipeline, "name": p1.name + "-routed"},
                        route=[{"source-table": f"{db}.a, {db}.b", "sink-table": str(merged)}])
    run_pipeline(p1_routed, until_caught_up=True)  # its snapshot
    mysql_exec(db, "TRUNCATE TABLE b")
    with pytest.raises(PipelineDataError) as err:
        run_pipeline(p1_routed, until_caught_up=True)
    assert f"TRUNCATE TABLE of {db}.b cannot be applied to {merged}" in str(err.value)


# -- ADD COLUMN that MySQL fills in the rows that exist ------------------------------------------
@pytest.mark.parametrize("snapshot", [{}, {"scan.incremental.snapshot.enabled": "true"}], ids=["lock-free", "incremental"])
def test_add_column_with_a_default_shows_it_in_the_old_rows(database_factory, mysql_exec, mysql_params, pipeline_pair,
                                                            snapshot):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c')")
    p1, p2 = pipeline_pair(db, ["t"], p1_extra=HASH3)
    p1 = replace(p1, source={**p1.source, **snapshot})
    t = TableId(db, "t")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "DELETE FROM t WHERE id = 3",
               "ALTER TABLE t ADD COLUMN d INT DEFAULT 7, ADD COLUMN s VARCHAR(5) NOT NULL",  # s: '' in old rows
               "ALTER TABLE t ADD COLUMN n INT",  # NULL in old rows: nothing to re-read
               "INSERT INTO t VALUES (4,'d',8,'x',1)", "UPDATE t SET v = 'b2' WHERE id = 2")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    rows = sorted(read_lake_table(p2, t).to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "v": "a", "d": 7, "s": "", "n": None}, {"id": 2, "v": "b2", "d": 7, "s": "", "n": None},
                    {"id": 4, "v": "d", "d": 8, "s": "x", "n": 1}]
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, str(result.metadata())
    # a restart reads nothing again (the re-read is past) and later changes flow as usual
    mysql_exec(db, "UPDATE t SET d = 9 WHERE id = 1")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert verify_lake_table(p2, t, mysql=mysql_params).passed


@pytest.mark.parametrize("behavior", [None, "evolve"], ids=["default", "evolve"])
def test_rename_column_keeps_the_old_rows_values_under_the_new_name(database_factory, mysql_exec, mysql_params,
                                                                    pipeline_pair, behavior):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, a VARCHAR(20))", "INSERT INTO t VALUES (1,'x'),(2,'y')")
    p1, p2 = pipeline_pair(db, ["t"], p1_extra=HASH3)
    if behavior:
        p2 = replace(p2, pipeline={**p2.pipeline, "schema.change.behavior": behavior})
    t = TableId(db, "t")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "ALTER TABLE t RENAME COLUMN a TO b", "INSERT INTO t VALUES (3,'z')", "UPDATE t SET b = 'y2' WHERE id = 2")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    rows = sorted(read_lake_table(p2, t).to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["b"]) for r in rows] == [(1, "x"), (2, "y2"), (3, "z")]
    if behavior == "evolve":
        assert all("a" not in r for r in rows)  # dropped from the lake
    else:  # the old column is kept (changelake's default drops nothing), NULL from the rename on
        assert [r["a"] for r in rows] == [None, None, None]  # the re-read rows are written after it
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, str(result.metadata())


def test_two_source_tables_never_share_a_lake_table_unless_a_route_says_so(database_factory, mysql_exec, mysql_params,
                                                                            pipeline_pair):
    """``db1.t`` and ``db2.t`` read by one Pipeline 2: Iceberg with a fixed ``namespace`` maps both to
    one lake table, refused by name before either is written over the other; Paimon names lake
    tables ``database.table`` and keeps them apart. (Kafka keys hold the TableId, so two tables
    on one topic never share a key either: the truncate/route tests above read such topics.)"""
    from changelake.errors import PipelineDataError

    db1, db2 = database_factory(), database_factory()
    for db, v in ((db1, "one"), (db2, "two")):
        mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, v VARCHAR(20))", f"INSERT INTO t VALUES (1,'{v}'),(2,'{v}')")
    p1a, p2 = pipeline_pair(db1, ["t"])
    p1b, _ = pipeline_pair(db2, ["t"])
    p2 = replace(p2, source={**p2.source, "topic": f"{db1}.t;{db2}.t"})
    run_pipeline(p1a, until_caught_up=True)
    run_pipeline(p1b, until_caught_up=True)
    if p2.sink_type == "iceberg":
        p2 = replace(p2, sink={**p2.sink, "namespace": "lake"})
        # one source per run: the second is refused (the lake table records its source table)
        first = replace(p2, source={**p2.source, "topic": f"{db1}.t"}, name=p2.name + "-a")
        run_pipeline(first, until_caught_up=True)
        second = replace(p2, source={**p2.source, "topic": f"{db2}.t"}, name=p2.name + "-b")
        with pytest.raises(PipelineDataError) as err:
            run_pipeline(second, until_caught_up=True)
        message = str(err.value)
        assert f"{db1}.t" in message and f"{db2}.t" in message and "'lake.t'" in message and "route" in message
        with pytest.raises(PipelineDataError) as err:  # one run reading both
            run_pipeline(p2, until_caught_up=True)
        assert f"{db1}.t" in str(err.value) and f"{db2}.t" in str(err.value)
        assert _rows(p2, TableId(db1, "t")) == [(1, "one"), (2, "one")]  # never a mix
    else:
        run_pipeline(p2, until_caught_up=True)
        for db in (db1, db2):
            result = verify_lake_table(p2, TableId(db, "t"), mysql=mysql_params)
            assert result.passed, str(result.metadata())



# -- DROP, re-CREATE with another type, rows, DROP again, re-CREATE: read by Pipeline 2 in one go ---
def test_two_drops_and_re_creates_with_changed_types_read_in_one_run_end_as_the_last_definition(
        database_factory, mysql_exec, mysql_params, pipeline_pair):
    # Before: the re-created definition's rows and its own DROP in one batch (of one partition)
    # left the lake table at the first definition, and the run stopped: SchemaEvolutionError int->string.
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES " +
               ",".join(f"({i},{i})" for i in range(1, 10)), "CREATE TABLE other(id INT PRIMARY KEY)")
    p1, p2 = pipeline_pair(db, ["t"], p1_extra=HASH3)
    t = TableId(db, "t")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert len(read_lake_table(p2, t).to_pylist()) == 9

    mysql_exec(db, "DROP TABLE t", "CREATE TABLE t(id INT PRIMARY KEY, v VARCHAR(20))",
               "INSERT INTO t VALUES " + ",".join(f"({i},'s{i}')" for i in range(5, 15)),
               "DROP TABLE t", "CREATE TABLE t(id INT PRIMARY KEY, v DATE, w VARCHAR(10))",
               "INSERT INTO t VALUES " + ",".join(f"({i},'2026-01-{i:02d}','w{i}')" for i in range(10, 20)))
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)  # once, over both drops
    rows = sorted(read_lake_table(p2, t).to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], str(r["v"]), r["w"]) for r in rows] == [(i, f"2026-01-{i:02d}", f"w{i}") for i in range(10, 20)]
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, result.metadata()
    # later changes evolve as usual
    mysql_exec(db, "UPDATE t SET w = 'x' WHERE id = 10", "DELETE FROM t WHERE id = 11")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert verify_lake_table(p2, t, mysql=mysql_params).passed


@pytest.mark.parametrize("lake, workers, behavior", [
    ("iceberg", 1, None), ("paimon", 1, None), ("iceberg", 2, None), ("iceberg", 1, "try_evolve"),
    ("paimon", 1, "try_evolve")],
    ids=["iceberg-one-worker", "paimon-one-worker", "iceberg-two-workers", "iceberg-one-worker-try_evolve",
         "paimon-one-worker-try_evolve"])
def test_two_drops_and_re_creates_read_in_small_commits_end_as_the_last_definition(
        database_factory, mysql_exec, mysql_params, pipeline_pair, workers, behavior):
    # The same rounds, read by Pipeline 2 in polls of a few records, each a lake commit: the
    # consumer hands out the records partition by partition, so a partition is read a whole DROP
    # behind another across commits (and across workers). Before, its rows of the older definition
    # re-created the lake table to that definition (SchemaEvolutionError, or NULL in the newer rows).
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES " +
               ",".join(f"({i},{i})" for i in range(1, 10)), "CREATE TABLE other(id INT PRIMARY KEY)")
    p1, p2 = pipeline_pair(db, ["t"], p1_extra=HASH3)
    p2 = replace(p2, sink={**p2.sink, "commit.max-rows": "1"})
    if behavior is not None:  # try_evolve applies DROP TABLE: a re-CREATE is a new table, not a type change
        p2 = replace(p2, pipeline={**p2.pipeline, "schema.change.behavior": behavior})
    if workers > 1:
        p2 = replace(p2, pipeline={**p2.pipeline, "parallelism": str(workers)})

    def ingest():
        if workers > 1:
            return run_workers(p2, workers, batch_size=4)
        return run_pipeline(p2, until_caught_up=True, batch_size=4)

    t = TableId(db, "t")
    run_pipeline(p1, until_caught_up=True)
    ingest()
    assert len(read_lake_table(p2, t).to_pylist()) == 9
    mysql_exec(db, "DROP TABLE t", "CREATE TABLE t(id INT PRIMARY KEY, v VARCHAR(20))",
               "INSERT INTO t VALUES " + ",".join(f"({i},'s{i}')" for i in range(5, 25)),
               "DROP TABLE t", "CREATE TABLE t(id INT PRIMARY KEY, v DATE, w VARCHAR(10))",
               "INSERT INTO t VALUES " + ",".join(f"({i},'2026-01-{i:02d}','w{i}')" for i in range(10, 30)))
    run_pipeline(p1, until_caught_up=True)
    ingest()
    rows = sorted(read_lake_table(p2, t).to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], str(r["v"]), r["w"]) for r in rows] == [(i, f"2026-01-{i:02d}", f"w{i}") for i in range(10, 30)]
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, result.metadata()
