"""Pipeline 2 past one machine, on real Kafka and a shared catalog (PostgreSQL, Iceberg REST).

Three independent workers, each ``changelake pipeline run FILE --worker ID`` with its own state
folder (nothing shared but Kafka and the catalog), read a 4-partition topic of two tables while
events keep arriving. One is ``SIGSTOP``ped past the session timeout, so the group hands its
partitions away, then resumed (a zombie, still holding what it polled); another is ``kill -9``'d
and replaced under the same id. Afterwards the lake equals the events' final state, holds no key
twice, and every table's snapshots absorbed each partition's offsets in ranges that tile (never
step back: no zombie landed older data under older offsets), up to the partition's end.

Also: a pipeline with ``pipeline.parallelism: 2`` runs as a Dagster job of two worker ops under
the multiprocess executor (``changelake pipeline run FILE``), and Paimon refuses several writers.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from changelake.changelog import TableId
from changelake.connectors.lake.offsets import OFFSETS_PROPERTY, decode_offsets
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import open_lake_sink, run_pipeline

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
TABLES = ("t1", "t2")
PARTITIONS = 4


class Events:
    """Debezium-JSON changes of two tables on one topic (key: Flink CDC's ``{"TableId", id}``),
    produced at a steady pace from a thread until stopped; keeps each table's final state."""

    def __init__(self, bootstrap: str, topic: str, db: str, keys: int = 150) -> None:
        from confluent_kafka import Producer

        self.topic, self.db, self.keys = topic, db, keys
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self.state: dict[str, dict[int, dict]] = {t: {} for t in TABLES}
        self.sent = 0
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.rng = random.Random(7)

    def _one(self) -> None:
        table = self.rng.choice(TABLES)
        key = self.rng.randrange(self.keys)
        rows = self.state[table]
        before = rows.get(key)
        if before is None:
            op, after = "c", {"id": key, "n": 0, "v": f"{table}-{key}"}
        elif self.rng.random() < 0.2:
            op, after = "d", None
        else:
            op, after = "u", {**before, "n": before["n"] + 1}
        value = {"before": before, "after": after, "op": op, "source": {"db": self.db, "table": table, "ts_ms": 0}}
        key_json = json.dumps({"TableId": f"{self.db}.{table}", "id": key}, separators=(",", ":"))
        self.producer.produce(self.topic, key=key_json, value=json.dumps(value), on_delivery=self._delivered)
        if after is None:
            rows.pop(key)
        else:
            rows[key] = after
        self.sent += 1

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self.failed.append(str(err))

    def _run(self) -> None:
        while not self.stop.is_set():
            for _ in range(20):
                self._one()
            self.producer.poll(0)
            time.sleep(0.1)  # ~200 changes per second
        self.producer.flush(30)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.failed and self.sent, (self.sent, self.failed[:3])


def _lake_rows(defn, db: str, table: str) -> list[dict]:
    sink = open_lake_sink(defn)
    try:
        if sink.load_table(TableId(db, table)) is None:
            return []
        return sink.read_table(TableId(db, table)).to_pylist()
    finally:
        sink.close()


def _as_state(rows: list[dict]) -> dict[int, dict]:
    return {r["id"]: {"id": r["id"], "n": r["n"], "v": r["v"]} for r in rows}


def _offsets_history(defn, db: str, table: str) -> list[dict[str, int]]:
    """The offsets each snapshot of the table's current lineage stored, oldest first."""
    from pyiceberg.table.snapshots import ancestors_of

    sink = open_lake_sink(defn)
    try:
        iceberg = sink.load_table(TableId(db, table))
        lineage = list(ancestors_of(iceberg.current_snapshot(), iceberg.metadata))[::-1]
        return [decode_offsets(s.summary[OFFSETS_PROPERTY]) for s in lineage
                if s.summary is not None and s.summary.get(OFFSETS_PROPERTY)]
    finally:
        sink.close()


def _end_offsets(bootstrap: str, topic: str) -> dict[str, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex}"})
    try:
        return {f"{topic}/{p}": consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        consumer.close()


def _pipeline_file(tmp_path: Path, name: str, bootstrap: str, topic: str, sink: dict, parallelism: int = 1) -> Path:
    doc = {
        "pipeline": {"name": name, "parallelism": str(parallelism)},
        "source": {"type": "kafka", "properties.bootstrap.servers": bootstrap, "topic": topic,
                   "scan.startup.mode": "earliest-offset", "value.format": "debezium-json",
                   "debezium-json.distributed-tables": "true"},
        "transform": [{"source-table": "\\.*.\\.*", "projection": "\\*", "primary-keys": "id"}],
        "sink": {**sink, "commit.interval": "500ms", "commit.max-rows": "400"},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def cli_env(home: Path, bootstrap: str) -> dict[str, str]:
    """The environment of a CLI process with its own state folder. The code location's resources
    read every connection from the environment; this pipeline's YAML names its own Kafka and
    catalog, so the MySQL and default-lake values are placeholders nothing connects to."""
    return {**os.environ, "CHANGELAKE_STATE_DIR": str(home), "DAGSTER_HOME": str(home / "dagster"),
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": "3306",
            "MYSQL_USER": "unused", "MYSQL_PASSWORD": "unused",
            "ICEBERG_CATALOG_URI": f"sqlite:///{home / 'unused.db'}", "ICEBERG_WAREHOUSE": f"file://{home / 'unused'}"}


class Worker:
    """``changelake pipeline run FILE --worker ID`` in its own process and state folder."""

    def __init__(self, path: Path, worker_id: str, home: Path, bootstrap: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = cli_env(home, bootstrap)
        self.log = home / "worker.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cli", "pipeline", "run", str(path), "--worker", worker_id],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def signal(self, signo: int) -> None:
        os.kill(self.proc.pid, signo)

    def stop(self, timeout_s: float = 90.0) -> int:
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(10)
            raise AssertionError(f"worker did not stop on SIGTERM: {self.log.read_text()[-2000:]}")


def test_independent_workers_with_a_zombie_and_a_kill_keep_the_lake_exact(tmp_path, kafka_bootstrap, topic_factory,
                                                                          shared_catalog_sink):
    topic = topic_factory(partitions=PARTITIONS)
    db = f"so_{uuid.uuid4().hex[:8]}"
    name = f"scale-{db}"
    path = _pipeline_file(tmp_path, name, kafka_bootstrap, topic, shared_catalog_sink, parallelism=3)
    defn = parse_pipeline(yaml.safe_load(path.read_text()), env={})
    events = Events(kafka_bootstrap, topic, db)
    events.thread.start()
    workers = {i: Worker(path, f"w{i}", tmp_path / f"state-w{i}", kafka_bootstrap) for i in range(3)}
    replaced: list[Worker] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not all(_lake_rows(defn, db, t) for t in TABLES):
            assert all(w.proc.poll() is None for w in workers.values()), [w.log.read_text()[-3000:] for w in workers.values()]
            time.sleep(2)
        assert all(_lake_rows(defn, db, t) for t in TABLES), "the workers committed nothing"
        time.sleep(5)  # every worker owns partitions and holds uncommitted polls

        workers[1].signal(signal.SIGSTOP)  # past the broker's group.consumer.session.timeout.ms (10 s): its partitions go to the others
        time.sleep(18)
        workers[1].signal(signal.SIGCONT)  # a zombie: commits what it had polled, then rejoins
        time.sleep(3)
        workers[2].signal(signal.SIGKILL)
        workers[2].proc.wait(10)
        replaced.append(workers[2])
        workers[2] = Worker(path, "w2", tmp_path / "state-w2-replacement", kafka_bootstrap)  # same id: static membership
        time.sleep(10)  # events keep arriving meanwhile
        events.finish()

        expected = {t: events.state[t] for t in TABLES}
        deadline = time.monotonic() + 240
        lake: dict[str, dict] = {}
        while time.monotonic() < deadline:
            lake = {t: _as_state(_lake_rows(defn, db, t)) for t in TABLES}
            if lake == expected:
                break
            time.sleep(3)
        codes = {i: w.stop() for i, w in workers.items()}
    finally:
        events.stop.set()
        for w in [*workers.values(), *replaced]:
            if w.proc.poll() is None:
                w.signal(signal.SIGCONT)
                w.signal(signal.SIGKILL)
                w.proc.wait(10)
    logs = {i: w.log.read_text()[-3000:] for i, w in workers.items()}
    assert codes == {0: 0, 1: 0, 2: 0}, logs
    assert replaced[0].proc.returncode == -signal.SIGKILL
    for t in TABLES:
        assert lake[t] == expected[t], f"table {t}: lake differs from the events' final state"
        rows = _lake_rows(defn, db, t)
        assert len(rows) == len({r["id"] for r in rows}), f"table {t}: duplicate keys"

    # Every table's snapshots absorbed each partition in ranges that tile: never stepping back.
    ends = _end_offsets(kafka_bootstrap, topic)
    final: dict[str, int] = {}
    for t in TABLES:
        history = _offsets_history(defn, db, t)
        assert history, t
        for before, after in zip(history, history[1:]):
            for tp, offset in before.items():
                assert after.get(tp, -1) >= offset, f"table {t}: {tp} stepped back from {offset} to {after.get(tp)}"
        for tp, offset in history[-1].items():
            final[tp] = max(final.get(tp, 0), offset)
    assert final == ends, (final, ends)  # every offset of every partition absorbed

    # A single process afterwards starts at the workers' checkpoint entries: nothing left to apply.
    again = run_pipeline(defn, until_caught_up=True)
    assert sum(again.tables.values()) == 0, again


def test_parallelism_2_runs_as_two_dagster_worker_ops(tmp_path, kafka_bootstrap, topic_factory, postgres_service):
    topic = topic_factory(partitions=PARTITIONS)
    db = f"so_{uuid.uuid4().hex[:8]}"
    (tmp_path / "warehouse").mkdir()
    sink = {"type": "iceberg", "catalog.properties.type": "sql",
            "catalog.properties.uri": postgres_service.create_database(f"lake_{uuid.uuid4().hex[:10]}"),
            "catalog.properties.warehouse": f"file://{tmp_path / 'warehouse'}"}
    path = _pipeline_file(tmp_path, f"dagster-{db}", kafka_bootstrap, topic, sink, parallelism=2)
    defn = parse_pipeline(yaml.safe_load(path.read_text()), env={})
    events = Events(kafka_bootstrap, topic, db)
    for _ in range(1500):
        events._one()
    events.producer.flush(30)
    env = cli_env(tmp_path / "state", kafka_bootstrap)
    done = subprocess.run([sys.executable, "-m", "cli", "pipeline", "run", str(path), "--until-caught-up"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # both worker ops ran (one process each) and reported their stats
    assert "worker_0" in done.stderr + done.stdout and "worker_1" in done.stderr + done.stdout
    # the workers' stats add up to the distinct changes, whatever a rebalance made them re-read (issue 22)
    assert f"total: changes={events.sent}," in done.stdout, done.stdout[-3000:]
    for t in TABLES:
        assert _as_state(_lake_rows(defn, db, t)) == events.state[t]


def test_parallel_bounded_run_on_single_partition_topics_reads_every_topic(tmp_path, kafka_bootstrap, topic_factory,
                                                                          postgres_service):
    """The README's shape (one topic of one partition per table) with ``pipeline.parallelism: 2``
    and ``--until-caught-up``: the worker ops join the group together, a member's first
    assignment may be empty and partitions move between them, yet neither stops before every
    topic is in the lake (it exited 0 with a table short of its last records)."""
    topics = [topic_factory(partitions=1) for _ in range(4)]
    dbs = [f"sp{i}_{uuid.uuid4().hex[:6]}" for i in range(4)]
    (tmp_path / "warehouse").mkdir()
    sink = {"type": "iceberg", "catalog.properties.type": "sql",
            "catalog.properties.uri": postgres_service.create_database(f"lake_{uuid.uuid4().hex[:10]}"),
            "catalog.properties.warehouse": f"file://{tmp_path / 'warehouse'}"}
    path = _pipeline_file(tmp_path, f"single-{dbs[0]}", kafka_bootstrap, ";".join(topics), sink, parallelism=2)
    defn = parse_pipeline(yaml.safe_load(path.read_text()), env={})
    writers = [Events(kafka_bootstrap, topic, db) for topic, db in zip(topics, dbs)]
    for writer in writers:
        for _ in range(400):
            writer._one()
        writer.producer.flush(30)
    env = cli_env(tmp_path / "state", kafka_bootstrap)
    done = subprocess.run([sys.executable, "-m", "cli", "pipeline", "run", str(path), "--until-caught-up"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for writer, db in zip(writers, dbs):
        for t in TABLES:
            assert _as_state(_lake_rows(defn, db, t)) == writer.state[t], (db, t)


def test_paimon_refuses_several_writers(tmp_path, kafka_bootstrap, topic_factory):
    from changelake.connectors.errors import OptionValidationError

    topic = topic_factory(partitions=2)
    sink = {"type": "paimon", "catalog.properties.metastore": "filesystem",
            "catalog.properties.warehouse": str(tmp_path / "paimon"), "commit.user": "it"}
    path = _pipeline_file(tmp_path, "paimon-workers", kafka_bootstrap, topic, sink, parallelism=2)
    defn = parse_pipeline(yaml.safe_load(path.read_text()), env={})
    with pytest.raises(OptionValidationError, match="does not take several writers"):
        run_pipeline(defn, until_caught_up=True, worker=True, worker_id="w0")


def _records_by_table(bootstrap: str, topic: str, partitions: int) -> list[tuple[str, int, int]]:
    """(table, partition, offset) of every record of the topic."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    out: list[tuple[str, int, int]] = []
    try:
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            pos = low
            while pos < high - 1:
                for m in consumer.consume(500, timeout=2):
                    if m.error():
                        continue
                    pos = max(pos, m.offset())
                    out.append((json.loads(m.key())["TableId"].split(".")[1], p, m.offset()))
    finally:
        consumer.close()
    return out


def test_changes_re_read_after_a_handover_are_counted_once(tmp_path, kafka_bootstrap, topic_factory, monkeypatch):
    """A worker dies after its tables committed but before its checkpoint entry (the window where
    the checkpoint lags the tables); its replacement re-reads from the checkpoint. The replacement's
    stats count only the changes the tables had not absorbed, so the workers' counts add up to the
    distinct changes (issue 22: a parallel run counted re-read records twice)."""
    from changelake.connectors.lake.changelog_sink import LakeOffsetsSink

    topic = topic_factory(partitions=2)
    db = f"hc_{uuid.uuid4().hex[:8]}"
    (tmp_path / "warehouse").mkdir()
    sink = {"type": "iceberg", "catalog.properties.type": "sql",
            "catalog.properties.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "catalog.properties.warehouse": f"file://{tmp_path / 'warehouse'}"}
    path = _pipeline_file(tmp_path, f"count-{db}", kafka_bootstrap, topic, sink, parallelism=2)
    defn = parse_pipeline(yaml.safe_load(path.read_text()), env={})
    events = Events(kafka_bootstrap, topic, db)
    for _ in range(1200):
        events._one()
    events.producer.flush(30)
    records = _records_by_table(kafka_bootstrap, topic, 2)
    assert len(records) == 1200

    original = LakeOffsetsSink._store

    def die_before_the_checkpoint(self, position):
        raise RuntimeError("worker died after its table commits, before its checkpoint entry")

    monkeypatch.setattr(LakeOffsetsSink, "_store", die_before_the_checkpoint)
    with pytest.raises(RuntimeError, match="before its checkpoint entry"):
        run_pipeline(defn, until_caught_up=True, worker=True, worker_id="w0", batch_size=500)
    monkeypatch.setattr(LakeOffsetsSink, "_store", original)

    # what the dead worker's tables absorbed: records below their tables' stored offsets
    lake = open_lake_sink(defn)
    try:
        committed = {t: lake.committed_offsets(TableId(db, t)) for t in TABLES}
    finally:
        lake.close()
    absorbed = sum(1 for t, p, o in records if o < committed[t].get(f"{topic}/{p}", 0))
    assert 0 < absorbed < len(records), committed

    replacement = run_pipeline(defn, until_caught_up=True, worker=True, worker_id="w0", batch_size=500)
    assert replacement.events == len(records)  # it re-read everything from the (empty) checkpoint ...
    assert sum(replacement.tables.values()) == len(records) - absorbed, replacement.tables  # ... counted once
    per_table = {t: sum(1 for r in records if r[0] == t and r[2] >= committed[t].get(f"{topic}/{r[1]}", 0))
                 for t in TABLES}
    assert replacement.tables == {f"{db}.{t}": n for t, n in per_table.items() if n}
    for t in TABLES:
        assert _as_state(_lake_rows(defn, db, t)) == events.state[t]
