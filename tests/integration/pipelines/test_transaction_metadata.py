"""Debezium's ``provide.transaction.metadata`` and ``heartbeat.interval.ms`` on real MariaDB -> Kafka
(-> Iceberg): BEGIN/END records that match MySQL's own transactions (GTID ids from
``@@last_gtid``, per-table counts), ``transaction`` blocks on the events that agree with them, the
same exactly once across ``kill -9`` of Pipeline 1 in the middle of a large transaction, Pipeline 2
reading a ``topic-pattern`` that also selects the transaction topic, and heartbeat records."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter, defaultdict

import pymysql
import pytest
from confluent_kafka import Consumer, TopicPartition

from changelake.changelog import TableId
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import verify_lake_table
from lake_blocks import lake_sink

pytestmark = pytest.mark.integration

CHILD = textwrap.dedent(
    """
    import json, sys
    from changelake.pipeline.definition import parse_pipeline
    from changelake.pipeline.runner import run_pipeline
    defn = parse_pipeline(json.loads(sys.argv[1]), env={})
    run_pipeline(defn, until_caught_up=True, batch_size=300,
                 on_batch=lambda b: print("batch", flush=True))
    """
)


def _raw_p1(name, db, mysql_params, kafka_bootstrap, source_extra=None, sink_extra=None):
    return {
        "pipeline": {"name": name},
        "source": {"type": "mysql", "hostname": mysql_params["host"], "port": mysql_params["port"],
                   "username": mysql_params["user"], "password": mysql_params["password"],
                   "tables": f"{db}.\\.*", "tables.exclude": f"{db}.other", "server-id": str(random.randint(7000, 7999)),
                   "provide.transaction.metadata": "true", **(source_extra or {})},
        "sink": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap,
                 "sink.delivery-guarantee": "exactly-once", "topic.prefix": db, **(sink_extra or {})},
    }


def _read(bootstrap: str, topic: str) -> list[tuple[dict | None, dict | None, dict[str, bytes]]]:
    """Every committed record of partition 0 of ``topic``: (key, value, headers) as JSON."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txmeta-{random.random()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    out = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            msgs = consumer.consume(1000, timeout=5)
            if not msgs:
                break
            eof = False
            for m in msgs:
                if m.error():
                    eof = True
                    continue
                out.append((json.loads(m.key()) if m.key() else None, json.loads(m.value()) if m.value() else None,
                            dict(m.headers() or [])))
            if eof:
                break
    finally:
        consumer.close()
    return out


def _transactions(mysql_params, db, transactions) -> list[str]:
    """Run each transaction (a list of statements) in one MySQL transaction; their GTIDs."""
    conn = pymysql.connect(**mysql_params, database=db, autocommit=False)
    gtids = []
    try:
        with conn.cursor() as cur:
            for statements in transactions:
                for sql in statements:
                    cur.execute(sql)
                conn.commit()
                cur.execute("SELECT @@last_gtid")
                gtids.append(str(cur.fetchone()[0]))
    finally:
        conn.close()
    return gtids


def _check(bootstrap, db, expected, key_changes=None):
    """The transaction topic holds BEGIN then END per expected transaction, in order, with the
    expected per-table counts; every data record's block agrees with them; snapshot rows have none.

    ``expected``: [(gtid, {"db.a": n, ...})]; ``key_changes``: {gtid: updates changing the key}."""
    key_changes = key_changes or {}
    records = _read(bootstrap, f"{db}.transaction")
    assert all(h.get("changelake.record") == b"transaction" for _, _, h in records)
    want = []
    for gtid, counts in expected:
        want.append(("BEGIN", gtid, None, None))
        want.append(("END", gtid, sum(counts.values()), counts))
    got = [(v["status"], v["id"], v["event_count"],
            None if v["data_collections"] is None else {d["data_collection"]: d["event_count"] for d in v["data_collections"]})
           for _, v, _ in records]
    assert got == want
    assert [k["id"] for k, _, _ in records] == [w[1] for w in want]
    # the events' transaction blocks
    orders: dict[str, list[int]] = defaultdict(list)
    per_table: dict[tuple[str, str], list[int]] = defaultdict(list)
    for table in ("a", "b"):
        for _, value, _ in _read(bootstrap, f"{db}.{table}"):
            block = value.get("transaction")
            if value["op"] == "r":
                assert block is None
                continue
            assert block is not None, value
            orders[block["id"]].append(block["total_order"])
            per_table[(block["id"], f"{db}.{table}")].append(block["data_collection_order"])
    for gtid, counts in expected:
        # an update that changes the primary key is one change event written as two records
        # (d of the old key, c of the new one), which carry the same block
        twice = key_changes.get(gtid, 0)
        assert sorted(set(orders[gtid])) == list(range(1, sum(counts.values()) + 1))
        assert len(orders[gtid]) == sum(counts.values()) + twice
        for table, n in counts.items():
            assert sorted(set(per_table[(gtid, table)])) == list(range(1, n + 1))
    assert set(orders) == {g for g, _ in expected}
    return records


@pytest.mark.parametrize("lake", ["iceberg"])
def test_transaction_records_match_mysql_transactions_and_pipeline_2_ignores_them(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap, tmp_path, lake
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY, n INT)", "CREATE TABLE b (id INT PRIMARY KEY, s VARCHAR(20))",
               "CREATE TABLE other (id INT PRIMARY KEY)", "INSERT INTO a VALUES (100, 0)")
    p1 = parse_pipeline(_raw_p1(f"tx-{db}", db, mysql_params, kafka_bootstrap), env={})
    run_pipeline(p1, until_caught_up=True)  # snapshot: one 'r' row, no transaction records

    gtids = _transactions(mysql_params, db, [
        ["INSERT INTO a VALUES (1, 1), (2, 2), (3, 3)", "INSERT INTO b VALUES (1, 'x'), (2, 'y')",
         "UPDATE a SET n = n + 10 WHERE id = 1"],                      # a: 4, b: 2
        ["DELETE FROM b WHERE id = 2"],                                 # b: 1
        ["INSERT INTO other VALUES (1)"],                               # uncaptured only: no records
        ["INSERT INTO b VALUES (3, 'z')", "INSERT INTO other VALUES (2)", "DELETE FROM a WHERE id = 100"],
        ["INSERT INTO a SELECT seq, seq FROM seq_1000_to_1999", "INSERT INTO b SELECT seq, 'big' FROM seq_1000_to_1499",
         "UPDATE a SET id = id + 5000 WHERE id = 2"],                   # spans several batches; a key change
    ])
    run_pipeline(p1, until_caught_up=True, batch_size=300)
    expected = [(gtids[0], {f"{db}.a": 4, f"{db}.b": 2}), (gtids[1], {f"{db}.b": 1}),
                (gtids[3], {f"{db}.b": 1, f"{db}.a": 1}), (gtids[4], {f"{db}.a": 1001, f"{db}.b": 500})]
    _check(kafka_bootstrap, db, expected, {gtids[4]: 1})

    # Pipeline 2 with a topic-pattern that selects the transaction topic too
    p2 = parse_pipeline({
        "pipeline": {"name": f"tx-{db}-p2"},
        "source": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap,
                   "topic-pattern": f"{db}\\..*", "scan.startup.mode": "earliest-offset",
                   "value.format": "debezium-json", "debezium-json.distributed-tables": True},
        "transform": [{"source-table": "\\.*.\\.*", "projection": "\\*", "primary-keys": "id"}],
        "sink": lake_sink(lake, tmp_path),
    }, env={})
    stats = run_pipeline(p2, until_caught_up=True)
    assert stats.bad_records == 0
    for table in ("a", "b"):
        result = verify_lake_table(p2, TableId(db, table), mysql=mysql_params)
        assert result.passed, result.metadata()
    assert set(stats.tables) <= {f"{db}.a", f"{db}.b"}, stats.tables


def test_transaction_metadata_exactly_once_across_kill_9_inside_a_transaction(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY, pad CHAR(100))", "CREATE TABLE b (id INT PRIMARY KEY, pad CHAR(100))",
               "CREATE TABLE other (id INT PRIMARY KEY)")
    raw = _raw_p1(f"txk-{db}", db, mysql_params, kafka_bootstrap)
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True)
    gtids = _transactions(mysql_params, db, [
        ["INSERT INTO a SELECT seq, 'x' FROM seq_1_to_3000", "INSERT INTO b SELECT seq, 'y' FROM seq_1_to_1500",
         "INSERT INTO a SELECT seq, 'x' FROM seq_3001_to_4000"],
        ["UPDATE b SET pad = 'z' WHERE id <= 700", "INSERT INTO other VALUES (1)"],
        ["DELETE FROM a WHERE id > 3500"],
    ])
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for _ in range(3):  # kill -9 after at least one committed batch, each time
        child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(raw)], stdout=subprocess.PIPE, text=True, env=env)
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("batch"), line
        time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    run_pipeline(parse_pipeline(raw, env={}), until_caught_up=True, batch_size=300)
    _check(kafka_bootstrap, db, [(gtids[0], {f"{db}.a": 4000, f"{db}.b": 1500}), (gtids[1], {f"{db}.b": 700}),
                                 (gtids[2], {f"{db}.a": 500})])


def _master_status(mysql_params) -> tuple[int, int]:
    conn = pymysql.connect(**mysql_params)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
            return int(str(row[0]).rsplit(".", 1)[1]), int(row[1])
    finally:
        conn.close()


def test_heartbeat_records_and_the_position_of_an_idle_captured_table(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY)", "INSERT INTO a VALUES (1)", "CREATE TABLE other (id INT PRIMARY KEY)")
    raw = _raw_p1(f"hbt-{db}", db, mysql_params, kafka_bootstrap, {"heartbeat.interval.ms": "200"},
                  {"topic.heartbeat.prefix": "hb"})
    raw["source"].pop("provide.transaction.metadata")
    p1 = parse_pipeline(raw, env={})
    first = run_pipeline(p1, until_caught_up=True).position
    mysql_exec(db, *[f"INSERT INTO other VALUES ({i})" for i in range(20)])  # traffic of an uncaptured table only
    end = _master_status(mysql_params)
    later = run_pipeline(p1, max_duration_s=2.5)
    assert later.events == 0
    at = (int(later.position["file"].rsplit(".", 1)[1]), int(later.position["pos"]))
    assert at >= end > (int(first["file"].rsplit(".", 1)[1]), int(first["pos"]))
    beats = _read(kafka_bootstrap, f"hb.{db}")
    assert len(beats) >= 4  # about one per 200 ms over two runs, each committed
    assert all(k == {"serverName": db} and isinstance(v["ts_ms"], int) and h.get("changelake.record") == b"heartbeat"
               for k, v, h in beats)
    assert [v["ts_ms"] for _, v, _ in beats] == sorted(v["ts_ms"] for _, v, _ in beats)
    # the stored position is the one committed with the last heartbeat
    resumed = run_pipeline(parse_pipeline({**raw, "source": {k: v for k, v in raw["source"].items()
                                                              if k != "heartbeat.interval.ms"}}, env={}),
                           max_duration_s=1.0)
    assert resumed.events == 0
    assert (int(resumed.position["file"].rsplit(".", 1)[1]), int(resumed.position["pos"])) == at
    assert len(_read(kafka_bootstrap, f"hb.{db}")) == len(beats)  # without the option: no heartbeat records
