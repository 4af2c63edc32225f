"""Trial 4 (a newcomer breaking the platform): canal-json and plain json topics end to end, with
primary-key updates, deletes, NULLs and the awkward column types (DECIMAL, DATETIME(6), JSON, BLOB,
ENUM, SET, BIT), on one partition and on ``hash-by-key`` with two Pipeline 2 workers; the lake must
equal MySQL (the key-state check) on both lakes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from changelake.changelog import TableId
from changelake.changelog.transform import TransformError
from changelake.connectors.kafka.sink import UnrepresentableChangeError
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration

HASH3 = {"partition.strategy": "hash-by-key", "sink.topic.partitions": 3}

DDL = ("CREATE TABLE t (id INT PRIMARY KEY, amount DECIMAL(20,6), at DATETIME(6), doc JSON, data BLOB, "
       "e ENUM('a','b','c'), s SET('x','y','z'), flags BIT(10), note VARCHAR(40))")
ROWS = ("INSERT INTO t VALUES "
        "(1, 12345678901234.123456, '2026-01-02 03:04:05.123456', '{\"k\": [1, 2.5, null]}', 0x00FF10, 'a', 'x,z', b'1000000001', 'one'),"
        "(2, -0.000001, '1970-01-01 00:00:00.000001', 'null', '', 'b', '', b'0', NULL),"
        "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),"
        "(4, 0, '9999-12-31 23:59:59.999999', '\"str\"', 0x61, 'c', 'x,y,z', b'1111111111', 'four'),"
        "(5, 1.5, '2000-02-29 12:00:00', '[]', 0x0a0d, 'a', 'y', b'11', 'five')")


def _ingest(p2, workers: int) -> None:
    import threading

    if workers == 1:
        run_pipeline(p2, until_caught_up=True)
        return
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            run_pipeline(p2, until_caught_up=True, worker=True, worker_id=f"w{i}", batch_size=3)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors


@pytest.mark.parametrize("fmt", ["canal-json", "json"])
@pytest.mark.parametrize("p1_extra, workers", [({}, 1), (HASH3, 2)], ids=["one-partition", "hash-by-key-2-workers"])
def test_canal_json_and_json_with_key_updates_nulls_and_awkward_types_equal_mysql(
        database_factory, mysql_exec, mysql_params, pipeline_pair, lake, fmt, p1_extra, workers):
    if lake != "iceberg":
        workers = 1  # only Iceberg takes several Pipeline 2 workers; Paimon reads the 3 partitions alone
    db = database_factory()
    mysql_exec(db, DDL, ROWS)
    p1, p2 = pipeline_pair(db, ["t"], p1_extra={"value.format": fmt, **p1_extra})
    del p2.source["debezium-json.distributed-tables"]
    p2.source.update({"value.format": fmt, f"{fmt}.distributed-tables": "true"})
    if workers > 1:
        p2 = replace(p2, pipeline={**p2.pipeline, "parallelism": str(workers)})
    t = TableId(db, "t")

    run_pipeline(p1, until_caught_up=True)
    _ingest(p2, workers)
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, result.metadata()

    mysql_exec(
        db,
        "UPDATE t SET id = 10 WHERE id = 1",  # the key moves
        "UPDATE t SET id = id + 100 WHERE id IN (2, 4)",  # two keys move in one statement
        "UPDATE t SET amount = NULL, at = NULL, doc = NULL, data = NULL, e = NULL, s = NULL, flags = NULL WHERE id = 5",
        "UPDATE t SET amount = 7.000001, doc = '{\"a\": {\"b\": true}}', flags = b'101', s = 'z' WHERE id = 3",
        "DELETE FROM t WHERE id = 102",
        "INSERT INTO t VALUES (2, 2.2, '2026-06-01 00:00:00.5', '{}', 0x00, 'b', 'x', b'1', 'back')",  # a moved key reused
        "UPDATE t SET id = 1 WHERE id = 10",  # and moved back
        "UPDATE t SET id = 6, note = 'moved+changed' WHERE id = 104",
    )
    run_pipeline(p1, until_caught_up=True)
    _ingest(p2, workers)
    lake_ids = sorted(r["id"] for r in read_lake_table(p2, t).to_pylist())
    assert lake_ids == [1, 2, 3, 5, 6]
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, result.metadata()


# json: Pipeline 1 refuses the TRUNCATE (lake-agnostic, so on one lake); canal-json: both lakes
# apply it. The lake fixture is parametrized here (as in test_exactly_once_kill.py).
FMT_LAKES = [("canal-json", "iceberg"), ("canal-json", "paimon"), ("json", "iceberg")]


@pytest.mark.parametrize("fmt, lake", FMT_LAKES)
@pytest.mark.parametrize("p1_extra", [{}, HASH3], ids=["one-partition", "hash-by-key"])
def test_truncate_and_drop_table_reach_the_lake_in_canal_json_and_json(
        database_factory, mysql_exec, mysql_params, pipeline_pair, fmt, p1_extra):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", "CREATE TABLE keep (id INT PRIMARY KEY)",
               "INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d')", "INSERT INTO keep VALUES (1)")
    p1, p2 = pipeline_pair(db, ["t"], p1_extra={"value.format": fmt, **p1_extra})
    del p2.source["debezium-json.distributed-tables"]
    p2.source.update({"value.format": fmt, f"{fmt}.distributed-tables": "true"})
    t = TableId(db, "t")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert verify_lake_table(p2, t, mysql=mysql_params).passed

    mysql_exec(db, "TRUNCATE TABLE t", "INSERT INTO t VALUES (5,'e'),(2,'b2')")
    if fmt == "json":
        # an upsert topic has no record for a truncate (nor a DROP TABLE): Pipeline 1 stops, naming
        # the table, rather than skip it (the lake would keep rows MySQL deleted, trial4's finding)
        with pytest.raises(UnrepresentableChangeError, match=rf"TRUNCATE TABLE of table {db}\.t cannot be written"):
            run_pipeline(p1, until_caught_up=True)
        run_pipeline(p2, until_caught_up=True)
        assert verify_lake_table(p2, t, mysql=mysql_params).passed is False  # the truncate never reached it
        return
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert sorted(r["id"] for r in read_lake_table(p2, t).to_pylist()) == [2, 5]
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, result.metadata()

    mysql_exec(db, "DROP TABLE t")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, result.metadata()


@pytest.mark.parametrize("fmt, lake", FMT_LAKES)  # json: the transform stage refuses the filter, before any lake
def test_an_update_leaving_the_filter_deletes_the_lake_row_in_canal_json_and_json(
        database_factory, mysql_exec, mysql_params, pipeline_pair, fmt):
    """An upsert topic (json) carries no before image: the lake must still drop a row whose new
    version fails the transform's filter (as Flink's upsert source normalizes to -U/+U first)."""
    from changelake.pipeline.definition import parse_pipeline

    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, qty INT NOT NULL)",
               "INSERT INTO t VALUES (1, 20), (2, 30), (3, 1), (4, 40)")
    p1, p2 = pipeline_pair(db, ["t"], p1_extra={"value.format": fmt})
    del p2.source["debezium-json.distributed-tables"]
    p2.source.update({"value.format": fmt, f"{fmt}.distributed-tables": "true"})
    p2 = parse_pipeline({"pipeline": dict(p2.pipeline), "source": dict(p2.source), "sink": dict(p2.sink),
                         "transform": [{"source-table": "\\.*.\\.*", "projection": "\\*", "filter": "qty >= 10",
                                        "primary-keys": "id"}]}, env={})
    t = TableId(db, "t")

    def lake() -> list[tuple]:
        return sorted((r["id"], r["qty"]) for r in read_lake_table(p2, t).to_pylist())

    run_pipeline(p1, until_caught_up=True)
    if fmt == "json":
        # an upsert topic carries no before image: a filter would keep rows whose update leaves it,
        # or whose key was deleted (trial4's finding); the pipeline refuses it, naming the rule
        with pytest.raises(TransformError, match=r"source-table .*a filter on an upsert changelog \[I,UA,D\] \(no before images, e.g. a value.format 'json' topic\)"):
            run_pipeline(p2, until_caught_up=True)
        return
    run_pipeline(p2, until_caught_up=True)
    assert lake() == [(1, 20), (2, 30), (4, 40)]
    mysql_exec(db, "UPDATE t SET qty = 5 WHERE id = 1",  # leaves the filter
               "UPDATE t SET qty = 50 WHERE id = 3",  # enters it
               "UPDATE t SET id = 5, qty = 2 WHERE id = 4",  # key moves and leaves the filter
               "DELETE FROM t WHERE id = 2")  # a plain delete
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    assert lake() == [(3, 50)]
