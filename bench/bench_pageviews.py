"""Benchmark of the page-views aggregation (PV/UV per region): events per second.

Parts (``--parts``, default ``operator,flink``):

1. ``operator``: the operator alone (:class:`GroupAggregate`, in memory): per-row emission,
   mini-batch of rows, mini-batch of Arrow columns;
2. ``e2e``: end to end on a real Kafka: ``pageviews`` topic (json) -> aggregation -> upsert-kafka
   topic (avro), for each delivery guarantee, with and without mini-batch;
3. ``flink``: against its peer, the seed's query on Flink SQL (``bench/flink_sql``: a MiniCluster
   in one JVM, kafka source, upsert-kafka sink with avro key and value, Flink's jars from Maven
   Central), ``--rounds`` interleaved rounds on the same input topic of ``-n`` events. Each run is
   its own process (``python -m changelake.pageviews run`` / ``java ... PageviewsPerRegion``)
   writing a fresh output topic. *Whole process* is events / seconds from spawning the process
   to its exit (interpreter or JVM start-up, connecting, reading the topic to its end offsets,
   last output acknowledged). *Steady state* is events / seconds between the first and the last
   record of the output topic (their CreateTime). Ratios are ours / Flink's, median over rounds.

Every run's output topic is read back and checked against the DuckDB recomputation (a wrong
result aborts the benchmark).

Kafka: ``--bootstrap host:port`` (or ``$CHANGELAKE_KAFKA_BOOTSTRAP``) uses your broker; otherwise
a throw-away single-node broker is started on free ports in a temp dir and stopped at the end.

Run: ``.venv/bin/python bench/bench_pageviews.py [-n 1000000] [--rounds 2] [--parts operator,flink,e2e]
[--bootstrap host:port]``.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator

import pyarrow as pa

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
    columns = pa.table({"user_id": [e["user_id"] for e in events], "user_region": [e["user_region"] for e in events]})
    for label, mode in (("per-row (+I/-U/+U per event)", "row"), ("mini-batch of 2000 rows", "batch"),
                        ("mini-batch of 2000, Arrow columns", "arrow")):
        agg = pageviews_aggregate()
        t0 = time.perf_counter()
        out = 0
        if mode == "batch":
            for i in range(0, n, 2000):
                out += len(agg.process_batch(rows[i:i + 2000]))
        elif mode == "arrow":
            for i in range(0, n, 2000):
                out += len(agg.process_arrow(columns.slice(i, 2000)))
        else:
            for r in rows:
                out += len(agg.process(r))
        dt = time.perf_counter() - t0
        got = {k[0]: (v["pv"], v["uv"]) for k, v in agg.result().items()}
        assert got == truth, "operator result differs from DuckDB"
        print(f"  operator {label:36s} {n / dt:12,.0f} events/s   {out:9,d} changelog rows")


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


FLINK_DIR = Path(__file__).resolve().parent / "flink_sql"
REPO = Path(__file__).resolve().parents[1]
JAVA_OPENS = [
    f"--add-opens=java.base/{p}=ALL-UNNAMED"
    for p in ("java.lang", "java.util", "java.lang.reflect", "java.io", "java.net", "java.nio", "sun.nio.ch",
              "java.text", "java.time", "java.util.concurrent", "java.util.concurrent.atomic", "java.lang.invoke")
]


def build_flink() -> str:
    """Build bench/flink_sql once (jars from Maven Central into ~/.m2); returns its classpath."""
    deps = FLINK_DIR / "target" / "deps"
    classes = FLINK_DIR / "target" / "classes"
    if not (classes / "changelake" / "bench" / "PageviewsPerRegion.class").exists() or not deps.exists():
        subprocess.run(["mvn", "-q", "-B", "-f", str(FLINK_DIR / "pom.xml"), "package", "dependency:copy-dependencies"],
                       check=True)
    return f"{classes}:{deps}/*"


def output_span(bootstrap: str, topic: str) -> tuple[int, float]:
    """(records, seconds between the first and the last record's CreateTime) of a topic."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-span-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        first, last, n = None, None, 0
        todo = {p for p, e in ends.items() if e > 0}
        deadline = time.monotonic() + 300
        while todo and time.monotonic() < deadline:
            for m in c.consume(10000, 1.0):
                if m.error():  # the end of a partition (a transactional topic ends in a commit marker)
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(m.partition())
                    continue
                ts = m.timestamp()[1]
                first = ts if first is None else min(first, ts)
                last = ts if last is None else max(last, ts)
                n += 1
    finally:
        c.close()
    return n, ((last or 0) - (first or 0)) / 1000.0


def run_ours(bootstrap: str, source: str, sink: str, guarantee: str, batch_size: int) -> dict[str, float]:
    cmd = [sys.executable, "-m", "changelake.pageviews", "run", "--bootstrap", bootstrap, "--source-topic", source,
           "--sink-topic", sink, "--delivery-guarantee", guarantee, "--group-id", f"bench-{sink}",
           "--batch-size", str(batch_size)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"changelake run failed: {proc.stderr[-2000:]}")
    return {"process_s": wall}


def run_flink(bootstrap: str, source: str, sink: str, classpath: str, parallelism: int, mini_batch: bool) -> dict[str, float]:
    cmd = ["java", "-Xmx1g", *JAVA_OPENS, "-cp", classpath, "changelake.bench.PageviewsPerRegion",
           bootstrap, source, sink, f"bench-{sink}", str(parallelism), str(mini_batch).lower()]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"Flink run failed: {(proc.stdout + proc.stderr)[-3000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    return {"process_s": wall, **json.loads(line)}


def bench_vs_flink(bootstrap: str, n: int, partitions: int, rounds: int, guarantee: str, batch_size: int,
                   parallelism: int, flink_mini_batch: bool) -> None:
    classpath = build_flink()
    events = generate_pageviews(n, seed=5)
    source = f"bench-pageviews-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, [source], partitions)
    t0 = time.perf_counter()
    produce_pageviews(bootstrap, source, events)
    print(f"  produced {n:,d} json events into {partitions} partition(s) in {time.perf_counter() - t0:.1f} s (not timed)")
    truth = recompute_pv_uv(events)
    del events
    table = []
    ratios: dict[str, list[float]] = {"whole": [], "steady": []}
    for rnd in range(1, rounds + 1):
        got: dict[str, dict[str, float]] = {}
        order = ("ours", "flink") if rnd % 2 else ("flink", "ours")  # interleaved, alternating who goes first
        for who in order:
            sink = f"bench-pv-{who}-{uuid.uuid4().hex[:8]}"
            ensure_topics(bootstrap, [sink], 1, {"cleanup.policy": "compact"})
            if who == "ours":
                res = run_ours(bootstrap, source, sink, guarantee, batch_size)
                label = f"changelake ({guarantee}, mini-batch {batch_size:,})"
            else:
                res = run_flink(bootstrap, source, sink, classpath, parallelism, flink_mini_batch)
                label = f"Flink SQL ({'mini-batch' if flink_mini_batch else 'default'}, parallelism {parallelism})"
            records, span = output_span(bootstrap, sink)
            print(f"  round {rnd}: {label}: {res['process_s']:.1f} s whole process, {span:.1f} s first -> last output, "
                  f"{records:,} records out", file=sys.stderr, flush=True)
            final = read_upsert_topic_final_state(bootstrap, sink, fmt="avro", timeout_s=1800.0)
            if final != truth:
                raise RuntimeError(f"{label}: output topic differs from DuckDB: {final} != {truth}")
            res.update(records=records, span_s=span)
            got[who] = res
            table.append([rnd, label, records, res["process_s"], n / res["process_s"], span, n / span if span > 0 else 0.0])
        ratios["whole"].append(got["flink"]["process_s"] / got["ours"]["process_s"])
        if got["ours"]["span_s"] > 0 and got["flink"]["span_s"] > 0:
            ratios["steady"].append(got["flink"]["span_s"] / got["ours"]["span_s"])
    print()
    print(f"page views PV/UV per region, {n:,d} events, {partitions} partition(s); {machine()}")
    headers = ["round", "engine", "records out", "process s", "events/s whole", "first->last s", "events/s steady"]
    widths = [max(len(h), *(len(_cell(r[i])) for r in table)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) if i == 1 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths))))
    print("  ".join("-" * w for w in widths))
    for r in table:
        print("  ".join(_cell(v).ljust(w) if i == 1 else _cell(v).rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    for k, label in (("whole", "whole process"), ("steady", "steady state (first -> last output)")):
        if ratios[k]:
            print(f"ours / Flink SQL, {label}: median {statistics.median(ratios[k]):.2f}x "
                  f"(rounds: {', '.join(f'{x:.2f}' for x in ratios[k])})")


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.2f}" if v < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def machine() -> str:
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs, load average {load} (1/5/15 min), {platform.python_implementation()} {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1_000_000, help="events (default 1000000)")
    ap.add_argument("--parts", default="operator,flink", help="comma-separated: operator, e2e, flink")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds against Flink (default 2)")
    ap.add_argument("--guarantee", default="at-least-once", choices=["none", "at-least-once", "exactly-once"],
                    help="our delivery guarantee against Flink (Flink's upsert-kafka default is at-least-once)")
    ap.add_argument("--batch-size", type=int, default=20_000, help="our mini-batch size against Flink")
    ap.add_argument("--flink-parallelism", type=int, default=os.cpu_count() or 1,
                    help="Flink's parallelism.default (default: the CPU count, as a local MiniCluster)")
    ap.add_argument("--flink-mini-batch", action="store_true", help="table.exec.mini-batch.enabled for Flink too")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of the pageviews topic")
    ap.add_argument("--bootstrap", default=os.environ.get("CHANGELAKE_KAFKA_BOOTSTRAP"))
    args = ap.parse_args()
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"page-views PV/UV per region, {args.n:,d} events; {os.cpu_count()} CPUs, load {load}, "
          f"{platform.python_implementation()} {platform.python_version()}")
    parts = set(args.parts.split(","))
    if "operator" in parts:
        bench_operator(min(args.n, 200_000))
    if parts & {"e2e", "flink"}:
        with kafka(args.bootstrap) as bootstrap:
            if "e2e" in parts:
                bench_end_to_end(bootstrap, args.n, args.partitions)
            if "flink" in parts:
                bench_vs_flink(bootstrap, args.n, args.partitions, args.rounds, args.guarantee, args.batch_size,
                               args.flink_parallelism, args.flink_mini_batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
