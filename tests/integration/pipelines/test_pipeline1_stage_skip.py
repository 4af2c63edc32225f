"""Pipeline 1 (MariaDB -> Kafka) in the default set-up (no transform, no route) skips the stage
(``Stage.passes_through``: the ``mysql`` source vouches for its keys), and its topics hold
exactly what they hold with the stage run on every poll: the same pipeline run twice over one
binlog, once as it is and once with the skip turned off, into two sets of topics, snapshot and
streaming (inserts, updates, a key change, deletes, ``ALTER TABLE ADD COLUMN`` with and without
a default, ``TRUNCATE``, ``DROP TABLE``). A key the source does not vouch for (a zero date in a
DATE key column, read as NULL) still stops the run as before."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from changelake.changelog import DataChangeEvent
from changelake.errors import PipelineDataError
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.stage import Stage
from lake_blocks import pipeline_1

pytestmark = pytest.mark.integration


def _records(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[tuple[Any, Any, dict[str, bytes]]]:
    """The committed records of partition 0 of ``topic``: (key JSON, value JSON or None, headers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[Any, Any, dict[str, bytes]]] = []
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
            key = json.loads(m.key()) if m.key() is not None else None
            value = json.loads(m.value()) if m.value() is not None else None
            out.append((key, value, dict(m.headers() or [])))
    finally:
        c.close()
    raise AssertionError(f"{topic}: no end of partition within {timeout_s} s")


def _spy_on_apply(monkeypatch: pytest.MonkeyPatch) -> list[list[DataChangeEvent]]:
    """Every ``Stage.apply`` call's events, in order."""
    calls: list[list[DataChangeEvent]] = []
    real = Stage.apply

    def spy(self: Stage, events: Sequence[DataChangeEvent], reject: Any = None) -> list[DataChangeEvent]:
        calls.append(list(events))
        return real(self, events, reject)

    monkeypatch.setattr(Stage, "apply", spy)
    return calls


def test_pipeline1_skips_the_stage_and_its_topics_hold_what_they_hold_with_it(
        database_factory, mysql_exec, mysql_params, kafka_bootstrap, monkeypatch):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(8,2), at DATETIME(3))",
               "INSERT INTO t VALUES (1,'a',1.50,'2024-01-02 03:04:05.678'),(2,'b',2.25,NULL),(3,'c',NULL,NULL)",
               "CREATE TABLE u (a VARCHAR(10), b BIGINT UNSIGNED, w DOUBLE, PRIMARY KEY (a, b))",
               "INSERT INTO u VALUES ('x',1,0.5),('y',18446744073709551615,NULL)",
               "CREATE TABLE g (id INT PRIMARY KEY, v INT)", "INSERT INTO g VALUES (1,1)",
               "CREATE TABLE g2 (id INT PRIMARY KEY, v VARCHAR(5))", "INSERT INTO g2 VALUES (1,'p'),(2,'q')")
    tables = ("t", "u", "g", "g2")
    calls = _spy_on_apply(monkeypatch)
    modes = ("skip", "stage")
    pipelines = {mode: pipeline_1(mysql_params, kafka_bootstrap, db, name=f"{mode}-{db}", p1_extra={
        "sink.tableId-to-topic.mapping": ";".join(f"{db}.{t}:{mode}-{db}.{t}" for t in tables)}) for mode in modes}
    polled = {mode: 0 for mode in modes}
    applied = {mode: 0 for mode in modes}

    def run(mode: str) -> None:
        with monkeypatch.context() as m:
            if mode == "stage":  # the skip turned off: every poll through Stage.apply
                m.setattr(Stage, "passes_through", lambda self, source: False)
            before = len(calls)
            stats = run_pipeline(pipelines[mode], until_caught_up=True)
            polled[mode] += stats.events
            applied[mode] += sum(len(events) for events in calls[before:])

    for mode in modes:
        run(mode)  # the snapshot of every table, at one binlog position (nothing changes in between)
    mysql_exec(db, "INSERT INTO t VALUES (4,'d',4.00,NOW(3))", "UPDATE t SET v = 'bb', n = n + 1 WHERE id = 2",
               "UPDATE t SET id = 30 WHERE id = 3", "DELETE FROM t WHERE id = 1",
               "ALTER TABLE t ADD COLUMN extra INT",  # a new column, NULL in the existing rows
               "INSERT INTO t VALUES (5,'e',5.00,NULL,55)", "UPDATE t SET extra = 44 WHERE id = 4",
               "TRUNCATE TABLE t", "INSERT INTO t VALUES (6,'f',NULL,NULL,NULL)",
               # the reader comes to these after the last DROP: the TRUNCATE of the re-created g2 and its
               # DROP have no definition it can know; they get the last schema of g2 emitted (the stage's)
               "UPDATE g2 SET v = 'qq' WHERE id = 2", "DROP TABLE g2", "CREATE TABLE g2 (id INT PRIMARY KEY, o TEXT)",
               "TRUNCATE TABLE g2", "DROP TABLE g2",
               "DROP TABLE g",  # its definition is gone before the reader starts: a DROP without schema
               "UPDATE u SET w = 1.5 WHERE a = 'x'", "DELETE FROM u WHERE a = 'y'",
               "ALTER TABLE u ADD COLUMN filled INT NOT NULL DEFAULT 7",  # MySQL fills the rows: u is read again
               "INSERT INTO u VALUES ('z',3,NULL,8)")
    for mode in modes:
        run(mode)  # the same binlog from the same position

    assert calls and all(len(c) for c in calls)
    assert applied["skip"] == 0 and polled["skip"] > 0  # the default set-up: no event went through the stage
    assert applied["stage"] == polled["stage"] == polled["skip"]  # forced on: every event did

    records = {}
    for table in tables:
        records[table] = _records(kafka_bootstrap, f"skip-{db}.{table}")
        staged = _records(kafka_bootstrap, f"stage-{db}.{table}")
        assert records[table] == staged, table  # keys, values (op, before, after, source, ts_ms) and headers
    ops = {table: [v["op"] for _, v, _ in rs if v is not None] for table, rs in records.items()}
    assert ops["t"] == ["r", "r", "r", "c", "u", "d", "c", "d", "c", "u", "t", "c"]  # a key change: d + c
    assert sorted(ops["u"]) == sorted(["r", "r", "u", "d", "c", "r", "r"])  # the re-read after the filling ALTER
    schema_ids = {table: [h.get("changelake.schema.id") for _, _, h in rs] for table, rs in records.items()}
    assert len(set(schema_ids["t"])) == 2 and len(set(schema_ids["u"])) == 2  # before and after the ALTER
    assert ops["g2"] == ["r", "r", "u", "t", "t", "t"]  # DROP, TRUNCATE and DROP of the re-created table
    assert [h.get("changelake.schema-change") for _, _, h in records["g2"][3:]] == [b"drop.table", None, b"drop.table"]
    assert set(schema_ids["g2"]) == {schema_ids["g2"][0]}  # the TRUNCATE / DROP the reader could not know: g2's last
    assert ops["g"] == ["r", "t"] and schema_ids["g"][1] is None  # no definition known to the source nor the stage


@pytest.mark.parametrize("stage_forced", [False, True], ids=["default", "stage-forced"])
def test_a_zero_date_in_a_key_column_still_stops_pipeline1(database_factory, mysql_exec, mysql_params,
                                                           kafka_bootstrap, monkeypatch, stage_forced):
    # MariaDB's default sql_mode takes '0000-00-00' in a DATE NOT NULL key column; the source reads it as
    # None, so it does not vouch for a poll holding a table with such a key, and the stage refuses the row
    db = database_factory()
    mysql_exec(db, "CREATE TABLE d (day DATE NOT NULL, id INT NOT NULL, v INT, PRIMARY KEY (day, id))",
               "INSERT INTO d VALUES ('2024-01-02',1,1),('0000-00-00',2,2)")
    if stage_forced:
        monkeypatch.setattr(Stage, "passes_through", lambda self, source: False)
    p1 = pipeline_1(mysql_params, kafka_bootstrap, db, name=f"zero-{db}")
    with pytest.raises(PipelineDataError, match=rf"primary-key column\(s\) \['day'\] of table {db}.d missing or NULL"):
        run_pipeline(p1, until_caught_up=True)
