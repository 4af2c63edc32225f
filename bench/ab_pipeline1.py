"""Interleaved A/B of Pipeline 1 (MySQL binlog -> Kafka, exactly-once) between two source trees,
on one binlog, one MariaDB and one Kafka: each run is a child process with the tree first on
``sys.path``; prints streaming rate (first -> last record) and the child's CPU per event.

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
from changelake.services import KafkaService, MariaDBService
a = json.loads(sys.argv[3])
class DB: pass
db = DB(); db.port, db.user, db.password = a["port"], a["user"], a["password"]
class K: pass
k = K(); k.bootstrap_servers = a["bootstrap"]
import changelake
res = bp.run_changelake(db, k, tuple(a["start"]), a["tables"], "exactly-once", a["name"])
ru = resource.getrusage(resource.RUSAGE_SELF); rc = resource.getrusage(resource.RUSAGE_CHILDREN)
res["cpu_s"] = ru.ru_utime + ru.ru_stime; res["worker_cpu_s"] = rc.ru_utime + rc.ru_stime
res["tree"] = changelake.__file__
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
            for label, tree in (("A", args.a), ("B", args.b)):
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
                             round(res["worker_cpu_s"] / n * 1e6, 1), round(os.getloadavg()[0], 1)])
                bp.progress(f"{label} round {r + 1}: {rows[-1]}")
        bp.print_table(["tree", "round", "events", "events/s streaming", "parent CPU µs/event", "worker CPU µs/event",
                        "load 1 min"], rows)
        for label in ("A", "B"):
            rates = sorted(x[3] for x in rows if x[0] == label)
            print(f"{label}: median streaming {rates[len(rates) // 2] if len(rates) % 2 else sum(rates[len(rates)//2-1:len(rates)//2+1]) / 2:,.0f} events/s")


if __name__ == "__main__":
    main()
