"""Pipeline 2 with 1, 2 and 4 workers on one 4-partition topic, and the commit conflicts they meet.

``--events`` Debezium-JSON inserts of one table are produced (not timed) to a topic of 4
partitions (keyed by id, so every partition holds part of the table: every worker writes the same
Iceberg table). Then for each worker count a fresh lake (pyiceberg's SQL catalog on a local
PostgreSQL, the catalog several machines would share) ingests the topic until caught up, each
worker a process running the engine's worker call (``run_pipeline(worker=True)``, as a Dagster
worker op or ``changelake pipeline run --worker`` does). Printed: wall seconds (from the start
until every worker stopped, process start-up and the group join included), lake rows/s,
speed-up over one worker, table commits, and commit-conflict redos per table commit (a commit
that lost the race to another worker and was redone against the winner's offsets).

Honest about this machine: with 2 cores, 4 workers share 2 cores with Kafka and PostgreSQL, and
every worker rewrites the same table, so conflicts grow with the worker count; the figures show
the cost of the commit rule, not a speed-up that 2 cores cannot give. Run from the repository root::

    .venv/bin/python bench/bench_lake_scale_out.py [--events 40000] [--workers 1 --workers 2 --workers 4]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _upsert_kafka_common import kafka_broker, machine_note, print_table, progress  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from changelake.pipeline.definition import parse_pipeline  # noqa: E402
from changelake.services import PostgresService, free_port  # noqa: E402

DB, TABLE, PARTITIONS = "bench", "orders", 4


def _produce(bootstrap: str, topic: str, events: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for k in range(events):
        after = {"id": k, "customer": f"customer-{k % 9973}", "amount": round(k * 0.37, 2), "version": 0}
        value = {"before": None, "after": after, "op": "c", "source": {"db": DB, "table": TABLE, "ts_ms": 1}}
        key = json.dumps({"TableId": f"{DB}.{TABLE}", "id": k}, separators=(",", ":"))
        producer.produce(topic, key=key, value=json.dumps(value, separators=(",", ":")))
        if k % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)


def _worker(block: dict[str, Any], worker_id: str, out: Any) -> None:
    from changelake.pipeline.runner import run_pipeline

    stats = run_pipeline(parse_pipeline(block, env={}), until_caught_up=True, worker=True, worker_id=worker_id)
    out.put({"worker": worker_id, "events": stats.events, "metrics": dict(stats.metrics)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=40_000, help="change events (inserts) on the topic")
    parser.add_argument("--workers", type=int, action="append", default=None)
    args = parser.parse_args()
    rows = []
    context = mp.get_context("spawn")
    with kafka_broker() as kafka, tempfile.TemporaryDirectory(prefix="changelake-bench-scale-") as tmp:
        postgres = PostgresService(Path(tmp) / "postgres", port=free_port())
        postgres.start()
        try:
            topic = f"scale-{uuid.uuid4().hex[:8]}"
            admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
            _produce(kafka.bootstrap_servers, topic, args.events)
            progress(f"{args.events:,} inserts produced to {PARTITIONS} partitions")
            base = None
            for n in args.workers or [1, 2, 4]:
                name = f"scale-{uuid.uuid4().hex[:8]}-w{n}"
                (Path(tmp) / name).mkdir()
                block = {
                    "pipeline": {"name": name, "parallelism": str(n)},
                    "source": {"type": "kafka", "properties.bootstrap.servers": kafka.bootstrap_servers, "topic": topic,
                               "scan.startup.mode": "earliest-offset", "value.format": "debezium-json",
                               "debezium-json.distributed-tables": "true"},
                    "transform": [{"source-table": "\\.*.\\.*", "projection": "\\*", "primary-keys": "id"}],
                    "sink": {"type": "iceberg", "catalog.properties.type": "sql",
                             "catalog.properties.uri": postgres.create_database(name.replace("-", "_")),
                             "catalog.properties.warehouse": f"file://{Path(tmp) / name}",
                             "commit.max-rows": "5000"},
                }
                progress(f"{n} worker(s): ingesting")
                out = context.Queue()
                start = time.perf_counter()
                procs = [context.Process(target=_worker, args=(block, f"w{i}", out)) for i in range(n)]
                for p in procs:
                    p.start()
                results = [out.get(timeout=1800) for _ in procs]
                for p in procs:
                    p.join()
                wall = time.perf_counter() - start
                assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
                commits = sum(r["metrics"].get("table_commits", 0) for r in results)
                redos = sum(r["metrics"].get("commit_redos", 0) for r in results)
                rate = args.events / wall
                base = base or rate
                rows.append([f"{n} worker(s)", args.events, round(wall, 1), round(rate), round(rate / base, 2), commits,
                             redos, round(redos / commits, 2) if commits else 0.0])
        finally:
            postgres.stop()
    print(machine_note())
    print_table(["run", "events", "wall s", "lake rows/s", "speed-up", "table commits", "conflict redos",
                 "redos/commit"], rows)


if __name__ == "__main__":
    main()
