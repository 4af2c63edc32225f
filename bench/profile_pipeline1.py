"""Profile Pipeline 1 (MySQL binlog -> Kafka, exactly-once) with cProfile in the parent and in
the process reader's worker, and report CPU per event on each side.

Not a comparison (no peer): it shows where the time goes, for choosing the next change. One
throw-away MariaDB and Kafka, a sysbench ``oltp_write_only`` binlog as in ``bench_pipeline1.py``.

    .venv/bin/python bench/profile_pipeline1.py --transactions 5000 [--reader thread] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_pipeline1 as bp  # noqa: E402

from changelake.connectors.mysql_cdc.binlog import reader as binlog_reader  # noqa: E402

_real_child_main = binlog_reader._child_main


def _profiled_child_main(conn: Any, cfg: Any) -> None:  # runs in the worker (spawn)
    prof = cProfile.Profile()

    def stop(*_: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    prof.enable()
    try:
        _real_child_main(conn, cfg)
    finally:
        prof.disable()
        prof.dump_stats(os.environ["CHANGELAKE_PROFILE_CHILD"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transactions", type=int, default=5000)
    ap.add_argument("--reader", choices=("process", "thread"), default="process")
    ap.add_argument("--guarantee", choices=("exactly-once", "at-least-once"), default="exactly-once")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--no-profile", action="store_true", help="CPU per event only (no cProfile overhead)")
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="changelake-p1-profile-"))
    with tempfile.TemporaryDirectory(prefix="changelake-p1-prof-") as tmp, bp.kafka_broker() as kafka, \
            bp.mariadb(Path(tmp)) as db:
        bp.sql(db, f"CREATE DATABASE {bp.DB}")
        bp.sysbench(db, "prepare", "--tables=2", "--table-size=10000")
        start = bp.master_status(db)
        bp.sysbench(db, "run", "--tables=2", "--table-size=10000", f"--events={args.transactions}", "--time=0",
                    "--threads=2", "--rand-seed=42")
        os.environ["CHANGELAKE_MYSQL_CDC_READER"] = args.reader
        os.environ["CHANGELAKE_PROFILE_CHILD"] = str(out / "child.prof")
        if not args.no_profile:
            binlog_reader._child_main = _profiled_child_main
        prof = cProfile.Profile()
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        rc0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        if not args.no_profile:
            prof.enable()
        res = bp.run_changelake(db, kafka, start, f"{bp.DB}.sbtest[0-9]+", args.guarantee, f"prof-{uuid.uuid4().hex[:6]}")
        prof.disable()
        wall = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        rc1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        n = res["events"]
        parent_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        child_cpu = (rc1.ru_utime + rc1.ru_stime) - (rc0.ru_utime + rc0.ru_stime)
        print(f"{n:,} events, wall {wall:.2f} s (incl. counting the topic), streaming {res['stream_s']:.2f} s "
              f"= {n / res['stream_s']:,.0f} events/s, batches {res['batches']}")
        print(f"CPU per event: parent {parent_cpu / n * 1e6:.1f} µs, worker {child_cpu / n * 1e6:.1f} µs "
              f"(parent includes counting the topic afterwards)")
        print(f"load average {os.getloadavg()}")
        if not args.no_profile:
            print("\n== parent (tottime) ==")
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
            print("\n== parent (cumulative) ==")
            pstats.Stats(prof).sort_stats("cumulative").print_stats(args.top)
            child = out / "child.prof"
            if child.exists():
                print("\n== worker (tottime) ==")
                pstats.Stats(str(child)).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
