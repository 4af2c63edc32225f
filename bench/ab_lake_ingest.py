"""Interleaved A/B of Pipeline 2 between source trees: one broker, each workload's topics produced
once (``bench_lake_ingest.py``'s workloads and schema headers), then per round each tree's run in a
fresh process (``_ab_lake_run.py``, PYTHONPATH = the tree), the order alternating (A B, B A, ...),
and ``ConsumerPerformance`` on the timed topic. Prints per run wall, rate, CPU µs per event and the
time inside the cyclic collector; at the end medians over rounds. A snapshot of a commit as the
base tree: ``git archive <commit> | tar -x -C /tmp/base``. Run from the repository root::

    .venv/bin/python bench/ab_lake_ingest.py --tree base=/tmp/base --tree new=$PWD [--events 200000] \
        [--rounds 2] [--lake iceberg --lake paimon] [--workload insert-only --workload mixed]
"""
import argparse, json, os, statistics, subprocess, sys, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_lake_ingest as b  # noqa
from _upsert_kafka_common import kafka_broker  # noqa
from confluent_kafka.admin import AdminClient, NewTopic  # noqa
p = argparse.ArgumentParser()
p.add_argument("--tree", action="append", required=True)
p.add_argument("--events", type=int, default=200_000)
p.add_argument("--table-rows", type=int, default=100_000)
p.add_argument("--rounds", type=int, default=2)
p.add_argument("--lake", action="append")
p.add_argument("--workload", action="append")
p.add_argument("--batch", type=int, default=2000)
p.add_argument("--batch-b", type=int, default=None, help="batch size for the second tree")
a = p.parse_args()
trees = [t.split("=", 1) for t in a.tree]
rows = []
with kafka_broker() as kafka:
    bs = kafka.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for wl in a.workload or ["insert-only"]:
        pre, timed = b._workload(wl, a.events, a.table_rows)
        tt = f"ab-{wl}-{time.time_ns()}"; pt = "-"
        admin.create_topics([NewTopic(tt, 1, 1)])[tt].result()
        if wl != "insert-only":
            pt = f"abpre-{wl}-{time.time_ns()}"
            admin.create_topics([NewTopic(pt, 1, 1)])[pt].result()
            b._produce(bs, pt, pre)
        n = b._produce(bs, tt, timed)
        for lake in a.lake or ["iceberg"]:
            for r in range(a.rounds):
                order = trees if r % 2 == 0 else trees[::-1]
                for i, (name, path) in enumerate(order):
                    batch = a.batch_b if (a.batch_b and name == trees[1][0]) else a.batch
                    env = {**os.environ, "PYTHONPATH": path}
                    l0 = os.getloadavg()[0]
                    out = subprocess.run([sys.executable, str(HERE / "_ab_lake_run.py"), bs, pt, tt, lake, str(batch)],
                                         env=env, capture_output=True, text=True, cwd=path)
                    if out.returncode:
                        print(out.stderr[-3000:], file=sys.stderr); raise SystemExit(1)
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    assert res["tree"] == path, res
                    res.update(name=name, lake=lake, wl=wl, round=r, load=f"{l0:.1f}->{os.getloadavg()[0]:.1f}")
                    rows.append(res)
                    print(f"{wl:12s} {lake:8s} r{r} {name:6s} events {res['events']} wall {res['wall']:.2f}s "
                          f"rate {res['events']/res['wall']:,.0f}/s cpu {res['cpu']*1e6/res['events']:.1f}us/ev "
                          f"gc {res['gc']:.2f}s batches {res['batches']} load {res['load']}", flush=True)
                cp = b._consumer_perf(kafka, tt, n)
                print(f"{wl:12s} {lake:8s} r{r} ConsumerPerformance {cp:,.0f} rec/s", flush=True)
                for res in rows[-len(trees):]:
                    res["cp"] = cp
    print("summary (median over rounds):")
    for wl in a.workload or ["insert-only"]:
        for lake in a.lake or ["iceberg"]:
            for name, _ in trees:
                sel = [r for r in rows if r["wl"] == wl and r["lake"] == lake and r["name"] == name]
                cpu = statistics.median(r["cpu"] * 1e6 / r["events"] for r in sel)
                ratio = statistics.median(r["events"] / r["wall"] / r["cp"] for r in sel)
                rate = statistics.median(r["events"] / r["wall"] for r in sel)
                print(f"  {wl:12s} {lake:8s} {name:6s} rate {rate:,.0f}/s ratio {ratio:.3f} cpu {cpu:.1f} us/event")
