"""Benchmark the upsert-kafka source against Kafka's own ``kafka-consumer-perf-test``.

Fills a fresh topic (one partition by default) on a throw-away single-node Kafka with N keyed
records (default 500k) over K keys (default 50k, uniform, seeded) of ``(id BIGINT PK, name STRING,
amount DECIMAL(10,2), ts TIMESTAMP(3))`` in json key and value: inserts, updates and, with
probability ``--delete-ratio`` (default 5%), tombstones. The topic is written by the upsert-kafka
sink itself (not timed). Then it reads the whole topic:

* ``upsert-kafka`` source with ``scan.bounded.mode = latest-offset``, once per key-state store
  (``memory``: :class:`MemoryKeyStateStore`; ``sqlite``: :class:`SqliteKeyStateStore` in a temp
  dir, committed after every ``poll()`` as the source does by default), emitting the normalized
  changelog (+I new key, +U known key, -D tombstone of a live key; nothing for an identical
  row or a tombstone of an unknown key);
* with the memory store, the same read through ``poll_batches()`` (the columnar lane: Arrow
  ``ChangeBatch``es, ``--batch-records`` per poll, default 2000) in the same rounds, interleaved
  with ``poll()`` (the rows path): the A/B of the two paths (``--no-columnar`` leaves it out);
* Java ``org.apache.kafka.tools.ConsumerPerformance --messages N`` on the same topic.

With ``--rounds R`` (default 3) the runs repeat R times, ours and Java's interleaved (who goes
first alternates), and the ratio printed last is the median over rounds of ours / the same
round's Java: on a shared machine the load moves between runs. ``--record-path`` adds a run with
``batch_decode=False`` (the record-by-record decode the batch path falls back to), to see the
batch decode's gain in the same run.

Each row shows the 1-minute load average when the run ended (``os.getloadavg()``): eight
sessions share two cores, read a ratio against the load of its round.

Rates: records read from Kafka per second and changelog rows emitted per second, from the first
``poll()`` until the bounded end is reached (``open()`` not timed). For the Java tool the table
shows ``fetch.nMsg.sec`` (which leaves out its group join/rebalance time, as ours leaves out
``open()``) and, in the note below the table, its overall ``nMsg.sec``. MB/s is key + value bytes
read per second, 1 MB = 2^20 bytes as in Kafka's tools.

    .venv/bin/python bench/bench_upsert_source.py               # 500k records, ~1-2 min on 2 cores
    .venv/bin/python bench/bench_upsert_source.py --records 100000 --stores memory
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _upsert_kafka_common import (  # noqa: E402
    MIB,
    SCHEMA,
    changelog,
    kafka_broker,
    machine_note,
    print_table,
    progress,
    run_java_tool,
    upsert_options,
)

import pyarrow.compute as pc  # noqa: E402

from changelake.changelog.row import ChangelogRow  # noqa: E402
from changelake.changelog.rowkind import RowKind  # noqa: E402
from changelake.changelog.state import KeyStateStore, MemoryKeyStateStore, SqliteKeyStateStore  # noqa: E402
from changelake.connectors.upsert_kafka import create_sink, create_source  # noqa: E402
from changelake.services import KafkaService  # noqa: E402


def expected_changelog(rows: list[ChangelogRow]) -> Counter[str]:
    """The changelog the upsert source must emit for ``rows`` written by the sink, by kind: +I
    for a key not live, +U for a live key (the generator never repeats a row exactly), -D for a
    tombstone of a live key, nothing for a tombstone of a key that is not live."""
    live: set[object] = set()
    kinds: Counter[str] = Counter()
    for row in rows:
        key = row.values["id"]
        if row.kind is RowKind.DELETE:
            if key in live:
                kinds["-D"] += 1
                live.discard(key)
        else:
            kinds["+U" if key in live else "+I"] += 1
            live.add(key)
    return kinds


def fill_topic(kafka: KafkaService, args: argparse.Namespace) -> tuple[str, Counter[str], Counter[str]]:
    """Write the benchmark's records to a new compacted topic with the upsert-kafka sink; returns
    (topic, count of rows written by kind, expected changelog by kind)."""
    rows = changelog(args.records, args.keys, delete_ratio=args.delete_ratio)
    topic = f"bench-source-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    with create_sink(upsert_options(kafka.bootstrap_servers, topic), SCHEMA,
                     topic_partitions=args.partitions, flush_timeout_s=120.0) as sink:
        sink.write_all(rows)
        sink.flush()
    progress(f"wrote {len(rows):,} records to {topic} in {time.perf_counter() - start:.1f} s")
    return topic, Counter(row.kind.short_string for row in rows), expected_changelog(rows)


def run_source(kafka: KafkaService, topic: str, store: KeyStateStore, args: argparse.Namespace,
               batch_decode: bool = True, columnar: bool = False) -> dict[str, float]:
    """Read ``topic`` to its end with the upsert-kafka source (``poll()``'s ChangelogRows, or
    with ``columnar`` ``poll_batches()``'s Arrow ChangeBatches); returns seconds, records read,
    bytes read and changelog rows emitted (also per kind, keys ``+I``/``+U``/``-D``/``-U``), and
    for ``columnar`` the polls decided in Arrow / record by record."""
    options = upsert_options(kafka.bootstrap_servers, topic, **{
        "scan.bounded.mode": "latest-offset", "scan.changelog-mode": args.changelog_mode,
    })
    kinds: Counter[RowKind] = Counter()
    with create_source(options, SCHEMA, store=store, batch_decode=batch_decode) as source:
        step = max(1, args.records // 10)
        next_report = step
        polls = 0
        start = time.perf_counter()
        while not source.is_bounded_end_reached():
            if columnar:
                for batch in source.poll_batches(max_events=args.batch_records, timeout_s=1.0):
                    for entry in pc.value_counts(batch.kinds).to_pylist() if batch.num_rows else []:
                        kinds[RowKind.from_short_string(entry["values"])] += entry["counts"]
            else:
                kinds.update(row.kind for row in source.poll(1.0, max_records=args.max_records))
            polls += 1
            if polls % 50:
                continue  # the progress line every 50 polls (a metrics snapshot sums its rate windows)
            read = int(source.metrics.snapshot()["numRecordsIn"])
            if read >= next_report:
                next_report += step
                progress(f"source ({type(store).__name__}): {read:,}/{args.records:,} records, "
                         f"{read / (time.perf_counter() - start):,.0f} records/s")
        seconds = time.perf_counter() - start
        metrics = source.metrics.snapshot()
    return {"seconds": seconds, "records": metrics["numRecordsIn"], "bytes": metrics["numBytesIn"],
            "rows": sum(kinds.values()), **{kind.short_string: n for kind, n in kinds.items()},
            "arrow_polls": source.columnar_polls, "record_polls": source.record_path_polls}


def run_java_consumer(kafka: KafkaService, topic: str, records: int) -> dict[str, str]:
    """Kafka's ConsumerPerformance reading ``records`` messages of ``topic``; returns its
    summary as header -> value (``nMsg.sec``, ``fetch.nMsg.sec``, ``MB.sec``, ...)."""
    out = run_java_tool(
        kafka,
        "org.apache.kafka.tools.ConsumerPerformance",
        ["--bootstrap-server", kafka.bootstrap_servers, "--topic", topic, "--messages", str(records),
         "--group", f"bench-java-{uuid.uuid4().hex[:8]}", "--timeout", "30000"],
    )
    lines = [line for line in out.splitlines() if "," in line]
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if header is None or header + 1 >= len(lines):
        raise RuntimeError(f"no summary in ConsumerPerformance output: {out[-500:]}")
    summary = dict(zip((h.strip() for h in lines[header].split(",")), (v.strip() for v in lines[header + 1].split(","))))
    if int(summary["data.consumed.in.nMsg"]) != records:
        raise RuntimeError(f"ConsumerPerformance read {summary['data.consumed.in.nMsg']} messages, expected {records}")
    return summary


def _java_round(kafka: KafkaService, topic: str, args: argparse.Namespace, rnd: int) -> dict[str, str]:
    """One ConsumerPerformance run; its summary with ``load`` (the 1-min load average at its end)."""
    progress(f"Kafka ConsumerPerformance (round {rnd}): {args.records:,} messages of {topic}")
    summary = run_java_consumer(kafka, topic, args.records)
    summary["load"] = f"{os.getloadavg()[0]:.2f}"
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000, help="records in the topic (default 500k)")
    ap.add_argument("--keys", type=int, default=50_000, help="distinct keys (default 50k)")
    ap.add_argument("--delete-ratio", type=float, default=0.05, help="share of tombstones (default 0.05)")
    ap.add_argument("--partitions", type=int, default=1, help="partitions of the topic (default 1)")
    ap.add_argument("--stores", default="memory,sqlite", help="key-state stores to run, comma-separated")
    ap.add_argument("--max-records", type=int, default=500, help="poll(max_records=...) (default 500, the source's)")
    ap.add_argument("--changelog-mode", default="upsert", choices=["upsert", "retract"], help="scan.changelog-mode")
    ap.add_argument("--skip-java", action="store_true", help="do not run Kafka's ConsumerPerformance")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of ours vs ConsumerPerformance (default 3)")
    ap.add_argument("--record-path", action="store_true", help="also run the memory store with batch_decode=False")
    ap.add_argument("--batch-records", type=int, default=2000,
                    help="poll_batches(max_events=...) (default 2000, the method's and the runner loop's)")
    ap.add_argument("--no-columnar", action="store_true",
                    help="do not run poll_batches() (the columnar lane; by default the memory store runs both "
                         "poll_batches() and poll(), interleaved, the A/B against the row path)")
    args = ap.parse_args()
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    if unknown := set(stores) - {"memory", "sqlite"}:
        ap.error(f"unknown store(s) {sorted(unknown)}; choose from memory, sqlite")

    runs = ([("memory", "columnar")] if "memory" in stores and not args.no_columnar else []) + \
        [(name, "batch") for name in stores] + ([("memory", "record")] if args.record_path else [])
    results: list[list[object]] = []
    ratios: dict[str, list[float]] = {}
    java: dict[str, str] = {}
    with kafka_broker() as kafka, tempfile.TemporaryDirectory(prefix="changelake-bench-state-") as state_dir:
        topic, written, expected = fill_topic(kafka, args)
        for rnd in range(1, args.rounds + 1):
            round_results: list[list[object]] = []
            java_first = not args.skip_java and rnd % 2 == 0
            if java_first:
                java = _java_round(kafka, topic, args, rnd)
            for name, path_name in runs:
                batch = path_name != "record"
                label = f"upsert-kafka source, {name} state" + {
                    "columnar": ", poll_batches (Arrow)", "batch": ", poll (rows)", "record": ", record by record"}[path_name]
                path = Path(state_dir) / f"{topic}-{rnd}-{name}-{path_name}"
                store = MemoryKeyStateStore() if name == "memory" else SqliteKeyStateStore(path)
                try:
                    r = run_source(kafka, topic, store, args, batch_decode=batch, columnar=path_name == "columnar")
                finally:
                    store.close()
                if path_name == "columnar":
                    progress(f"poll_batches: {r['arrow_polls']} polls decided in Arrow, {r['record_polls']} record by record")
                if r["records"] != args.records:
                    raise RuntimeError(f"the source read {r['records']} records, expected {args.records}")
                want = {k: expected[k] for k in ("+I", "+U", "-D")}
                if args.changelog_mode == "retract":
                    want["-U"] = want["+U"]  # retract: -U(previous row) before each +U
                got = {k: int(r.get(k, 0)) for k in want}
                if got != want:
                    raise RuntimeError(f"the {label} emitted {got}, expected {want}")
                kinds = " ".join(f"{k}{int(r.get(k, 0)):,}" for k in ("+I", "-U", "+U", "-D") if r.get(k))
                round_results.append([f"{label} (round {rnd})", int(r["records"]), int(r["rows"]), kinds,
                                      r["records"] / r["seconds"], r["rows"] / r["seconds"],
                                      r["bytes"] / MIB / r["seconds"], r["seconds"], os.getloadavg()[0]])
            if not args.skip_java and not java_first:
                java = _java_round(kafka, topic, args, rnd)
            if java:
                fetch_rate = float(java["fetch.nMsg.sec"])
                java_load = float(java["load"])
                for line in round_results:
                    ratio = float(line[4]) / fetch_rate  # type: ignore[arg-type]
                    line.append(ratio)
                    ratios.setdefault(str(line[0]).rsplit(" (round", 1)[0], []).append(ratio)
                round_results.append([f"Java ConsumerPerformance (fetch) (round {rnd})", args.records, "", "", fetch_rate, "",
                                      float(java["fetch.MB.sec"]), float(java["fetch.time.ms"]) / 1000.0,
                                      java_load, 1.0])
            results.extend(round_results)

    print()
    print(f"upsert-kafka source: {args.records:,} records over {args.keys:,} keys "
          f"({' '.join(f'{k}{v:,}' for k, v in sorted(written.items()))} written; -D = tombstone), json key+value, "
          f"{args.partitions} partition(s), scan.changelog-mode {args.changelog_mode}, poll max_records {args.max_records}, "
          f"poll_batches max_events {args.batch_records}")
    headers = ["run", "records", "changelog", "by kind", "records/s", "changelog/s", "MB/s", "seconds", "load 1 min"]
    if java:
        headers.append("ours/Java")
    print_table(headers, results)
    if java:
        print(f"Java ConsumerPerformance overall (with group join, last round): {float(java['nMsg.sec']):,.0f} records/s, "
              f"rebalance {java['rebalance.time.ms']} ms")
        for label, values in ratios.items():
            print(f"{label} / ConsumerPerformance fetch of the same round: median {statistics.median(values):.3f}x "
                  f"(rounds: {', '.join(f'{v:.3f}' for v in values)})")
    print(f"machine: {machine_note()}")


if __name__ == "__main__":
    main()
