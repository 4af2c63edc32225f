"""Kafka -> committed lake snapshot latency of an unbounded Pipeline 2 at a steady produce rate.

A producer writes Debezium-JSON change events (inserts, then updates of random existing keys) to
one topic at ``--rate`` events/s for ``--seconds`` while Pipeline 2 runs unbounded with the
default ``commit.interval`` (10 s) and ``commit.max-rows``. Each record's latency is the time from
its delivery report (acknowledged by Kafka) to the end of the first commit whose lake
snapshot summary covers its offset. Prints p50 / p99 / max latency and the commits. Run from the
repository root::

    .venv/bin/python bench/bench_lake_latency.py [--rate 1500] [--seconds 60]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _upsert_kafka_common import kafka_broker, machine_note, print_table, progress  # noqa: E402
from bench_lake_ingest import DB, TABLE, _event, _pipeline, _row  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from changelake.connectors.iceberg import open_catalog, parse_sink_options  # noqa: E402
from changelake.connectors.iceberg.offsets import read_committed_offsets  # noqa: E402
from changelake.pipeline.runner import run_pipeline  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=1500, help="events per second")
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args()
    with kafka_broker() as kafka, tempfile.TemporaryDirectory(prefix="changelake-bench-latency-") as tmp:
        topic = f"latency-{int(time.time())}"
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
        defn = _pipeline(kafka.bootstrap_servers, topic, Path(tmp), "iceberg")
        catalog = open_catalog(parse_sink_options(defn.options("sink")))
        acked: dict[int, float] = {}
        commits: list[tuple[float, int]] = []  # (time, next offset in the table snapshot)

        def on_batch(_: dict[str, Any]) -> None:
            # on_batch runs once the tables committed: their snapshot summaries hold the offsets.
            table = catalog.load_table((DB, TABLE))
            commits.append((time.perf_counter(), read_committed_offsets(table).get(f"{topic}/0", 0)))

        stop = threading.Event()
        runner = threading.Thread(target=lambda: run_pipeline(defn, stop=stop, on_batch=on_batch), daemon=True)
        runner.start()
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5})

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                acked[msg.offset()] = time.perf_counter()

        rng, keys, start = random.Random(7), 0, time.perf_counter()
        progress(f"producing {args.rate} events/s for {args.seconds} s; Pipeline 2 runs unbounded")
        for i in range(args.rate * args.seconds):
            due = start + i / args.rate
            while time.perf_counter() < due:
                producer.poll(0.001)
            if keys < 1000 or rng.random() < 0.4:
                value = _event("c", None, _row(keys, 0), 1)
                keys += 1
            else:
                k = rng.randrange(keys)
                value = _event("u", _row(k, 0), _row(k, 1), 1)
            producer.produce(topic, value=value, on_delivery=delivered)
        producer.flush(30)
        last = max(acked)
        deadline = time.perf_counter() + 120
        while (not commits or commits[-1][1] <= last) and time.perf_counter() < deadline:
            time.sleep(0.5)
        stop.set()
        runner.join(60)
    latencies = []
    for offset, t_ack in acked.items():
        t_commit = next((t for t, covered in commits if covered > offset), None)
        if t_commit is not None:
            latencies.append(t_commit - t_ack)
    latencies.sort()
    print(machine_note())
    print_table(
        ["rate ev/s", "events", "commits", "latency p50 s", "p99 s", "max s", "not committed"],
        [[args.rate, len(acked), len(commits), statistics.median(latencies), latencies[int(0.99 * (len(latencies) - 1))],
          latencies[-1], len(acked) - len(latencies)]],
    )


if __name__ == "__main__":
    main()
