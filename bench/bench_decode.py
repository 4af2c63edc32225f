"""Debezium-JSON decode, per message against one batch call (no Kafka, no lake), in one run.

For N update events (``id BIGINT`` key, a VARCHAR, a DECIMAL(12,2), an INT, a DATETIME) decoded
with the table's schema (as Pipeline 2 does with the schema header), best of 3, prints µs per
record for:

* ``per-message``: :meth:`DebeziumJsonFormat.decode_events` on each value (today's path);
* ``arrow-read``: :func:`changelake.formats.debezium_json.read_batch`, groups of ``--group``
  values in one pyarrow JSON read with an explicit schema (stays in Arrow);
* ``arrow-to-events``: :func:`changelake.formats.debezium_json.decode_batch`, the same read turned
  back into change events (what the per-event stage and sinks need);
* ``arrow-to-rows``: :func:`changelake.formats.debezium_json.decode_columns`, the same read turned
  into changelog rows in Arrow (``-U``/``+U`` rows, lake types, row kinds): what the columnar lane
  hands the stage and the lake writer;
* ``orjson-parse``: ``orjson.loads`` per value, the parse alone (no types, no events): a floor.

msgspec is not measured: it is not installed here (a typed ``msgspec.Struct`` per schema would be
built from the schema topic). Run from the repository root::

    .venv/bin/python bench/bench_decode.py [--events 100000] [--group 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from changelake.changelog.schema import Schema  # noqa: E402
from changelake.changelog.types import parse_data_type  # noqa: E402
from changelake.formats import create_format  # noqa: E402
from changelake.formats.debezium_json import decode_batch, decode_columns, read_batch  # noqa: E402

SCHEMA = Schema.of([("id", parse_data_type("BIGINT NOT NULL")), ("customer", parse_data_type("VARCHAR(40)")),
                    ("amount", parse_data_type("DECIMAL(12,2)")), ("version", parse_data_type("INT")),
                    ("at", parse_data_type("TIMESTAMP(0)"))], ["id"])


def _row(k: int, v: int) -> dict[str, Any]:
    return {"id": k, "customer": f"customer-{k % 9973}", "amount": round(k * 0.37 + v, 2), "version": v,
            "at": "2026-12-01 10:00:00"}


def _best(fn: Callable[[], Any], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--group", type=int, default=2000)
    args = parser.parse_args()
    n, g = args.events, args.group
    values = [json.dumps({"before": _row(k, 0), "after": _row(k, 1), "op": "u",
                          "source": {"db": "bench", "table": "orders", "ts_ms": 2}}, separators=(",", ":")).encode()
              for k in range(n)]
    fmt = create_format("debezium-json", SCHEMA, {})
    groups = [values[i:i + g] for i in range(0, n, g)]
    assert all(read_batch(fmt, grp) is not None for grp in groups[:1]), "batch path refused the workload"
    assert decode_batch(fmt, groups[0]) == [fmt.decode_events(v) for v in groups[0]], "batch differs"
    timings = {
        "per-message": _best(lambda: [fmt.decode_events(v) for v in values]),
        "arrow-read": _best(lambda: [read_batch(fmt, grp) for grp in groups]),
        "arrow-to-events": _best(lambda: [decode_batch(fmt, grp) for grp in groups]),
        "arrow-to-rows": _best(lambda: [decode_columns(fmt, grp) for grp in groups]),
        "orjson-parse": _best(lambda: [orjson.loads(v) for v in values]),
    }
    base = timings["per-message"]
    print(f"{n} debezium-json updates, groups of {g}, best of 3 (the machine may be shared: compare ratios)")
    for name, seconds in timings.items():
        print(f"  {name:16s} {1e6 * seconds / n:7.2f} µs/record   {base / seconds:5.2f}x per-message")


if __name__ == "__main__":
    main()
