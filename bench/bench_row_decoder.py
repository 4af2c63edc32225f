"""The compiled binlog row decoder (mysql_cdc/binlog/row_decoder.py), this tree against another
tree's (A/B, interleaved, in one run): µs per row image of ``RowDecoder.images`` for a typical
table (INT key, VARCHAR, DECIMAL(12,2), INT, DATETIME, a nullable CHAR and a TIMESTAMP(3)),
best of each round, with the load average beside each figure. No server: the images are built
here in the binlog's format. Run from the repository root::

    .venv/bin/python bench/bench_row_decoder.py --other /work/main [--rows 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import struct
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from changelake.connectors.mysql_cdc.binlog import row_decoder  # noqa: E402
from changelake.connectors.mysql_cdc.schema.columns import MySqlColumn  # noqa: E402

LIB = [
    SimpleNamespace(type=3, name="id", unsigned=False),
    SimpleNamespace(type=15, name="customer", max_length=160, character_set_name="utf8mb4"),
    SimpleNamespace(type=246, name="amount", precision=12, decimals=2),
    SimpleNamespace(type=3, name="version", unsigned=False),
    SimpleNamespace(type=18, name="at", fsp=0),
    SimpleNamespace(type=254, name="code", max_length=8, character_set_name="utf8mb4"),
    SimpleNamespace(type=17, name="seen", fsp=3),
]
COLS = (
    MySqlColumn("id", "int", nullable=False), MySqlColumn("customer", "varchar", charset="utf8mb4"),
    MySqlColumn("amount", "decimal", precision=12, scale=2), MySqlColumn("version", "int", nullable=False),
    MySqlColumn("at", "datetime", precision=0), MySqlColumn("code", "char", charset="utf8mb4"),
    MySqlColumn("seen", "timestamp", precision=3),
)


def _image(k: int) -> bytes:
    nulls = 0 if k % 3 else (1 << 5)  # every third row: code NULL
    out = bytearray(nulls.to_bytes(1, "little"))
    out += struct.pack("<i", k)
    name = f"customer-{k % 9973}".encode()
    out += bytes([len(name)]) + name
    # DECIMAL(12,2): 10 integral digits = 1 digit (1 byte) + 9 (4 bytes); 2 fraction digits (1 byte)
    whole, frac = divmod(k * 37 % 10**9, 100)
    dec = bytearray(bytes([0]) + whole.to_bytes(4, "big") + bytes([frac]))
    dec[0] ^= 0x80
    out += dec
    out += struct.pack("<i", k % 7)
    ym = 2026 * 13 + 12
    v = (((ym << 5) | 1) << 17) | (10 << 12)
    out += v.to_bytes(5, "big")
    if nulls == 0:
        out += b"\x03abc"
    out += struct.pack(">i", 1_700_000_000 + k) + (k % 1000 * 10).to_bytes(2, "big", signed=True)
    return bytes(out)


def _load_other(root: str) -> ModuleType:
    path = Path(root) / "changelake/connectors/mysql_cdc/binlog/row_decoder.py"
    spec = importlib.util.spec_from_file_location("other_row_decoder", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _time(decoder: Any, data: bytes, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        decoder.images(data, 0, len(data), 1)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--other", default="/work/main", help="the other tree (its row_decoder.py)")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    data = b"".join(_image(k) for k in range(args.rows))
    ours = row_decoder.build_decoder(LIB, COLS)
    other = _load_other(args.other).build_decoder(LIB, COLS)
    assert other is not None
    assert ours.images(data, 0, len(data), 1) == other.images(data, 0, len(data), 1)
    ratios = []
    for r in range(args.rounds):
        if r % 2:  # alternate which runs first
            b = _time(other, data)
            a = _time(ours, data)
        else:
            a = _time(ours, data)
            b = _time(other, data)
        ratios.append(b / a)
        print(f"round {r + 1}: this tree {a / args.rows * 1e6:.3f} µs/row, other {b / args.rows * 1e6:.3f} µs/row, "
              f"other/this {b / a:.3f}  (load {os.getloadavg()[0]:.2f})")
    ratios.sort()
    print(f"median other/this: {ratios[len(ratios) // 2]:.3f} (> 1: this tree faster)")


if __name__ == "__main__":
    main()
