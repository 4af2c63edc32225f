"""Debezium's ``heartbeat.action.query`` on real MariaDB -> Kafka: the stored binlog position of a
pipeline whose captured table is idle advances, and without the query it does not."""

from __future__ import annotations

import random

import pymysql
import pytest

from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline

pytestmark = pytest.mark.integration


def _p1(name, db, mysql_params, kafka_bootstrap, **extra):
    return parse_pipeline({
        "pipeline": {"name": name},
        "source": {"type": "mysql", "hostname": mysql_params["host"], "port": mysql_params["port"],
                   "username": mysql_params["user"], "password": mysql_params["password"],
                   "tables": f"{db}.idle", "server-id": str(random.randint(7000, 7999)),
                   "heartbeat.interval": "200ms", **extra},
        "sink": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap,
                 "sink.delivery-guarantee": "exactly-once"},
    }, env={})


def _at(position: dict) -> tuple[int, int]:
    return int(position["file"].rsplit(".", 1)[1]), int(position["pos"])


def _beats(mysql_params, db) -> int:
    conn = pymysql.connect(**mysql_params, database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COALESCE(MAX(n), 0) FROM beats")
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def test_heartbeat_action_query_advances_the_stored_position_of_an_idle_table(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE idle (id INT PRIMARY KEY)", "INSERT INTO idle VALUES (1)",
               "CREATE TABLE beats (id INT PRIMARY KEY, n INT)")  # not captured
    query = f"INSERT INTO `{db}`.beats (id, n) VALUES (1, 1) ON DUPLICATE KEY UPDATE n = n + 1"

    # Without the query: an idle server, the position stays where the snapshot left it.
    plain = _p1(f"hb-plain-{db}", db, mysql_params, kafka_bootstrap)
    start = run_pipeline(plain, until_caught_up=True).position
    idle = run_pipeline(plain, max_duration_s=2.5)
    assert idle.events == 0 and _at(idle.position) == _at(start)

    # With it: no captured change, yet the committed position moves with the heartbeats' binlog traffic.
    beating = _p1(f"hb-{db}", db, mysql_params, kafka_bootstrap, **{"heartbeat.action.query": query})
    first = run_pipeline(beating, until_caught_up=True).position
    later = run_pipeline(beating, max_duration_s=2.5)
    assert later.events == 0
    assert _at(later.position) > _at(first)
    assert _beats(mysql_params, db) >= 3  # ran about every 200 ms while streaming
    # The advanced position was stored: the same pipeline without the query resumes exactly there.
    resumed = run_pipeline(_p1(f"hb-{db}", db, mysql_params, kafka_bootstrap), max_duration_s=1.0)
    assert resumed.events == 0 and _at(resumed.position) == _at(later.position)
