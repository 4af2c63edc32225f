"""The page-views job's mini-batch path (Arrow decoding + GroupAggregate.process_arrow) on a real
broker: exactly-once under kill -9, and a bad record failing with its position."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from changelake.changelog import ChangelogRow, RowKind
from changelake.connectors.kafka_table import create_source
from changelake.formats.errors import DecodeError
from changelake.pageviews import (
    PER_REGION_SCHEMA,
    generate_pageviews,
    pageviews_sink_options,
    produce_pageviews,
    read_pageviews_table,
    read_upsert_topic_final_state,
    recompute_pv_uv,
    run_pageviews_aggregation,
)

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}
REPO = Path(__file__).resolve().parents[3]


# the helpers of test_pageviews.py
def read_changelog(bootstrap: str, topic: str, fmt: str = "debezium-json") -> list[ChangelogRow]:
    """All rows of a changelog topic (read_committed), earliest to the current end."""
    opts = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, "format": fmt,
            "scan.startup.mode": "earliest-offset", "scan.bounded.mode": "latest-offset"}
    out: list[ChangelogRow] = []
    deadline = time.monotonic() + 60
    with create_source(opts, PER_REGION_SCHEMA.with_primary_key([])) as src:
        while not src.finished:
            assert time.monotonic() < deadline, "changelog topic not read to its end"
            out.extend(src.poll(0.5, 5000))
    return out


def materialize_retract(rows: list[ChangelogRow]) -> dict[Any, tuple[int, int]]:
    """Apply a retract changelog; every -U/-D must retract exactly the current row, every +U
    must directly follow its -U (a duplicate or lost record fails here)."""
    table: dict[Any, tuple[int, int]] = {}
    prev: ChangelogRow | None = None
    for r in rows:
        k, v = r.values["user_region"], (r.values["pv"], r.values["uv"])
        if r.kind is RowKind.INSERT:
            assert k not in table, f"+I for existing region {k}"
            table[k] = v
        elif r.kind in (RowKind.UPDATE_BEFORE, RowKind.DELETE):
            assert table.get(k) == v, f"{r.kind} {r} does not retract the current row {table.get(k)}"
            if r.kind is RowKind.DELETE:
                del table[k]
        else:
            assert prev is not None and prev.kind is RowKind.UPDATE_BEFORE and prev.values["user_region"] == k
            table[k] = v
        prev = r
    return table


def test_exactly_once_mini_batch_survives_kill_9(kafka_bootstrap: str, topic_factory, tmp_path: Path) -> None:
    source = topic_factory(partitions=3)
    sink = topic_factory(partitions=2, config=COMPACT)
    changelog = topic_factory()
    events = generate_pageviews(40000, seed=12, users=2000)
    produce_pageviews(kafka_bootstrap, source, events)
    cmd = [
        sys.executable, "-m", "changelake.pageviews", "run", "--bootstrap", kafka_bootstrap,
        "--source-topic", source, "--sink-topic", sink, "--retract-topic", changelog,
        "--delivery-guarantee", "exactly-once", "--state-dir", str(tmp_path / "state"), "--batch-size", "300",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rnd = random.Random(6)
    snapshot = tmp_path / "state" / "pageviews_aggregation.snapshot.json"

    def mtime() -> float:
        return snapshot.stat().st_mtime if snapshot.exists() else 0.0

    killed = 0
    for _ in range(6):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        before, t0 = mtime(), time.monotonic()
        while proc.poll() is None and mtime() == before and time.monotonic() - t0 < 30:
            time.sleep(0.02)  # until the run has committed its first batch
        # then a random point a few batches on, short enough that a fast machine does not finish
        # the topic first (up to 0.8 s here let 3 of the 6 runs finish in one CI run)
        time.sleep(rnd.uniform(0.0, 0.25))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.communicate(timeout=30)
        if rnd.random() < 0.4:  # sometimes lose the local snapshot too: full replay
            snapshot.unlink(missing_ok=True)
    assert killed >= 4, "the runs finished before they could be killed; raise the event count"
    done = subprocess.run(cmd, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    final = json.loads(done.stdout.decode().strip().splitlines()[-1])
    truth = recompute_pv_uv(read_pageviews_table(kafka_bootstrap, source))
    assert truth == recompute_pv_uv(events)
    assert read_upsert_topic_final_state(kafka_bootstrap, sink) == truth, final
    # one -U/+U per region per committed batch: none duplicated or lost across the kills
    assert materialize_retract(read_changelog(kafka_bootstrap, changelog)) == truth
    assert final["groups"] == len(truth)


def test_bad_record_in_a_mini_batch_names_its_position_and_commits_nothing_past_it(
    kafka_bootstrap: str, topic_factory, tmp_path: Path
) -> None:
    source = topic_factory(partitions=1)
    sink = topic_factory(config=COMPACT)
    produce_pageviews(kafka_bootstrap, source, generate_pageviews(50, seed=1))
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    p.produce(source, b'{"user_id":"not a number","user_region":"EU"}')
    p.flush(10)
    with pytest.raises(DecodeError) as ei:
        run_pageviews_aggregation(kafka_bootstrap, source, pageviews_sink_options(kafka_bootstrap, sink),
                                  "at-least-once", tmp_path, batch_size=500)
    msg = str(ei.value)
    assert source in msg and "50" in msg and "user_id" in msg, msg
    assert read_upsert_topic_final_state(kafka_bootstrap, sink) == {}  # the batch with it wrote nothing
