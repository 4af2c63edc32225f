"""Interleaved A/B of Pipeline 1 (MySQL binlog -> Kafka, exactly-once) between two source trees,
on one binlog, one MariaDB and one Kafka: each run is a child process with the tree first on
``sys.path``; prints streaming rate (first -> last record) and CPU per event of the parent and of
the binlog worker: over the whole run (with start-up and counting the topic), and between the
sink's first and last ``write`` (streaming only, /proc/<pid>/stat of the worker).

    .venv/bin/python bench/ab_pipeline1.py --a /path/to/old/tree --b . --rounds 2 --transactions 5000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_pipeline1 as bp  # noqa: E402

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
import changelake  # first: the bench helpers put this script's own tree on sys.path
import bench_pipeline1 as bp
# ... and the spawned binlog worker imports from sys.path as it is when it starts: the tree
# under test must stay first, or the worker would run the bench's own tree (before 2026-12-02
# it did, so earlier process-reader A/Bs compared the parents only)
sys.path[:] = [sys.argv[1]] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.abspath(sys.argv[1])]
from changelake.services import KafkaService, MariaDBService
a = json.loads(sys.argv[3])
class DB: pass
db = DB(); db.port, db.user, db.password = a["port"], a["user"], a["password"]
class K: pass
k = K(); k.bootstrap_servers = a["bootstrap"]
import changelake
from changelake.connectors.kafka import sink as _sink
_write, marks = _sink.KafkaPipelineSink.write, {}
_TCK = os.sysconf("SC_CLK_TCK")
def cpu_now():
    # (this process, its children: the binlog worker) CPU seconds, user + system
    t = os.times()
    kids = 0.0
    for task in os.listdir("/proc/self/task"):
        try:
            pids = open(f"/proc/self/task/{task}/children").read().split()
        except OSError:
            continue
        for pid in pids:
            try:
                f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            kids += (int(f[11]) + int(f[12])) / _TCK
    return t.user + t.system, kids
def write(self, events):
    if events and "first" not in marks:
        marks["first"] = cpu_now()
    out = _write(self, events)
    if events:
        marks["last"] = cpu_now()
    return out
_sink.KafkaPipelineSink.write = write
res = bp.run_changelake(db, k, tuple(a["start"]), a["tables"], "exactly-once", a["name"])
ru = resource.getrusage(resource.RUSAGE_SELF); rc = resource.getrusage(resource.RUSAGE_CHILDREN)
res["cpu_s"] = ru.ru_utime + ru.ru_stime; res["worker_cpu_s"] = rc.ru_utime + rc.ru_stime
res["tree"] = changelake.__file__
if "first" in marks:  # CPU between the first and the last write: streaming only, no start-up
    res["stream_cpu_s"] = marks["last"][0] - marks["first"][0]; res["stream_worker_cpu_s"] = marks["last"][1] - marks["first"][1]
print("RESULT " + json.dumps(res))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--transactions", type=int, default=5000)
    ap.add_argument("--reader", choices=("process", "thread"), default="process")
    args = ap.parse_args()
    bench_dir = str(Path(__file__).resolve().parent)
    with tempfile.TemporaryDirectory(prefix="changelake-p1-ab-") as tmp, bp.kafka_broker() as kafka, \
            bp.mariadb(Path(tmp)) as db:
        bp.sql(db, f"CREATE DATABASE {bp.DB}")
        bp.sysbench(db, "prepare", "--tables=2", "--table-size=10000")
        start = bp.master_status(db)
        bp.sysbench(db, "run", "--tables=2", "--table-size=10000", f"--events={args.transactions}", "--time=0",
                    "--threads=2", "--rand-seed=42")
        rows = []
        for r in range(args.rounds):
            pair = [("A", args.a), ("B", args.b)]
            for label, tree in (pair if r % 2 == 0 else pair[::-1]):  # who goes first alternates
                spec = {"port": db.port, "user": db.user, "password": db.password, "bootstrap": kafka.bootstrap_servers,
                        "start": list(start), "tables": f"{bp.DB}.sbtest[0-9]+", "name": f"ab-{label}-{r}-{uuid.uuid4().hex[:4]}"}
                env = dict(os.environ, CHANGELAKE_MYSQL_CDC_READER=args.reader, PYTHONPATH=str(Path(tree).resolve()))
                out = subprocess.run([sys.executable, "-c", CHILD, str(Path(tree).resolve()), bench_dir, json.dumps(spec)],
                                     env=env, capture_output=True, text=True)
                line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
                if line is None:
                    raise SystemExit(out.stderr[-2000:])
                res = json.loads(line[7:])
                n = res["events"]
                rows.append([label, r + 1, n, round(n / res["stream_s"]), round(res["cpu_s"] / n * 1e6, 1),
                             round(res["worker_cpu_s"] / n * 1e6, 1),
                             round(res.get("stream_cpu_s", float("nan")) / n * 1e6, 1),
                             round(res.get("stream_worker_cpu_s", float("nan")) / n * 1e6, 1),
                             round(os.getloadavg()[0], 1)])
                bp.progress(f"{label} round {r + 1}: {rows[-1]}")
        bp.print_table(["tree", "round", "events", "events/s streaming", "parent CPU µs/event", "worker CPU µs/event",
                        "parent streaming µs/event", "worker streaming µs/event", "load 1 min"], rows)
        def median(xs: list[float]) -> float:
            xs = sorted(xs)
            return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2

        med = {label: [median([x[i] for x in rows if x[0] == label]) for i in (3, 6, 7)] for label in ("A", "B")}
        for label in ("A", "B"):
            rate, parent_us, worker_us = med[label]
            print(f"{label}: median streaming {rate:,.0f} events/s; streaming CPU per event: parent {parent_us:.1f} µs, "
                  f"worker {worker_us:.1f} µs")
        worker = (f"{med['B'][2] / med['A'][2]:.2f}x" if med["A"][2] else "n/a (thread reader: in the parent's figure)")
        print(f"B / A: streaming rate {med['B'][0] / med['A'][0]:.2f}x, parent CPU per event "
              f"{med['B'][1] / med['A'][1]:.2f}x, worker CPU per event {worker}")
        print(f"load average {os.getloadavg()}")

if __name__ == "__main__":
    main()
