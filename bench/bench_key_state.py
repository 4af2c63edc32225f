"""Benchmark the key-state stores: write N keys (row-sized values), read them back, print time and RSS.

    .venv/bin/python bench/bench_key_state.py --keys 1000000 --store sqlite

RSS is the process's peak resident set size (``ru_maxrss``) after the run, in MiB; the sqlite
store keeps data on disk, so its RSS stays near the page-cache cap (``--cache-mb``) whatever N is.

Measured on the dev VM (sqlite, 64 MiB cache): 1M keys -> 84 MiB peak RSS, 91 MiB on disk,
~68k puts/s; 10M keys -> 83 MiB peak RSS, 869 MiB on disk, ~46k puts/s.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from changelake.changelog.state import MemoryKeyStateStore, SqliteKeyStateStore, encode_key, encode_values  # noqa: E402


def rss_mib() -> float:
    """Peak RSS of this process in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    ap.add_argument("--batch", type=int, default=100_000, help="commit every N writes")
    ap.add_argument("--cache-mb", type=int, default=64)
    ap.add_argument("--dir", default=None, help="state directory (a temp dir when omitted)")
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory() if args.dir is None else None
    path = Path(args.dir or tmp.name) / "state"  # type: ignore[union-attr]
    store = SqliteKeyStateStore(path, cache_mb=args.cache_mb) if args.store == "sqlite" else MemoryKeyStateStore()
    start_rss = rss_mib()
    t0 = time.perf_counter()
    for i in range(args.keys):
        store.put(encode_key((f"user-{i}", i)), encode_values({"user_region": f"region-{i % 50}", "pv": i, "uv": i // 3}))
        if (i + 1) % args.batch == 0:
            store.commit()
    store.commit()
    t_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    step = max(1, args.keys // 100_000)
    for i in range(0, args.keys, step):
        assert store.get(encode_key((f"user-{i}", i))) is not None
    t_read = time.perf_counter() - t0
    n = len(store)
    size = sum(f.stat().st_size for f in path.glob("*")) if args.store == "sqlite" else 0
    store.close()
    print(f"store={args.store} keys={n} write={t_write:.1f}s ({n / t_write:,.0f} keys/s) "
          f"read={t_read:.2f}s for {args.keys // step} gets")
    print(f"RSS start={start_rss:.0f} MiB peak={rss_mib():.0f} MiB; on disk={size / 2**20:.0f} MiB")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
