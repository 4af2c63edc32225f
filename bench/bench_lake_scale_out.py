"""Pipeline 2 rows/s with ``pipeline.parallelism`` 1 and 2 (worker processes in one consumer group).

``--tables`` topics (one table each, one partition, Debezium-JSON inserts as in
``bench_lake_ingest.py``) of ``--events`` change events each are produced (not timed); then for
each parallelism a fresh lake ingests all topics until caught up. Printed: wall seconds (from
the call until every worker stopped, including process start-up and the group join), lake rows/s,
speed-up over one worker. Run from the repository root::

    .venv/bin/python bench/bench_lake_scale_out.py [--events 100000] [--tables 2] [--parallelism 1 --parallelism 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _upsert_kafka_common import kafka_broker, machine_note, print_table, progress  # noqa: E402
from bench_lake_ingest import _pipeline, _produce, _row, DB  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import json  # noqa: E402

from changelake.pipeline.runner import run_pipeline  # noqa: E402


def _inserts(table: str, events: int):
    for k in range(events):
        source = {"db": DB, "table": table, "ts_ms": 1}
        yield json.dumps({"before": None, "after": _row(k, 0), "op": "c", "source": source}, separators=(",", ":")).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000, help="change events per table")
    parser.add_argument("--tables", type=int, default=2)
    parser.add_argument("--parallelism", type=int, action="append", default=None)
    args = parser.parse_args()
    rows = []
    with kafka_broker() as kafka:
        stamp = int(time.time())
        topics = [f"scale-{stamp}-{i}" for i in range(args.tables)]
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        for topic in topics:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
        for i, topic in enumerate(topics):
            _produce(kafka.bootstrap_servers, topic, _inserts(f"t{i}", args.events))
        progress(f"{args.tables} topics x {args.events:,} inserts produced")
        base = None
        for n in args.parallelism or [1, 2]:
            with tempfile.TemporaryDirectory(prefix="changelake-bench-scale-") as tmp:
                defn = _pipeline(kafka.bootstrap_servers, ";".join(topics), Path(tmp), "iceberg")
                defn = replace(defn, name=f"scale-{stamp}-p{n}", pipeline={**defn.pipeline, "name": f"scale-{stamp}-p{n}",
                                                                           "parallelism": str(n)})
                progress(f"parallelism {n}: ingesting")
                start = time.perf_counter()
                stats = run_pipeline(defn, until_caught_up=True)
                wall = time.perf_counter() - start
            total = args.tables * args.events
            assert stats.events >= total, (stats.events, total)  # a rebalance may re-read (not re-apply) records
            rate = total / wall
            base = base or rate
            rows.append([f"parallelism {n}", total, round(wall, 2), round(rate), rate / base])
    print(machine_note())
    print_table(["run", "events", "wall s", "lake rows/s", "speed-up"], rows)


if __name__ == "__main__":
    main()
