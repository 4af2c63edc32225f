"""Snapshot of a large table by the MySQL source: the consistent snapshot against Flink CDC's
incremental snapshot (``scan.incremental.snapshot.enabled``) with 1 and N chunk readers.

One throw-away MariaDB; a sysbench-shaped table (``id INT`` primary key, ``k INT``, ``c CHAR(120)``,
``pad CHAR(60)``) of ``--rows`` rows. Each configuration reads the whole table with
``MySqlSource`` (``scan.startup.mode: snapshot``, events only counted, not written anywhere) in
its own process, so that its peak RSS (``ru_maxrss``) is its own; it prints rows/s, peak RSS and,
for the incremental snapshot, the most rows its chunk buffers held at once.

    .venv/bin/python bench/bench_incremental_snapshot.py                  # 1M rows, readers 1 and 4
    .venv/bin/python bench/bench_incremental_snapshot.py --rows 100000 --readers 1 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _upsert_kafka_common import machine_note, print_table, progress  # noqa: E402

from changelake.services import MariaDBService, free_port  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from changelake.connectors.mysql_cdc import MySqlSource
opts = json.loads(sys.argv[1])
src = MySqlSource(opts)
t0 = time.perf_counter()
src.open()
rows = 0
while not src.caught_up():
    rows += len(src.poll(5000, 0.5))
seconds = time.perf_counter() - t0
stats = src.snapshot_stats
src.close()
print(json.dumps({"rows": rows, "seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "peak_buffered_rows": stats.get("peak_buffered_rows"), "chunks": stats.get("chunks")}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--chunk-size", type=int, default=8096)
    ap.add_argument("--readers", type=int, nargs="+", default=[1, 4])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-incremental-") as tmp:
        db = MariaDBService(home=Path(tmp) / "mariadb", port=free_port())
        db.start()
        try:
            import pymysql

            conn = pymysql.connect(host="127.0.0.1", port=db.port, user=db.user, password=db.password, autocommit=True)
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                cur.execute("CREATE DATABASE bench")
                cur.execute("USE bench")
                cur.execute("CREATE TABLE bench.t (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL)")
                step = 200_000
                for lo in range(0, args.rows, step):
                    n = min(step, args.rows - lo)
                    cur.execute(f"INSERT INTO bench.t SELECT {lo} + seq, seq % 1000, REPEAT(CHAR(97 + seq % 26), 120), "
                                f"REPEAT('p', 60) FROM seq_1_to_{n}")
                cur.execute("ANALYZE TABLE bench.t")
                cur.fetchall()
            conn.close()
            progress(f"{args.rows:,} rows loaded in {time.perf_counter() - t0:.1f} s")
            base = {"hostname": "127.0.0.1", "port": str(db.port), "username": db.user, "password": db.password,
                    "tables": "bench.t", "scan.startup.mode": "snapshot",
                    "scan.incremental.snapshot.chunk.size": str(args.chunk_size)}
            configs = [("consistent snapshot (default)", {**base, "server-id": "5400"})]
            for n in args.readers:
                configs.append((f"incremental, {n} reader(s)", {**base, "scan.incremental.snapshot.enabled": "true",
                                                               "server-id": f"5500-{5500 + n - 1}"}))
            results = []
            for name, opts in configs:
                out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(opts)], capture_output=True, text=True, check=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                assert r["rows"] == args.rows, (name, r)
                progress(f"{name}: {r}")
                results.append((name, r))
            first = results[0][1]["rows"] / results[0][1]["seconds"]
            rows = [[name, f"{r['rows'] / r['seconds']:,.0f}", f"{r['rows'] / r['seconds'] / first:.2f}x",
                     f"{r['peak_rss_mb']:,.0f}", f"{r['peak_buffered_rows'] or '-'}", f"{r['chunks'] or '-'}"]
                    for name, r in results]
            print(machine_note())
            print(f"snapshot of {args.rows:,} rows, chunk size {args.chunk_size}")
            print_table(["reader", "rows/s", "vs consistent", "peak RSS MB", "peak buffered rows", "chunks"], rows)
        finally:
            db.stop()


if __name__ == "__main__":
    main()
