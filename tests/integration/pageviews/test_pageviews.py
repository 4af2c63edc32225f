"""Page views PV/UV per region against a real Kafka broker: retract vs upsert, the two-topics
pattern, the refusal of an updating stream into an insert-only topic, and exactly-once under kill -9."""

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
from confluent_kafka import Consumer, TopicPartition

from changelake.changelog import ChangelogRow, RowKind, UnsupportedChangelogError
from changelake.connectors.kafka_table import create_source
from changelake.pageviews import (
    PER_REGION_SCHEMA,
    generate_pageviews,
    pageviews_sink_options,
    produce_pageviews,
    read_pageviews_table,
    read_upsert_topic_final_state,
    recompute_pv_uv,
    retract_sink_options,
    run_pageviews_aggregation,
)

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}
REPO = Path(__file__).resolve().parents[3]


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "pv-test-end-offsets", "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=10)
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1] for p in md.topics[topic].partitions}
    finally:
        c.close()


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


@pytest.mark.parametrize("fmt", ["avro", "json"])
def test_upsert_topic_equals_duckdb_recomputation(kafka_bootstrap: str, topic_factory, tmp_path: Path, fmt: str) -> None:
    source = topic_factory(partitions=3)
    sink = topic_factory(partitions=2, config=COMPACT)
    events = generate_pageviews(3000, seed=7)
    produce_pageviews(kafka_bootstrap, source, events)
    opts = pageviews_sink_options(kafka_bootstrap, sink, fmt=fmt)

    stats = run_pageviews_aggregation(kafka_bootstrap, source, opts, "at-least-once", tmp_path / "state")
    assert stats.events_read == 3000 and stats.events_replayed == 0
    truth = recompute_pv_uv(read_pageviews_table(kafka_bootstrap, source))
    assert truth == recompute_pv_uv(events)
    assert read_upsert_topic_final_state(kafka_bootstrap, sink, fmt=fmt) == truth
    assert stats.groups == len(truth)
    assert stats.rows_out["-U"] > 0 and stats.rows_out["+I"] == len(truth)

    # more events (repeated users): the run resumes from the committed offsets and its snapshot
    more = generate_pageviews(1500, seed=8)
    produce_pageviews(kafka_bootstrap, source, more)
    stats2 = run_pageviews_aggregation(kafka_bootstrap, source, opts, "at-least-once", tmp_path / "state")
    assert stats2.restored_snapshot and stats2.events_read == 1500 and stats2.events_replayed == 0
    truth2 = recompute_pv_uv(read_pageviews_table(kafka_bootstrap, source))
    assert truth2 == recompute_pv_uv(events + more) != truth
    assert read_upsert_topic_final_state(kafka_bootstrap, sink, fmt=fmt) == truth2

    # without the local snapshot the state is rebuilt by replaying up to the committed offsets
    more2 = generate_pageviews(500, seed=9)
    produce_pageviews(kafka_bootstrap, source, more2)
    stats3 = run_pageviews_aggregation(kafka_bootstrap, source, opts, "at-least-once", None)
    assert not stats3.restored_snapshot and stats3.events_replayed == 4500 and stats3.events_read == 5000
    assert read_upsert_topic_final_state(kafka_bootstrap, sink, fmt=fmt) == recompute_pv_uv(events + more + more2)


@pytest.mark.parametrize("fmt", ["json", "csv", "avro"])
def test_updating_stream_into_insert_only_kafka_topic_is_refused_and_nothing_written(
    kafka_bootstrap: str, topic_factory, tmp_path: Path, fmt: str
) -> None:
    source = topic_factory()
    sink = topic_factory(config=COMPACT)
    changelog = topic_factory()
    produce_pageviews(kafka_bootstrap, source, generate_pageviews(200, seed=1))
    group = f"pv-refused-{sink}"
    with pytest.raises(UnsupportedChangelogError) as ei:
        run_pageviews_aggregation(
            kafka_bootstrap, source, pageviews_sink_options(kafka_bootstrap, sink), "at-least-once", tmp_path,
            group_id=group, retract_table_options=retract_sink_options(kafka_bootstrap, changelog, fmt=fmt),
        )
    msg = str(ei.value)
    assert msg.startswith(
        "Table sink 'default_catalog.default_database.pageviews_per_region_changelog' doesn't support consuming "
        "update and delete changes which is produced by node GroupAggregate(groupBy=[user_region], "
        "select=[user_region, COUNT(*) AS pv, COUNT(DISTINCT user_id) AS uv])."
    )
    assert "upsert-kafka" in msg and "debezium-json" in msg
    assert end_offsets(kafka_bootstrap, changelog) == {0: 0}
    assert end_offsets(kafka_bootstrap, sink) == {0: 0}
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    try:
        assert c.committed([TopicPartition(source, 0)], timeout=10)[0].offset < 0  # nothing consumed either
    finally:
        c.close()
    assert not list(tmp_path.iterdir())


def test_two_topics_debezium_changelog_reads_back_as_retract_stream(kafka_bootstrap: str, topic_factory, tmp_path: Path) -> None:
    source = topic_factory(partitions=2)
    sink = topic_factory(config=COMPACT)
    changelog = topic_factory()
    events = generate_pageviews(800, seed=3)
    produce_pageviews(kafka_bootstrap, source, events)
    stats = run_pageviews_aggregation(
        kafka_bootstrap, source, pageviews_sink_options(kafka_bootstrap, sink), "at-least-once", tmp_path,
        retract_table_options=retract_sink_options(kafka_bootstrap, changelog), mini_batch=False,
    )
    rows = read_changelog(kafka_bootstrap, changelog)
    kinds = {r.kind for r in rows}
    assert kinds == {RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER}
    # without mini-batch every event changes pv: one +I per region, then one -U/+U pair per event
    truth = recompute_pv_uv(events)
    assert sum(r.kind is RowKind.INSERT for r in rows) == len(truth)
    assert sum(r.kind is RowKind.UPDATE_AFTER for r in rows) == len(events) - len(truth)
    assert stats.rows_out["+U"] == len(events) - len(truth)
    assert materialize_retract(rows) == truth
    assert read_upsert_topic_final_state(kafka_bootstrap, sink) == truth


def test_exactly_once_survives_kill_9(kafka_bootstrap: str, topic_factory, tmp_path: Path) -> None:
    source = topic_factory(partitions=3)
    sink = topic_factory(partitions=2, config=COMPACT)
    changelog = topic_factory()
    events = generate_pageviews(30000, seed=11, users=2000)
    produce_pageviews(kafka_bootstrap, source, events)
    cmd = [
        sys.executable, "-m", "changelake.pageviews", "run", "--bootstrap", kafka_bootstrap,
        "--source-topic", source, "--sink-topic", sink, "--retract-topic", changelog,
        "--delivery-guarantee", "exactly-once", "--state-dir", str(tmp_path / "state"),
        "--batch-size", "300", "--no-mini-batch",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rnd = random.Random(5)
    snapshot = tmp_path / "state" / "pageviews_aggregation.snapshot.json"

    def mtime() -> float:
        return snapshot.stat().st_mtime if snapshot.exists() else 0.0

    killed = 0
    for _ in range(6):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        before, t0 = mtime(), time.monotonic()
        while proc.poll() is None and mtime() == before and time.monotonic() - t0 < 30:
            time.sleep(0.02)  # until the run has committed a batch (or replayed one)
        # then a random point a few batches on, short enough that a fast machine does not finish
        # the topic first (as test_pageviews_minibatch.py, where 0.8 s let 3 of 6 runs finish)
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
    # the retract topic proves no committed output was duplicated or lost across the kills
    assert materialize_retract(read_changelog(kafka_bootstrap, changelog)) == truth
    assert final["groups"] == len(truth)
