"""Trial 4 (a newcomer breaking the platform): the README's "sharded tables into one" recipe — two
shards merged by a ``route``, keyed by ``__table_name__`` + id, with a computed column and a
``filter`` — while rows move their primary key into, out of and across the filter, on a
``hash-by-key`` topic read by two Pipeline 2 workers (Iceberg) or one (Paimon). The merged lake
table must equal MySQL's own evaluation (a UNION of the shards with the same expressions)."""

from __future__ import annotations

import threading
from dataclasses import replace
from decimal import Decimal

import pymysql
import pytest

from changelake.changelog import TableId
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table

pytestmark = pytest.mark.integration

HASH3 = {"partition.strategy": "hash-by-key", "sink.topic.partitions": 3}
SHARD_DDL = "CREATE TABLE {t} (id INT PRIMARY KEY, price DECIMAL(10,2) NOT NULL, qty INT NOT NULL, note VARCHAR(20))"


def _mysql_rows(mysql_params, db: str) -> list[tuple]:
    union = " UNION ALL ".join(
        f"SELECT '{t}' AS src_table, id, price, qty, note, price * qty AS total, "
        f"CONCAT(UPPER(COALESCE(note, 'none')), '#', CAST(id AS CHAR)) AS label FROM {t} WHERE qty > 0 AND price < 100"
        for t in ("shard_1", "shard_2"))
    conn = pymysql.connect(**mysql_params, database=db, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute(union)
            return sorted(tuple(r) for r in cur.fetchall())
    finally:
        conn.close()


def _lake_rows(p2, table: TableId) -> list[tuple]:
    cols = ("src_table", "id", "price", "qty", "note", "total", "label")
    return sorted(tuple(r[c] for c in cols) for r in read_lake_table(p2, table).to_pylist())


def _ingest(p2, workers: int) -> None:
    if workers == 1:
        run_pipeline(p2, until_caught_up=True)
        return
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            run_pipeline(p2, until_caught_up=True, worker=True, worker_id=f"w{i}", batch_size=4)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors


@pytest.mark.parametrize("columnar", ["true", "false"], ids=["columnar", "per-record"])
def test_sharded_route_with_filter_and_key_moves_equals_mysql(database_factory, mysql_exec, mysql_params,
                                                              pipeline_pair, lake, columnar):
    db = database_factory()
    mysql_exec(db, SHARD_DDL.format(t="shard_1"), SHARD_DDL.format(t="shard_2"),
               "INSERT INTO shard_1 VALUES (1,1.50,2,'a'),(2,2.00,0,NULL),(3,99.99,1,'c'),(4,150.00,1,'big'),(5,0.01,7,NULL)",
               "INSERT INTO shard_2 VALUES (1,3.25,1,'same id'),(2,4.00,3,'b'),(3,5.00,0,'zero'),(6,6.00,6,NULL)")
    workers = 2 if lake == "iceberg" else 1
    p1, p2 = pipeline_pair(db, ["shard_1", "shard_2"], p1_extra=HASH3)
    merged = TableId(db, "orders")
    p2 = parse_pipeline(
        {"pipeline": {**p2.pipeline, "parallelism": str(workers), "columnar.enabled": columnar},
         "source": dict(p2.source), "sink": dict(p2.sink),
         "transform": [{"source-table": f"{db}.shard_\\.*",
                        "projection": "\\*, __table_name__ AS src_table, price * qty AS total, "
                                      "CONCAT(UPPER(COALESCE(note, 'none')), '#', CAST(id AS VARCHAR)) AS label",
                        "filter": "qty > 0 AND price < 100", "primary-keys": "src_table, id"}],
         "route": [{"source-table": f"{db}.shard_\\.*", "sink-table": str(merged)}]},
        env={},
    )

    run_pipeline(p1, until_caught_up=True)
    _ingest(p2, workers)
    assert _lake_rows(p2, merged) == _mysql_rows(mysql_params, db)

    mysql_exec(
        db,
        "UPDATE shard_1 SET id = 11 WHERE id = 1",  # key moves, stays in the filter
        "UPDATE shard_1 SET id = 12, qty = 0 WHERE id = 3",  # key moves out of the filter
        "UPDATE shard_1 SET id = 14, price = 10 WHERE id = 4",  # key moves into the filter
        "UPDATE shard_1 SET qty = 5 WHERE id = 2",  # into the filter, same key
        "UPDATE shard_2 SET qty = 0 WHERE id = 1",  # out of the filter, same key (shard_1 has no id 1 now)
        "UPDATE shard_2 SET id = 5 WHERE id = 2",  # a key equal to a row of the other shard
        "UPDATE shard_2 SET id = id + 100",  # every key of a shard moves at once
        "DELETE FROM shard_1 WHERE id = 5",
        "INSERT INTO shard_1 VALUES (1, 7.00, 1, 'reused')",  # the moved-away key reused
        "UPDATE shard_2 SET id = 3, qty = 9 WHERE id = 103",  # back, and into the filter
        "UPDATE shard_1 SET note = NULL WHERE id = 11",  # the computed column follows
    )
    run_pipeline(p1, until_caught_up=True)
    _ingest(p2, workers)
    expected = _mysql_rows(mysql_params, db)
    assert ("shard_2", 3, Decimal("5.00"), 9, "zero", Decimal("45.00"), "ZERO#3") in expected
    assert _lake_rows(p2, merged) == expected
