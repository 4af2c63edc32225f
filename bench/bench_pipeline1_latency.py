"""Pipeline 1 commit -> visible latency at a steady rate, changelake against Debezium 3.6.1.

One throw-away MariaDB (as ``bench_pipeline1.py``) and Kafka. For each reader in turn (changelake
exactly-once and at-least-once with the binlog reader in a thread, exactly-once with it in a
worker process, Debezium on Kafka Connect standalone), the reader is
started and allowed to settle, then a rate-limited writer inserts ``--rate`` rows/s into
``lat.events`` for ``--seconds`` seconds, in transactions of ``--rows-per-tx`` rows issued on a
fixed schedule. Each row carries its transaction's number (``tx``); the writer notes the wall
clock when ``COMMIT`` returned. A consumer with ``isolation.level=read_committed`` reads the
reader's topic and notes the wall clock when it sees each record. Latency = seen - committed,
per row (same machine, same clock), in ms; the first ``--warmup`` seconds of rows are left out.

    .venv/bin/python bench/bench_pipeline1_latency.py                  # 5k rows/s, 30 s per reader, ~4 min
    .venv/bin/python bench/bench_pipeline1_latency.py --rate 2000 --seconds 20 --skip-debezium

Columns: rows seen / written, the achieved write rate, latency p50 / p99 / max in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _upsert_kafka_common import kafka_broker, machine_note, print_table, progress  # noqa: E402
from bench_pipeline1 import _wait_rest, mariadb, sql, start_debezium, stop_process  # noqa: E402

from changelake.pipeline.definition import parse_pipeline  # noqa: E402
from changelake.pipeline.runner import run_pipeline  # noqa: E402

DB = "lat"
TABLE = f"CREATE TABLE {DB}.events (id BIGINT AUTO_INCREMENT PRIMARY KEY, tx BIGINT NOT NULL, k INT NOT NULL, " \
        "c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL)"


def write_steady(db: Any, rate: int, seconds: float, rows_per_tx: int) -> tuple[dict[int, float], int, float]:
    """Insert ``rate`` rows/s for ``seconds``; (tx -> wall clock after COMMIT, rows, seconds taken)."""
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=db.port, user=db.user, password=db.password, database=DB)
    committed: dict[int, float] = {}
    interval = rows_per_tx / rate
    stmt = "INSERT INTO events (tx, k, c, pad) VALUES " + ",".join(["(%s, %s, %s, %s)"] * rows_per_tx)
    c, pad = "x" * 119, "y" * 59
    start = time.monotonic()
    n_tx = int(seconds * rate / rows_per_tx)
    try:
        with conn.cursor() as cur:
            for tx in range(n_tx):
                due = start + tx * interval
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                args: list[Any] = []
                for i in range(rows_per_tx):
                    args += [tx, i, c, pad]
                cur.execute(stmt, args)
                conn.commit()
                committed[tx] = time.time()
    finally:
        conn.close()
    return committed, n_tx * rows_per_tx, time.monotonic() - start


class Watcher(threading.Thread):
    """read_committed consumer noting (tx, wall clock seen) per record of ``topics``."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex[:6]}",
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.subscribe(topics)
        self.seen: list[tuple[int, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for m in self.consumer.consume(1000, timeout=0.05):
                now = time.time()
                if m.error() or m.value() is None:
                    continue
                value = json.loads(m.value())
                after = value.get("after") or (value.get("payload") or {}).get("after")
                if after is not None:
                    self.seen.append((int(after["tx"]), now))
        self.consumer.close()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def measure(args: argparse.Namespace, db: Any, bootstrap: str, topics: list[str]) -> dict[str, Any]:
    watcher = Watcher(bootstrap, topics)
    watcher.start()
    committed, rows, took = write_steady(db, args.rate, args.seconds, args.rows_per_tx)
    deadline = time.monotonic() + 60
    while len(watcher.seen) < rows and time.monotonic() < deadline:
        time.sleep(0.2)
    watcher.stop.set()
    watcher.join(timeout=10)
    skip_tx = int(args.warmup * args.rate / args.rows_per_tx)
    lat = [(seen - committed[tx]) * 1000 for tx, seen in watcher.seen if tx >= skip_tx and tx in committed]
    return {"rows": rows, "seen": len(watcher.seen), "rate": rows / took, "p50": percentile(lat, 50),
            "p99": percentile(lat, 99), "max": max(lat) if lat else float("nan")}


def run_changelake(args: argparse.Namespace, db: Any, bootstrap: str, guarantee: str, reader: str = "thread") -> dict[str, Any]:
    os.environ["CHANGELAKE_MYSQL_CDC_READER"] = reader  # read when the source starts its binlog reader
    try:
        return _run_changelake(args, db, bootstrap, guarantee)
    finally:
        os.environ.pop("CHANGELAKE_MYSQL_CDC_READER", None)


def _run_changelake(args: argparse.Namespace, db: Any, bootstrap: str, guarantee: str) -> dict[str, Any]:
    name = f"lat-{guarantee}-{uuid.uuid4().hex[:4]}"
    topic = f"{name}-out"
    defn = parse_pipeline({
        "pipeline": {"name": name},
        "source": {"type": "mysql", "hostname": "127.0.0.1", "port": db.port, "username": db.user,
                   "password": db.password, "tables": f"{DB}.events", "server-id": str(6000 + hash(name) % 1000),
                   "scan.startup.mode": "latest-offset"},
        "sink": {"type": "kafka", "properties.bootstrap.servers": bootstrap, "topic": topic,
                 "value.format": "debezium-json", "sink.delivery-guarantee": guarantee},
    }, env={})
    stop = threading.Event()
    failure: list[BaseException] = []

    def pipeline() -> None:
        try:
            run_pipeline(defn, stop=stop)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failure.append(exc)

    thread = threading.Thread(target=pipeline, daemon=True)
    thread.start()
    time.sleep(args.settle)
    try:
        return measure(args, db, bootstrap, [topic])
    finally:
        stop.set()
        thread.join(timeout=60)
        if failure:
            raise failure[0]


def run_debezium(args: argparse.Namespace, db: Any, bootstrap: str, home: Path) -> dict[str, Any]:
    name = f"dbzl{uuid.uuid4().hex[:4]}"
    proc, port, log = start_debezium(db, bootstrap, home / name, name, f"{DB}.events", "no_data")
    try:
        _wait_rest(port, f"/connectors/{name}/status",
                   lambda s: s["connector"]["state"] == "RUNNING" and s["tasks"] and s["tasks"][0]["state"] == "RUNNING",
                   180, proc, log)
        # streaming starts after its schema-only snapshot: wait until its binlog client says it connected
        deadline = time.monotonic() + 120
        while b"BinaryLogClient connect" not in log.read_bytes():
            if time.monotonic() > deadline:
                raise TimeoutError(f"Debezium did not start streaming; log {log}")
            time.sleep(0.5)
        time.sleep(args.settle)
        return measure(args, db, bootstrap, [f"{name}.{DB}.events"])
    finally:
        stop_process(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=5000, help="rows/s written")
    ap.add_argument("--seconds", type=float, default=30.0, help="writing time per reader")
    ap.add_argument("--rows-per-tx", type=int, default=50)
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds of rows left out of the percentiles")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds between a reader's start and the writer's")
    ap.add_argument("--skip-debezium", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="changelake-bench-lat-") as tmp, kafka_broker() as kafka, \
            mariadb(Path(tmp)) as db:
        sql(db, f"CREATE DATABASE {DB}", TABLE)
        rows = []
        readers: list[tuple[str, Any]] = [
            ("changelake exactly-once", lambda: run_changelake(args, db, kafka.bootstrap_servers, "exactly-once")),
            ("changelake at-least-once", lambda: run_changelake(args, db, kafka.bootstrap_servers, "at-least-once")),
            ("changelake exactly-once, process reader",
             lambda: run_changelake(args, db, kafka.bootstrap_servers, "exactly-once", "process")),
        ]
        if not args.skip_debezium:
            readers.append(("Debezium 3.6.1 (Connect standalone)",
                            lambda: run_debezium(args, db, kafka.bootstrap_servers, Path(tmp))))
        for label, run in readers:
            progress(f"{label}: {args.rate:,} rows/s for {args.seconds:.0f} s ...")
            res = run()
            progress(f"  seen {res['seen']:,} / {res['rows']:,}, p50 {res['p50']:.0f} ms, p99 {res['p99']:.0f} ms")
            rows.append([label, f"{res['seen']:,} / {res['rows']:,}", round(res["rate"]), round(res["p50"], 1),
                         round(res["p99"], 1), round(res["max"], 1)])
    print(f"commit -> visible (read_committed) latency, {args.rate:,} rows/s in transactions of {args.rows_per_tx} rows, "
          f"{args.seconds:.0f} s per reader, first {args.warmup:.0f} s left out")
    print_table(["reader", "rows seen / written", "write rows/s", "p50 ms", "p99 ms", "max ms"], rows)
    print(f"machine: {machine_note()}")


if __name__ == "__main__":
    main()
