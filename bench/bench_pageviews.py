"""Benchmark of the page-views aggregation (PV/UV per region): events per second.

Two parts:

1. the operator alone (:class:`GroupAggregate`, in memory): per-row emission vs mini-batch;
2. end to end on a real Kafka: ``pageviews`` topic (json) -> aggregation -> upsert-kafka topic
   (avro), for each delivery guarantee, with and without mini-batch; every run's result is
   checked against the DuckDB recomputation (a wrong result aborts the benchmark).

Kafka: ``--bootstrap host:port`` (or ``$CHANGELAKE_KAFKA_BOOTSTRAP``) uses your broker; otherwise
a throw-away single-node broker is started on free ports in a temp dir and stopped at the end.

Run: ``.venv/bin/python bench/bench_pageviews.py [-n 100000] [--bootstrap host:port]``.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from changelake.changelog import ChangelogRow, RowKind  # noqa: E402
from changelake.connectors.kafka_common import ensure_topics  # noqa: E402
from changelake.pageviews import (  # noqa: E402
    generate_pageviews,
    pageviews_aggregate,
    pageviews_sink_options,
    produce_pageviews,
    read_upsert_topic_final_state,
    recompute_pv_uv,
    run_pageviews_aggregation,
)


@contextlib.contextmanager
def kafka(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from changelake.services import KafkaService, free_port

    with tempfile.TemporaryDirectory(prefix="changelake-bench-pv-") as home:
        k = KafkaService(home=Path(home) / "kafka", port=free_port(), controller_port=free_port())
        k.start()
        try:
            yield k.bootstrap_servers
        finally:
            k.stop()


def bench_operator(n: int) -> None:
    events = generate_pageviews(n, seed=1)
    rows = [ChangelogRow(RowKind.INSERT, e) for e in events]
    truth = recompute_pv_uv(events)
    for label, mini in (("per-row (+I/-U/+U per event)", False), ("mini-batch of 2000", True)):
        agg = pageviews_aggregate()
        t0 = time.perf_counter()
        out = 0
        if mini:
            for i in range(0, n, 2000):
                out += len(agg.process_batch(rows[i:i + 2000]))
        else:
            for r in rows:
                out += len(agg.process(r))
        dt = time.perf_counter() - t0
        got = {k[0]: (v["pv"], v["uv"]) for k, v in agg.result().items()}
        assert got == truth, "operator result differs from DuckDB"
        print(f"  operator {label:32s} {n / dt:12,.0f} events/s   {out:9,d} changelog rows")


def bench_end_to_end(bootstrap: str, n: int, partitions: int) -> None:
    events = generate_pageviews(n, seed=2)
    source = f"bench-pageviews-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, [source], partitions)
    t0 = time.perf_counter()
    produce_pageviews(bootstrap, source, events)
    print(f"  produced {n:,d} json events in {time.perf_counter() - t0:.1f} s ({n / (time.perf_counter() - t0):,.0f} events/s)")
    truth = recompute_pv_uv(events)
    for guarantee in ("none", "at-least-once", "exactly-once"):
        for mini in (True, False):
            sink = f"bench-pv-region-{uuid.uuid4().hex[:8]}"
            opts = pageviews_sink_options(bootstrap, sink, transactional_id_prefix=f"bench-{sink}")
            with tempfile.TemporaryDirectory() as state:
                stats = run_pageviews_aggregation(bootstrap, source, opts, guarantee, state, mini_batch=mini, batch_size=2000)
            got = read_upsert_topic_final_state(bootstrap, sink)
            assert got == truth, f"{guarantee}: upsert topic differs from DuckDB: {got} != {truth}"
            print(
                f"  {guarantee:14s} mini-batch={'on ' if mini else 'off'} {stats.events_per_s:10,.0f} events/s   "
                f"{stats.records_written:9,d} records out   {stats.batches:5d} batches   {stats.elapsed_s:6.1f} s"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=100_000, help="events (default 100000)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of the pageviews topic")
    ap.add_argument("--bootstrap", default=os.environ.get("CHANGELAKE_KAFKA_BOOTSTRAP"))
    args = ap.parse_args()
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"page-views PV/UV per region, {args.n:,d} events; {os.cpu_count()} CPUs, load {load}, "
          f"{platform.python_implementation()} {platform.python_version()}")
    bench_operator(args.n)
    with kafka(args.bootstrap) as bootstrap:
        bench_end_to_end(bootstrap, args.n, args.partitions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
