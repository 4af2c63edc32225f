"""V13 end to end: Pipeline 1 killed with SIGKILL in the middle of one 5000-row statement, then
restarted; a read_committed consumer sees exactly 5000 `c` records, and the lake holds 5000 rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from changelake.changelog import TableId
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import verify_lake_table

pytestmark = pytest.mark.integration

CHILD = textwrap.dedent(
    """
    import json, sys
    from changelake.pipeline.definition import parse_pipeline
    from changelake.pipeline.runner import run_pipeline
    defn = parse_pipeline(json.loads(sys.argv[1]), env={})
    run_pipeline(defn, until_caught_up=True, batch_size=400,
                 on_batch=lambda b: print("batch", b, flush=True))
    """
)


def _count_ops(bootstrap: str, topic: str) -> dict[str, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "v13-reader", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    ops: dict[str, int] = {}
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
                doc = json.loads(m.value())
                op = doc.get("payload", doc)["op"]
                ops[op] = ops.get(op, 0) + 1
            if eof:
                break
    finally:
        consumer.close()
    return ops


@pytest.mark.parametrize("lake", ["iceberg"])  # Pipeline 1's exactly-once (the topic is counted); both
# lakes' Pipeline 2 kills are the next test's
def test_sigkill_mid_statement_then_restart_gives_exactly_5000_records(
    database_factory, mysql_exec, mysql_params, pipeline_pair, kafka_bootstrap
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, pad CHAR(200))")
    p1, p2 = pipeline_pair(db, ["t"])
    run_pipeline(p1, until_caught_up=True)  # empty snapshot; the binlog position is stored
    mysql_exec(db, "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_5000")

    raw = {"pipeline": p1.pipeline, "source": p1.source, "sink": p1.sink}
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for _ in range(2):  # kill twice, each time after at least one committed batch
        child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(raw)], stdout=subprocess.PIPE, text=True, env=env)
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("batch"), line
        time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    run_pipeline(p1, until_caught_up=True, batch_size=400)

    ops = _count_ops(kafka_bootstrap, f"{db}.t")
    assert ops == {"c": 5000}
    run_pipeline(p2, until_caught_up=True)
    result = verify_lake_table(p2, TableId(db, "t"), mysql=mysql_params)
    assert result.passed and result.metadata()["rows_lake"] == 5000


def test_sigkill_of_pipeline_2_between_commits_loses_and_repeats_nothing(
    database_factory, mysql_exec, mysql_params, pipeline_pair
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, n INT)", "INSERT INTO t SELECT seq, 0 FROM seq_1_to_3000")
    p1, p2 = pipeline_pair(db, ["t"])
    run_pipeline(p1, until_caught_up=True)
    mysql_exec(db, "UPDATE t SET n = n + 1 WHERE id % 3 = 0", "DELETE FROM t WHERE id % 7 = 0")
    run_pipeline(p1, until_caught_up=True)

    # Commits of 400 rows (not one per commit.interval), so the kill lands between commits.
    raw = {"pipeline": p2.pipeline, "source": p2.source, "sink": {**p2.sink, "commit.max-rows": "400"},
           "transform": p2.transform}
    for _ in range(2):
        child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(raw)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().startswith("batch")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    run_pipeline(p2, until_caught_up=True)
    result = verify_lake_table(p2, TableId(db, "t"), mysql=mysql_params)
    assert result.passed, result.metadata()
    assert result.metadata()["rows_lake"] == 3000 - 3000 // 7


@pytest.mark.parametrize("lake", ["iceberg"])  # Iceberg's transforms; Paimon partitions must be in the key
def test_sigkill_of_pipeline_2_on_a_partitioned_and_bucketed_table_loses_and_repeats_nothing(
    database_factory, mysql_exec, mysql_params, pipeline_pair
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, n INT)", "INSERT INTO t SELECT seq, seq % 5 FROM seq_1_to_3000")
    p1, p2 = pipeline_pair(db, ["t"])
    run_pipeline(p1, until_caught_up=True)
    # Updates move rows to another partition (truncate of n); deletes hit every bucket.
    mysql_exec(db, "UPDATE t SET n = n + 3 WHERE id % 3 = 0", "DELETE FROM t WHERE id % 7 = 0")
    run_pipeline(p1, until_caught_up=True)

    sink = {**p2.sink, "commit.max-rows": "400", "partition.key": f"{db}.t:truncate[2](n),bucket[4](id)"}
    raw = {"pipeline": p2.pipeline, "source": p2.source, "sink": sink, "transform": p2.transform}
    for _ in range(2):
        child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(raw)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().startswith("batch")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    p2 = parse_pipeline(raw, env={})
    run_pipeline(p2, until_caught_up=True)
    result = verify_lake_table(p2, TableId(db, "t"), mysql=mysql_params)
    assert result.passed, result.metadata()
    assert result.metadata()["rows_lake"] == 3000 - 3000 // 7

    from changelake.connectors.iceberg import IcebergSink, parse_sink_options

    with IcebergSink(parse_sink_options(p2.options("sink"))) as lake:
        table = lake.load_table(TableId(db, "t"))
        assert [str(f.transform) for f in table.spec().fields] == ["truncate[2]", "bucket[4]"]
        summary = table.current_snapshot().summary.additional_properties
        assert "changelake.write-amplification" in summary and "changelake.rows-rewritten" in summary
