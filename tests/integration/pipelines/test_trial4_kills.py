"""Trial 4 (a newcomer breaking the platform): SIGKILLs on both pipelines while MySQL keeps writing.

Pipeline 1 (``hash-by-key`` on 3 partitions) is killed twice in the middle of its initial snapshot —
the lock-free one and the incremental (chunked) one — while a writer updates, deletes, inserts and
moves primary keys; it is restarted to the end. Then Pipeline 2 runs as worker processes of one
consumer group (two on Iceberg, one on Paimon), one killed in the middle of its run while the writer
goes on, and is restarted. The lake must equal MySQL (the key-state check), without duplicate keys.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
from dataclasses import replace

import pymysql
import pytest

from changelake.changelog import TableId
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration

HASH3 = {"partition.strategy": "hash-by-key", "sink.topic.partitions": 3}

CHILD = textwrap.dedent(
    """
    import json, sys
    from changelake.pipeline.definition import parse_pipeline
    from changelake.pipeline.runner import run_pipeline
    defn = parse_pipeline(json.loads(sys.argv[1]), env={})
    worker = sys.argv[2] if len(sys.argv) > 2 else None
    run_pipeline(defn, until_caught_up=True, batch_size=200, worker=worker is not None, worker_id=worker,
                 on_batch=lambda b: print("batch", flush=True))
    """
)


class Writer:
    """A background MySQL session changing ``t`` until stopped: updates, deletes, inserts, key moves."""

    def __init__(self, mysql_params: dict, db: str, seed: int) -> None:
        self._params, self._db, self._rng = mysql_params, db, random.Random(seed)
        self._stop = threading.Event()
        self._next_id = seed * 1_000_000  # disjoint from the other writer and the 6000 rows
        self.statements = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Writer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.error is None, self.error

    def _run(self) -> None:
        try:
            conn = pymysql.connect(**self._params, database=self._db, autocommit=True)
            with conn.cursor() as cur:
                while not self._stop.is_set():
                    k = self._rng.randint(1, 6000)
                    op = self._rng.random()
                    if op < 0.5:
                        cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (k,))
                    elif op < 0.65:
                        cur.execute("DELETE FROM t WHERE id = %s", (k,))
                    elif op < 0.8:
                        self._next_id += 1
                        cur.execute("INSERT INTO t VALUES (%s, 1, 'new')", (self._next_id,))
                    else:
                        self._next_id += 1
                        cur.execute("UPDATE t SET id = %s, v = v + 1000 WHERE id = %s", (self._next_id, k))
                    self.statements += 1
                    # ~150 changes a second, as the other live writers: changes keep arriving around
                    # every kill, without a backlog the pipelines spend most of the test replaying
                    self._stop.wait(0.005)
            conn.close()
        except BaseException as exc:  # noqa: BLE001 - re-raised in __exit__
            self.error = exc


def _start(raw: dict, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(raw), *args], stdout=subprocess.PIPE,
                            text=True, env=env)


def _wait_for_first_batch(child: subprocess.Popen) -> None:
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("batch"), line


def _kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)


def _kill_after_first_batch(child: subprocess.Popen) -> None:
    _wait_for_first_batch(child)
    _kill(child)


def _as_raw(defn) -> dict:
    raw = {"pipeline": dict(defn.pipeline), "source": dict(defn.source), "sink": dict(defn.sink)}
    if defn.transform:
        raw["transform"] = list(defn.transform)
    return raw


@pytest.mark.parametrize("snapshot", [{"scan.incremental.snapshot.chunk.size": "500"},
                                      {"scan.incremental.snapshot.enabled": "true",
                                       "scan.incremental.snapshot.chunk.size": "500"}],
                         ids=["lock-free", "incremental"])
def test_sigkill_of_both_pipelines_mid_run_with_writes_going_on_keeps_the_lake_exact(
        database_factory, mysql_exec, mysql_params, pipeline_pair, lake, snapshot):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, pad CHAR(100))",
               "INSERT INTO t SELECT seq, 0, 'x' FROM seq_1_to_6000")
    p1, p2 = pipeline_pair(db, ["t"], p1_extra=HASH3)
    p1 = replace(p1, source={**p1.source, **snapshot})
    if "scan.incremental.snapshot.enabled" in snapshot:
        base = int(p1.source["server-id"])
        p1 = replace(p1, source={**p1.source, "server-id": f"{base}-{base + 1}"})
    workers = 2 if lake == "iceberg" else 1
    p2 = replace(p2, pipeline={**p2.pipeline, "parallelism": str(workers)},
                 sink={**p2.sink, "commit.max-rows": "300"})
    t = TableId(db, "t")

    raw1 = _as_raw(p1)
    with Writer(mysql_params, db, seed=1) as writer:
        for _ in range(2):
            _kill_after_first_batch(_start(raw1))
    assert writer.statements > 0
    run_pipeline(p1, until_caught_up=True, batch_size=300)

    raw2 = _as_raw(p2)
    with Writer(mysql_params, db, seed=2) as writer:
        if workers == 2:
            # the victim starts first and the survivor joins once it has committed a batch: started
            # the other way round, the survivor could drain the (static) topics before the victim
            # got a partition, and the victim would exit caught up without a batch to be killed after
            victim = _start(raw2, "w0")
            _wait_for_first_batch(victim)
            survivor = _start(raw2, "w1")
            _kill(victim)
            assert survivor.wait(timeout=300) == 0
        else:
            _kill_after_first_batch(_start(raw2))
    assert writer.statements > 0
    run_pipeline(p1, until_caught_up=True)

    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            run_pipeline(p2, until_caught_up=True, worker=workers > 1, worker_id=f"w{i}" if workers > 1 else None)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(workers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    assert not errors, errors

    ids = [r["id"] for r in read_lake_table(p2, t).to_pylist()]
    assert len(ids) == len(set(ids)), "a duplicate key in the lake"
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, result.metadata()
