"""DROP TABLE, RENAME TABLE and DROP DATABASE with ``debezium-json.include-schema.enabled: true``
after a restart of Pipeline 1 (MariaDB -> Kafka -> lake): the restarted reader has seen no table
map of the dropped tables and information_schema no longer has them, yet each drop record carries
the table's schema (the tracker's warm-up at reader start). Before, Pipeline 1 stopped with
``include-schema.enabled needs the table schema``."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from changelake.changelog import TableId
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration

SCHEMA_ON = {"debezium-json.include-schema.enabled": "true"}


def _values(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[dict]:
    """The committed records' JSON values of partition 0 of ``topic`` (tombstones left out)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[dict] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(str(m.error()))
            if m.value() is not None:
                out.append(json.loads(m.value()))
    finally:
        c.close()
    raise AssertionError(f"{topic}: no end of partition within {timeout_s} s")


def _row_schema(value: dict) -> list:
    """The Connect schema of the ``before`` row image of a {schema, payload} record."""
    return next(f for f in value["schema"]["fields"] if f["field"] == "before")["fields"]


def _rows(p2, table: TableId) -> list[tuple]:
    return sorted((r["id"], r["v"]) for r in read_lake_table(p2, table).to_pylist())


def test_drops_after_a_restart_carry_the_last_known_schema(database_factory, mysql_exec, mysql_params, pipeline_pair,
                                                           kafka_bootstrap):
    ta, tz = database_factory(), database_factory()
    mysql_exec(ta, "CREATE TABLE d_a (id INT PRIMARY KEY, v VARCHAR(10), n DECIMAL(6,2))",
               "INSERT INTO d_a VALUES (1,'a',1.50),(2,'b',2.25)",
               "CREATE TABLE r_a (id INT PRIMARY KEY, v INT, t DATETIME(3))", "INSERT INTO r_a VALUES (1,10,NOW(3))",
               "CREATE TABLE k_a (id INT PRIMARY KEY, v INT)", "INSERT INTO k_a VALUES (1,1)")
    mysql_exec(tz, "CREATE TABLE s_a (id INT PRIMARY KEY, v BIGINT UNSIGNED, w DATE)",
               "INSERT INTO s_a VALUES (1,5,'2024-01-02')")
    p1, p2 = pipeline_pair(ta, ["k_a"], p1_extra=SCHEMA_ON)
    p1 = replace(p1, source={**p1.source, "tables": f"{ta}.\\.*,{tz}.\\.*"})
    p2 = replace(p2, source={**{k: v for k, v in p2.source.items() if k != "topic"},
                             "topic-pattern": f"({re.escape(ta)}|{re.escape(tz)})\\..*"})
    run_pipeline(p1, until_caught_up=True)  # the snapshot
    mysql_exec(ta, "INSERT INTO k_a VALUES (2,2)")
    run_pipeline(p1, until_caught_up=True)  # streaming: the stored position is a binlog position
    run_pipeline(p2, until_caught_up=True)
    assert _rows(p2, TableId(ta, "d_a")) == [(1, "a"), (2, "b")]

    # Pipeline 1 restarted from its binlog position: its reader reads rows of k_a only, then the drops
    stop, batches, errors = threading.Event(), [], []

    def run() -> None:
        try:
            run_pipeline(p1, stop=stop, on_batch=batches.append)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    def k_a_batches() -> int:
        return sum(1 for b in list(batches) if any("k_a" in str(t) for t in b.get("tables", {})))

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 120
        while k_a_batches() < n and not errors and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        mysql_exec(ta, "INSERT INTO k_a VALUES (3,3)")
        wait_for(1)  # the binlog reader runs (it read that row): the tables are dropped after its start
        assert k_a_batches() >= 1 and not errors, errors
        mysql_exec(ta, "DROP TABLE d_a", "RENAME TABLE r_a TO r_b", f"DROP DATABASE `{tz}`", "INSERT INTO k_a VALUES (4,4)")
        wait_for(2)
    finally:
        stop.set()
        thread.join(120)
    assert not errors, errors  # before: EncodeError "include-schema.enabled needs the table schema"
    assert not thread.is_alive() and k_a_batches() >= 2

    # each drop record: op "t", after the snapshot's records, with the table's schema (as its snapshot records)
    for topic in (f"{ta}.d_a", f"{ta}.r_a", f"{tz}.s_a"):
        values = _values(kafka_bootstrap, topic)
        assert [v["payload"]["op"] for v in values][-1] == "t", topic
        assert values[0]["payload"]["op"] == "r", topic
        assert _row_schema(values[-1]) == _row_schema(values[0]), topic
        assert [f["field"] for f in _row_schema(values[-1])][:2] == ["id", "v"], topic

    run_pipeline(p2, until_caught_up=True)
    for table in (TableId(ta, "d_a"), TableId(ta, "r_a"), TableId(tz, "s_a")):
        assert _rows(p2, table) == [], table  # MySQL has no such table: the lake table is emptied
    assert _rows(p2, TableId(ta, "r_b")) == [(1, 10)]
    assert _rows(p2, TableId(ta, "k_a")) == [(1, 1), (2, 2), (3, 3), (4, 4)]
    for table in (TableId(ta, "r_b"), TableId(ta, "k_a")):
        result = verify_lake_table(p2, table, mysql=mysql_params)
        assert result.passed, result.metadata()


@pytest.mark.parametrize("lake", ["iceberg"])  # Pipeline 1's behaviour; the lake side of drops (both lakes) is
# test_drops_after_a_restart_carry_the_last_known_schema's
def test_a_drop_if_exists_of_a_captured_name_that_never_held_a_table_is_no_event(database_factory, mysql_exec,
                                                                                  pipeline_pair):
    # before: the DROP went out without a schema and Pipeline 1 stopped ("include-schema.enabled
    # needs the table schema"); nothing of that name was ever in Kafka, so no event is needed
    db = database_factory()
    mysql_exec(db, "CREATE TABLE k_a (id INT PRIMARY KEY, v INT)", "INSERT INTO k_a VALUES (1,1)")
    p1, p2 = pipeline_pair(db, ["k_a"], p1_extra=SCHEMA_ON)
    p1 = replace(p1, source={**p1.source, "tables": f"{db}.\\.*"})
    run_pipeline(p1, until_caught_up=True)  # the snapshot
    mysql_exec(db, "DROP TABLE IF EXISTS never_a", "INSERT INTO k_a VALUES (2,2)")
    run_pipeline(p1, until_caught_up=True)
    mysql_exec(db, "DROP TABLE IF EXISTS never_b", "INSERT INTO k_a VALUES (3,3)")
    run_pipeline(p1, until_caught_up=True)  # a restart from the stored binlog position reads it again
    run_pipeline(p2, until_caught_up=True)
    assert _rows(p2, TableId(db, "k_a")) == [(1, 1), (2, 2), (3, 3)]
