"""Benchmark the upsert-kafka sink against Kafka's own ``kafka-producer-perf-test``.

Writes N changelog rows (default 1M: +I the first time a key is seen, +U after) over K keys
(default 10k, uniform, seeded) of ``(id BIGINT PK, name STRING, amount DECIMAL(10,2),
ts TIMESTAMP(3))`` with json key and value to a fresh single-node Kafka, and reports:

* ``upsert-kafka, write_all``: the batch path (``UpsertKafkaSink.write_all`` of ``--batch`` rows:
  keys and values encoded column by column, records handed to librdkafka with
  ``produce_batch``), in ``--rounds`` rounds interleaved with Kafka's producer (who goes first
  alternates); the ratio printed last is the median over rounds of ours / the same round's Java;
* ``upsert-kafka, write() per row`` without buffering: every row becomes one Kafka record;
* ``upsert-kafka`` with ``sink.buffer-flush.max-rows`` / ``sink.buffer-flush.interval`` (one run
  per ``--buffer ROWS,INTERVAL``): the ReducingBuffer keeps the last record per key, so fewer
  records reach Kafka ("to Kafka") than went in ("rows in");
* Java ``org.apache.kafka.tools.ProducerPerformance`` sending N records whose value size is the
  average value size of our records (``--record-size``; the tool sends null keys), as fast as it
  can (``--throughput -1``).

Rates are rows handed to ``write()`` per second, from the first ``write()`` until ``flush()``
returned with every record acknowledged (``open()``, i.e. topic creation, and building the rows
are not timed). MB/s is value bytes of the rows in / s, 1 MB = 2^20 bytes as in Kafka's tools;
key bytes are not counted (the Java tool sends none). Both producers use their client's defaults
(acks=all, idempotence on). Each run writes to its own topic with ``--partitions`` partitions.

    .venv/bin/python bench/bench_upsert_sink.py                  # 1M rows, ~2-3 min on 2 cores
    .venv/bin/python bench/bench_upsert_sink.py --records 100000 --buffer 1000,1s --buffer 10000,1s
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import sys
import time
import uuid
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

from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from changelake.changelog.row import ChangelogRow  # noqa: E402
from changelake.connectors.kafka_common import ensure_topics  # noqa: E402
from changelake.connectors.upsert_kafka import create_sink  # noqa: E402
from changelake.services import KafkaService  # noqa: E402

_JAVA_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def average_value_bytes(rows: list[ChangelogRow], bootstrap: str) -> tuple[float, float]:
    """(average value bytes, average key bytes) of the records the sink writes for ``rows``
    (serialized with the sink's own formats, no broker contact)."""
    sink = create_sink(upsert_options(bootstrap, "size-probe"), SCHEMA)
    sink.build_formats()
    value_bytes = key_bytes = n = 0
    for row in rows:
        record = sink.to_record(row)
        if record is None:
            continue
        value_bytes += len(record.value or b"")
        key_bytes += len(record.key)
        n += 1
    return value_bytes / n, key_bytes / n


def warm_up(kafka: KafkaService, rows: list[ChangelogRow]) -> None:
    """Write a few rows through an idempotent producer so that the broker's coordinators are
    loaded before anything is timed (a fresh broker answers the first producer-id request with
    "coordinator load in progress" and the client retries after a back-off)."""
    topic = f"bench-warmup-{uuid.uuid4().hex[:8]}"
    with create_sink(upsert_options(kafka.bootstrap_servers, topic), SCHEMA, flush_timeout_s=60.0) as sink:
        sink.write_all(rows[:1000])
        sink.flush()


def run_sink(kafka: KafkaService, rows: list[ChangelogRow], args: argparse.Namespace, batched: bool = False,
             **buffer: str) -> tuple[float, int]:
    """Write ``rows`` through a fresh sink; returns (seconds from first write to acked flush,
    records handed to Kafka)."""
    topic = f"bench-sink-{uuid.uuid4().hex[:8]}"
    options = upsert_options(kafka.bootstrap_servers, topic, **{"sink.delivery-guarantee": args.guarantee}, **buffer)
    sink = create_sink(options, SCHEMA, topic_partitions=args.partitions, flush_timeout_s=120.0)
    label = ", ".join(f"{k}={v}" for k, v in buffer.items()) or "no buffering"
    batch = args.batch if batched else 0
    if batch:
        label += f", write_all of {batch:,} rows"
    with sink:
        step = max(1, len(rows) // 10)
        start = time.perf_counter()
        if batch:
            for i in range(0, len(rows), batch):
                sink.write_all(rows[i:i + batch])
                if (i // batch) % max(1, step // batch) == 0:
                    elapsed = time.perf_counter() - start
                    progress(f"sink ({label}): {i + batch:,}/{len(rows):,} rows, {(i + batch) / elapsed:,.0f} rows/s")
        else:
            for i, row in enumerate(rows, 1):
                sink.write(row)
                if i % step == 0:
                    elapsed = time.perf_counter() - start
                    progress(f"sink ({label}): {i:,}/{len(rows):,} rows, {i / elapsed:,.0f} rows/s")
        sink.flush()
        seconds = time.perf_counter() - start
    out = int(sink.metrics.snapshot()["numRecordsOut"])
    stored = topic_size(kafka, topic)
    if stored != out:
        raise RuntimeError(f"topic {topic} holds {stored} records but the sink handed {out} to Kafka")
    return seconds, out


def topic_size(kafka: KafkaService, topic: str) -> int:
    """Records in ``topic``: the sum of its partitions' high watermarks (nothing is compacted
    yet: the log cleaner never touches the active segment)."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"bench-{uuid.uuid4().hex[:8]}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
    finally:
        consumer.close()


def run_java_producer(kafka: KafkaService, records: int, record_size: int, partitions: int) -> tuple[float, float]:
    """Kafka's ProducerPerformance on a fresh topic; returns (records/s, MB/s) of its summary line."""
    topic = f"bench-java-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka.bootstrap_servers, [topic], partitions)
    out = run_java_tool(
        kafka,
        "org.apache.kafka.tools.ProducerPerformance",
        [
            "--topic", topic,
            "--num-records", str(records),
            "--record-size", str(record_size),
            "--throughput", "-1",
            "--producer-props", f"bootstrap.servers={kafka.bootstrap_servers}",
        ],
    )
    summary = _JAVA_SUMMARY.findall(out)
    if not summary:
        raise RuntimeError(f"no summary line in ProducerPerformance output: {out[-500:]}")
    sent, rate, mb = summary[-1]
    if int(sent) != records:
        raise RuntimeError(f"ProducerPerformance sent {sent} records, expected {records}")
    return float(rate), float(mb)


def parse_buffer(text: str) -> tuple[str, str]:
    """``"1000,1s"`` -> (max-rows, interval)."""
    rows, _, interval = text.partition(",")
    if not rows.strip().isdigit() or not interval.strip():
        raise argparse.ArgumentTypeError(f"expected ROWS,INTERVAL such as 1000,1s; got {text!r}")
    return rows.strip(), interval.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="changelog rows to write (default 1M)")
    ap.add_argument("--keys", type=int, default=10_000, help="distinct primary keys (default 10k)")
    ap.add_argument("--partitions", type=int, default=1, help="partitions of each topic (default 1)")
    ap.add_argument("--guarantee", default="at-least-once", choices=["none", "at-least-once"],
                    help="sink.delivery-guarantee of our sink (default at-least-once)")
    ap.add_argument("--buffer", type=parse_buffer, action="append",
                    help="a buffered run with sink.buffer-flush.max-rows,interval; repeatable (default 1000,1s and 10000,1s)")
    ap.add_argument("--skip-java", action="store_true", help="do not run Kafka's ProducerPerformance")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds of write_all vs ProducerPerformance (default 2)")
    ap.add_argument("--batch", type=int, default=10_000, help="rows per write_all call (default 10000)")
    ap.add_argument("--skip-rows", action="store_true", help="leave out the write()-per-row run")
    args = ap.parse_args()
    buffers = args.buffer or [("1000", "1s"), ("10000", "1s")]

    progress(f"building {args.records:,} changelog rows over {args.keys:,} keys")
    rows = changelog(args.records, args.keys)
    # The prebuilt rows are a bench artifact (a pipeline streams them): keep the cyclic GC from
    # re-scanning millions of long-lived objects during the timed runs.
    gc.freeze()
    with kafka_broker() as kafka:
        value_size, key_size = average_value_bytes(rows, kafka.bootstrap_servers)
        record_size = round(value_size)
        mb_in = args.records * value_size / MIB
        results: list[list[object]] = []
        warm_up(kafka, rows)
        ratios: list[float] = []
        java_rate = 0.0
        for rnd in range(1, args.rounds + 1):
            # interleaved: each round runs ours (batched) and Kafka's producer back to back,
            # alternating which goes first
            order = ("ours", "java") if rnd % 2 else ("java", "ours")
            ours = java = 0.0
            for who in order:
                if who == "ours":
                    seconds, out = run_sink(kafka, rows, args, batched=True)
                    ours = args.records / seconds
                    results.append([f"round {rnd}: upsert-kafka, write_all of {args.batch:,}", args.records, out, ours,
                                    mb_in / seconds, seconds])
                elif not args.skip_java:
                    progress(f"Kafka ProducerPerformance: {args.records:,} records of {record_size} bytes")
                    java, java_mb = run_java_producer(kafka, args.records, record_size, args.partitions)
                    results.append([f"round {rnd}: Java ProducerPerformance", args.records, args.records, java, java_mb,
                                    args.records / java])
            if java:
                ratios.append(ours / java)
                java_rate = max(java_rate, java)
        if not args.skip_rows:
            seconds, out = run_sink(kafka, rows, args)
            results.append(["upsert-kafka, write() per row", args.records, out, args.records / seconds, mb_in / seconds, seconds])
        for max_rows, interval in buffers:
            buffer = {"sink.buffer-flush.max-rows": max_rows, "sink.buffer-flush.interval": interval}
            seconds, out = run_sink(kafka, rows, args, batched=True, **buffer)
            results.append([f"upsert-kafka, write_all, buffer {max_rows} rows / {interval}", args.records, out,
                            args.records / seconds, mb_in / seconds, seconds])

    print()
    print(f"upsert-kafka sink: {args.records:,} rows over {args.keys:,} keys, json key+value, "
          f"avg value {value_size:.1f} B, avg key {key_size:.1f} B, {args.partitions} partition(s), "
          f"guarantee {args.guarantee}")
    headers = ["run", "rows in", "to Kafka", "rows in/s", "MB/s", "seconds"]
    if java_rate:
        headers.append("ours/best Java")
        for line in results:
            line.append(float(line[3]) / java_rate)  # type: ignore[arg-type]
    print_table(headers, results)
    if ratios:
        print(f"write_all / ProducerPerformance of the same round: median {statistics.median(ratios):.2f}x "
              f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
    print(f"machine: {machine_note()}")


if __name__ == "__main__":
    main()
