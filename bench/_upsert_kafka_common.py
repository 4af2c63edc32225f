"""Helpers shared by ``bench_upsert_sink.py`` and ``bench_upsert_source.py`` (not a benchmark).

* :func:`kafka_broker` starts a throw-away single-node Kafka (``changelake.services.KafkaService``
  on free ports in a temp dir) and always stops it;
* :func:`run_java_tool` runs one of Kafka's own perf tools (``org.apache.kafka.tools.*``, from the
  ``kafka-tools`` jar that sits in the broker's classpath folder) and returns its output;
* :func:`changelog` builds the benchmark's changelog rows (``id BIGINT PK, name STRING,
  amount DECIMAL(10,2), ts TIMESTAMP(3)``) from a seeded RNG;
* :func:`print_table` prints a small fixed-width table.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Iterator, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from changelake.changelog.row import ChangelogRow  # noqa: E402
from changelake.changelog.rowkind import RowKind  # noqa: E402
from changelake.changelog.schema import Schema  # noqa: E402
from changelake.changelog.types import parse_data_type  # noqa: E402
from changelake.services import KafkaService, free_port  # noqa: E402

#: The benchmark table: ``(id BIGINT PK, name STRING, amount DECIMAL(10,2), ts TIMESTAMP(3))``.
SCHEMA = Schema.of(
    [
        ("id", parse_data_type("BIGINT NOT NULL")),
        ("name", parse_data_type("STRING")),
        ("amount", parse_data_type("DECIMAL(10, 2)")),
        ("ts", parse_data_type("TIMESTAMP(3)")),
    ],
    ["id"],
)

MIB = 1024 * 1024  # Kafka's perf tools count MB as 2^20 bytes
_EPOCH = dt.datetime(2024, 1, 1)


def upsert_options(bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
    """WITH options of an upsert-kafka table with json key and value (``value.fields-include`` ALL)."""
    options = {
        "connector": "upsert-kafka",
        "topic": topic,
        "properties.bootstrap.servers": bootstrap,
        "key.format": "json",
        "value.format": "json",
    }
    options.update(extra)
    return options


def changelog(records: int, keys: int, delete_ratio: float = 0.0, seed: int = 42) -> list[ChangelogRow]:
    """``records`` rows over ``keys`` keys drawn uniformly at random (seeded): +I for a key not
    live, +U for a live key, and with probability ``delete_ratio`` a -D (key only) instead."""
    rng = random.Random(seed)
    live: set[int] = set()
    rows: list[ChangelogRow] = []
    for i in range(records):
        key = rng.randrange(keys)
        if delete_ratio and rng.random() < delete_ratio:
            live.discard(key)
            rows.append(ChangelogRow(RowKind.DELETE, {"id": key, "name": None, "amount": None, "ts": None}))
            continue
        values = {
            "id": key,
            "name": f"customer-{key}-{i % 997}",
            "amount": Decimal(rng.randrange(100_000_000)).scaleb(-2),
            "ts": _EPOCH + dt.timedelta(milliseconds=i),
        }
        rows.append(ChangelogRow(RowKind.UPDATE_AFTER if key in live else RowKind.INSERT, values))
        live.add(key)
    return rows


@contextlib.contextmanager
def kafka_broker() -> Iterator[KafkaService]:
    """A fresh single-node Kafka on free ports in a temp dir; stopped (and deleted) on exit."""
    with tempfile.TemporaryDirectory(prefix="changelake-bench-") as home:
        kafka = KafkaService(home=Path(home) / "kafka", port=free_port(), controller_port=free_port())
        t0 = time.perf_counter()
        try:
            kafka.start()
            progress(f"Kafka up at {kafka.bootstrap_servers} in {time.perf_counter() - t0:.1f} s")
            yield kafka
        finally:
            kafka.stop()


def run_java_tool(kafka: KafkaService, main_class: str, args: Sequence[str], heap: str = "512m") -> str:
    """Run ``java -cp '<broker libs>/*' <main_class> <args>`` and return its stdout.

    Raises RuntimeError with the tool's last output lines if it exits non-zero."""
    libs = kafka.fetch_jars()
    cmd = ["java", f"-Xmx{heap}", "-cp", f"{libs}/*", main_class, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"{main_class} exited with {proc.returncode}: {tail}")
    return proc.stdout


def machine_note() -> str:
    """CPU count and load averages (1/5/15 min), to read the figures against: other processes
    on the machine take CPU from both our client and the broker."""
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs, load average {load} (1/5/15 min), {platform.python_implementation()} {platform.python_version()}"


def progress(message: str) -> None:
    """One progress line on stderr (the figures go to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print ``rows`` under ``headers`` as a fixed-width table (numbers right-aligned)."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] == "" for row in rows) for i in range(len(headers))]
    line = "  ".join(h.rjust(w) if n else h.ljust(w) for h, w, n in zip(headers, widths, numeric))
    print(line)
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(r, widths, numeric)))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if abs(value) < 1:
            return f"{value:.3f}"
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
