"""Pipeline 2 (Kafka -> lake) against Kafka's read ceiling, in one run on one broker.

For each workload a topic of Debezium-JSON change events (one table, ``id BIGINT`` key, as
Pipeline 1 writes them) is produced (not timed), then read twice:

* ``ConsumerPerformance`` (Kafka's own Java consumer tool) over the whole topic: the ceiling;
* Pipeline 2 (:func:`changelake.pipeline.runner.run_pipeline`, ``kafka`` source -> lake sink,
  until caught up) over the timed part of the topic.

Workloads (``--events`` N, default 100k):

* ``insert-only``: N inserts of new keys;
* ``update-heavy``: a table of ``--table-rows`` rows (default 100k) is loaded first (not timed),
  then N updates on 10 % hot keys;
* ``delete-heavy``: ``--table-rows`` rows loaded first (not timed), then N/2 deletes and N/2 inserts;
* ``mixed``: ``--table-rows`` rows loaded first, then N changes: 40 % inserts of new keys, 40 %
  updates and 20 % deletes of random live keys (sysbench's mix);
* ``update-random``: ``--table-rows`` rows loaded first, then N updates of random keys over the
  whole table (the case where copy-on-write cost follows the table, not the changes).

``--table-rows`` may be repeated (e.g. 100000 and 1000000): ``update-heavy``, ``delete-heavy`` and
``update-random`` run once per size (``mixed`` on the first; ``--update-events`` sets the
events of ``update-random``). ``--lake`` may be repeated (``iceberg``, ``paimon``): side by side in the same run.
Iceberg tables are bucketed by key (the sink's default); ``--no-buckets`` writes them unpartitioned
to compare. ``--paimon-writer python`` writes Paimon with pypaimon's Python writer
(``table.properties.write.native.enabled: false``) instead of Paimon's Rust writer (the sink's
default); ``both`` runs each Paimon workload with each writer, side by side.

Every record carries Pipeline 1's schema headers (the schema in a schema topic), so Pipeline 2
takes the columnar lane (``pipeline.columnar.enabled``); ``--lane per-record`` or ``both`` runs
the record-by-record path too, on its own topic and lake, in the same run.

Printed per workload: lake rows/s (change events applied / wall s of the timed run), Kafka's
records/s (``ConsumerPerformance`` on the same topic), the ratio, rows written per change event
(snapshot summaries' ``added-records``), rows rewritten per changed key (Iceberg's copy-on-write:
``changelake.rows-rewritten`` / ``changelake.rows-changed`` of the timed commits; Paimon writes
merge-on-read, 0), per-batch commit latency p50/p99 (ms), the process CPU time of the timed
run per change event (µs; all threads, librdkafka's included: on a shared machine it moves far
less than the wall rates) and the 1-minute load average when the row's ConsumerPerformance ended.

Start-up is outside every timed run, as it is outside ``ConsumerPerformance``'s rate (which
starts after the JVM has): before the workloads, one warm-up run per lake (10 inserts on a topic
of its own) imports the source, format and lake modules and opens a catalog once, and its wall
seconds are printed as the process's start-up. Without it only the first workload of a process
paid the imports (about 1 s of pyiceberg and pydantic models), and ``mixed`` (warmed by its
untimed preload) did not; ``--cold`` skips the warm-up to show that first-run figure. Run from
the repository root::

    .venv/bin/python bench/bench_lake_ingest.py [--events 100000] [--table-rows 100000 ...] \
        [--lake iceberg --lake paimon] [--workload mixed ...] [--no-buckets]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _upsert_kafka_common import kafka_broker, machine_note, print_table, progress, run_java_tool  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from changelake.changelog import Schema, TableId  # noqa: E402
from changelake.changelog.types import parse_data_type  # noqa: E402
from changelake.connectors.kafka.schemas import (  # noqa: E402
    SCHEMA_ID_HEADER,
    SCHEMA_TOPIC_HEADER,
    encode_schema_record,
    schema_fingerprint,
)
from changelake.pipeline.definition import parse_pipeline  # noqa: E402
from changelake.pipeline.runner import run_pipeline  # noqa: E402

DB, TABLE = "bench", "orders"


def _row(key: int, version: int) -> dict[str, Any]:
    return {"id": key, "customer": f"customer-{key % 9973}", "amount": round(key * 0.37 + version, 2), "version": version}


def _event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, ts: int) -> bytes:
    source = {"db": DB, "table": TABLE, "ts_ms": ts}
    return json.dumps({"before": before, "after": after, "op": op, "source": source}, separators=(",", ":")).encode()


def _workload(name: str, events: int, table_rows: int) -> tuple[Iterator[bytes], Iterator[bytes]]:
    """(preload messages, timed messages) of a workload."""

    def preload() -> Iterator[bytes]:
        if name != "insert-only":
            for k in range(table_rows):
                yield _event("c", None, _row(k, 0), 1)

    def timed() -> Iterator[bytes]:
        if name == "insert-only":
            for k in range(events):
                yield _event("c", None, _row(k, 0), 2)
        elif name == "update-heavy":
            hot = max(1, table_rows // 10)
            versions: dict[int, int] = {}
            for i in range(events):
                k = (i * 7919) % hot
                v = versions.get(k, 0)
                versions[k] = v + 1
                yield _event("u", _row(k, v), _row(k, v + 1), 2)
        elif name == "update-random":
            rng = random.Random(18)
            versions = {}
            for _ in range(events):
                k = rng.randrange(table_rows)
                v = versions.get(k, 0)
                versions[k] = v + 1
                yield _event("u", _row(k, v), _row(k, v + 1), 2)
        elif name == "mixed":
            rng = random.Random(40)
            live = list(range(table_rows))
            versions = {}
            next_key = table_rows
            for _ in range(events):
                roll = rng.random()
                if roll < 0.4 or len(live) < 2:
                    live.append(next_key)
                    yield _event("c", None, _row(next_key, 0), 2)
                    next_key += 1
                    continue
                i = rng.randrange(len(live))
                k = live[i]
                v = versions.get(k, 0)
                if roll < 0.8:
                    versions[k] = v + 1
                    yield _event("u", _row(k, v), _row(k, v + 1), 2)
                else:
                    live[i] = live[-1]
                    live.pop()
                    yield _event("d", _row(k, v), None, 2)
        else:
            for i in range(events // 2):
                yield _event("d", _row(i, 0), None, 2)
                k = table_rows + i
                yield _event("c", None, _row(k, 0), 2)

    return preload(), timed()


#: The table's schema, as Pipeline 1 names it in each record's headers (schema in a schema topic).
SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("customer", parse_data_type("VARCHAR(64)")),
                    ("amount", parse_data_type("DECIMAL(12,2)")), ("version", parse_data_type("INT"))], ["id"])
SCHEMA_TOPIC = "bench-schemas"


def _produce(bootstrap: str, topic: str, messages: Iterator[bytes]) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    key, value = encode_schema_record(TableId(DB, TABLE), SCHEMA)
    producer.produce(SCHEMA_TOPIC, key=key, value=value)
    headers = [(SCHEMA_ID_HEADER, schema_fingerprint(SCHEMA).encode()), (SCHEMA_TOPIC_HEADER, SCHEMA_TOPIC.encode())]
    count = 0
    for value in messages:
        while True:
            try:
                producer.produce(topic, value=value, headers=headers)
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
    producer.flush(60)
    return count


def _pipeline(bootstrap: str, topic: str, lake_dir: Path, lake: str, buckets: bool = True, columnar: bool = True,
              paimon_writer: str = "rust") -> Any:
    sink: dict[str, Any]
    if lake == "iceberg":
        sink = {
            "type": "iceberg",
            "catalog.properties.uri": f"sqlite:///{lake_dir / 'catalog.db'}",
            "catalog.properties.warehouse": f"file://{lake_dir / 'warehouse'}",
            "bucket-by-key": "true" if buckets else "false",
        }
        (lake_dir / "warehouse").mkdir(parents=True, exist_ok=True)
    else:
        sink = {"type": lake, "catalog.properties.warehouse": str(lake_dir / "warehouse")}
        if paimon_writer == "python":
            sink["table.properties.write.native.enabled"] = "false"
    return parse_pipeline(
        {
            "pipeline": {"name": f"bench-{topic}", "columnar.enabled": "true" if columnar else "false"},
            "source": {
                "type": "kafka", "properties.bootstrap.servers": bootstrap, "topic": topic,
                "scan.startup.mode": "earliest-offset", "value.format": "debezium-json",
                "debezium-json.distributed-tables": True,
            },
            "transform": [{"source-table": "\\.*.\\.*", "projection": "\\*", "primary-keys": "id"}],
            "sink": sink,
        },
        env={},
    )


def _summed(lake_dir: Path, since_ms: int, key: str) -> int:
    """Snapshot-summary property ``key`` summed over the Iceberg snapshots committed after ``since_ms``."""
    from changelake.connectors.iceberg import IcebergSinkOptions, open_catalog

    catalog = open_catalog(IcebergSinkOptions.sql(f"sqlite:///{lake_dir / 'catalog.db'}", f"file://{lake_dir / 'warehouse'}"))
    table = catalog.load_table((DB, TABLE))
    return sum(int((s.summary or {}).get(key, 0) or 0) for s in table.metadata.snapshots if s.timestamp_ms >= since_ms)


def _added_records(lake_dir: Path, since_ms: int) -> int:
    """``added-records`` summed over the Iceberg snapshots committed after ``since_ms``."""
    return _summed(lake_dir, since_ms, "added-records")


def _consumer_perf(kafka: Any, topic: str, messages: int) -> float:
    out = run_java_tool(
        kafka, "org.apache.kafka.tools.ConsumerPerformance",
        ["--bootstrap-server", kafka.bootstrap_servers, "--topic", topic, "--messages", str(messages), "--timeout", "60000"],
    )
    lines = [line for line in out.strip().splitlines() if line and not line.startswith("start.time")]
    fields = [f.strip() for f in lines[-1].split(",")]
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
    return float(fields[5])


def run_workload(kafka: Any, name: str, events: int, table_rows: int, lake: str, buckets: bool = True,
                 columnar: bool = True, profile: Path | None = None, paimon_writer: str = "rust") -> list[Any]:
    topic = re.sub(r"[^a-z]", "", name) + f"-{time.time_ns()}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    preload, timed = _workload(name, events, table_rows)
    with tempfile.TemporaryDirectory(prefix="changelake-bench-lake-") as tmp:
        lake_dir = Path(tmp)
        defn = _pipeline(kafka.bootstrap_servers, topic, lake_dir, lake, buckets, columnar, paimon_writer)
        loaded = _produce(kafka.bootstrap_servers, topic, preload)
        if loaded:
            progress(f"{name}: loading {loaded:,} rows into the lake (not timed)")
            run_pipeline(defn, until_caught_up=True)
        produced = _produce(kafka.bootstrap_servers, topic, timed)
        progress(f"{name}: {produced:,} change events on {topic}; Pipeline 2 -> {lake} ({paimon_writer if lake == 'paimon' else ''}), "
                 f"load average {os.getloadavg()[0]:.1f}")
        commit_times: list[float] = []
        last = [time.perf_counter()]

        def on_batch(_: dict[str, Any]) -> None:
            now = time.perf_counter()
            commit_times.append((now - last[0]) * 1000)
            last[0] = now

        since_ms = int(time.time() * 1000)
        load0 = os.getloadavg()[0]
        cpu0 = time.process_time()
        if profile is not None:
            import cProfile

            profiler = cProfile.Profile()
            stats = profiler.runcall(run_pipeline, defn, until_caught_up=True, on_batch=on_batch)
            profile.mkdir(parents=True, exist_ok=True)
            profiler.dump_stats(str(profile / f"{re.sub(r'[^a-z]', '', name)}-{lake}-{table_rows}.pstats"))
        else:
            stats = run_pipeline(defn, until_caught_up=True, on_batch=on_batch)
        cpu_us = (time.process_time() - cpu0) * 1e6 / stats.events if stats.events else float("nan")
        rate = stats.events / stats.elapsed_s if stats.elapsed_s else 0.0
        amplification = _added_records(lake_dir, since_ms) / stats.events if lake == "iceberg" and stats.events else float("nan")
        rewritten = 0.0
        if lake == "iceberg":
            changed = _summed(lake_dir, since_ms, "changelake.rows-changed")
            rewritten = _summed(lake_dir, since_ms, "changelake.rows-rewritten") / changed if changed else 0.0
    progress(f"{name}: ConsumerPerformance over {loaded + produced:,} records")
    ceiling = _consumer_perf(kafka, topic, loaded + produced)
    p50 = statistics.median(commit_times) if commit_times else 0.0
    # nearest rank (ceil(0.99 n)); flooring 0.99 (n - 1) gave the minimum for n = 2, below the median
    p99 = sorted(commit_times)[max(0, math.ceil(0.99 * len(commit_times)) - 1)] if commit_times else 0.0
    size = f", {table_rows:,} rows" if name != "insert-only" else ""
    lane = "" if columnar else ", per-record"
    load = f"{load0:.1f} -> {os.getloadavg()[0]:.1f}"
    writer = ", python writer" if lake == "paimon" and paimon_writer == "python" else ""
    return [f"{name}{size} ({lake}{lane}{writer})", stats.events, round(rate), round(ceiling), rate / ceiling,
            amplification, rewritten, p50, p99, stats.batches, round(cpu_us), load]


def warm_up(kafka: Any, lake: str, paimon_writer: str = "rust") -> float:
    """Wall seconds of a 10-insert Pipeline 2 run into ``lake`` on a topic of its own: the
    process's start-up (module imports, the first catalog), kept out of the timed runs."""
    topic = f"warmup-{lake}-{time.time_ns()}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    _produce(kafka.bootstrap_servers, topic, (_event("c", None, _row(k, 0), 1) for k in range(10)))
    with tempfile.TemporaryDirectory(prefix="changelake-bench-warmup-") as tmp:
        started = time.perf_counter()
        run_pipeline(_pipeline(kafka.bootstrap_servers, topic, Path(tmp), lake, paimon_writer=paimon_writer),
                     until_caught_up=True)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--table-rows", type=int, action="append", default=None,
                        help="rows loaded before the update/delete workloads (100000); repeat for several sizes")
    parser.add_argument("--lake", action="append", default=None, help="iceberg (default); repeat for several lakes")
    parser.add_argument("--workload", action="append", default=None,
                        choices=["insert-only", "update-heavy", "delete-heavy", "mixed", "update-random"])
    parser.add_argument("--no-buckets", action="store_true", help="Iceberg tables unpartitioned (bucket-by-key: false)")
    parser.add_argument("--lane", choices=["columnar", "per-record", "both"], default="columnar",
                        help="Pipeline 2's path (pipeline.columnar.enabled); both: each workload twice, side by side")
    parser.add_argument("--profile", type=Path, default=None,
                        help="write a cProfile of each timed run into this directory (<workload>-<lake>-<rows>.pstats)")
    parser.add_argument("--paimon-writer", choices=["rust", "python", "both"], default="rust",
                        help="Paimon's Rust writer (the sink's default) or pypaimon's Python writer; both: side by side")
    parser.add_argument("--update-events", type=int, default=None,
                        help="change events of update-random (default: --events)")
    parser.add_argument("--cold", action="store_true",
                        help="no warm-up run: the first workload of the process pays the imports")
    args = parser.parse_args()
    lakes = args.lake or ["iceberg"]
    workloads = args.workload or ["insert-only", "update-heavy", "delete-heavy"]
    sizes = args.table_rows or [100_000]
    rows = []
    with kafka_broker() as kafka:
        if not args.cold:
            for lake in lakes:
                progress(f"start-up (warm-up run, not timed): {lake} {warm_up(kafka, lake):.2f} s")
        for workload in workloads:
            # every size for the update workloads; insert-only and mixed once (the first size)
            for size in (sizes if workload not in ("insert-only", "mixed") else sizes[:1]):
                events = args.update_events or args.events if workload == "update-random" else args.events
                for lake in lakes:
                    writers = {"both": ["rust", "python"]}.get(args.paimon_writer, [args.paimon_writer]) if lake == "paimon" else ["rust"]
                    for columnar in {"columnar": [True], "per-record": [False], "both": [True, False]}[args.lane]:
                        for writer in writers:
                            rows.append(run_workload(kafka, workload, events, size, lake, not args.no_buckets, columnar,
                                                     args.profile, writer))
    print(machine_note())
    print_table(
        ["workload", "events", "lake rows/s", "Kafka rec/s", "ratio", "rows written/event", "rewritten/change",
         "commit p50 ms", "p99 ms", "batches", "CPU µs/event", "load 1-min"],
        rows,
    )
    by_name = {r[0]: r for r in rows}
    for lake in lakes:
        rates = [(size, by_name.get(f"update-random, {size:,} rows ({lake})")) for size in sizes]
        rates = [(size, r) for size, r in rates if r is not None]
        if len(rates) > 1:
            (small, first), (large, last) = rates[0], rates[-1]
            print(f"update-random ({lake}): {large:,}-row table at {last[2] / first[2]:.2f}x the rate on {small:,} rows")


if __name__ == "__main__":
    main()
