"""Pipeline 1 (MySQL binlog -> Kafka) against Debezium 3.6.1's MySQL connector, in one run.

One throw-away MariaDB (row binlog, FULL image and metadata) and one throw-away Kafka. The
MariaDB reports ``--version=5.7.19-10.11.19-MariaDB-log`` because Debezium's MySQL connector
refuses a MariaDB 10.11 version string (only the reported string changes; see
``../shared/reference/debezium-peer.md``).

Binlog workload, generated once: ``sysbench oltp_write_only`` prepares ``--tables`` tables of
``--table-size`` rows (not read), then runs ``--transactions`` transactions; the binlog position
before and after the run bounds what every reader reads. Each reader starts from scratch at that
position, writes to its own topics on the same broker and stops when it has delivered every
change:

* changelake, ``sink.delivery-guarantee`` at-least-once and exactly-once
  (``scan.startup.mode: specific-offset``, debezium-json values, one topic per run,
  ``run_pipeline(until_caught_up=True)``), with the binlog reader in a thread
  (``CHANGELAKE_MYSQL_CDC_READER=thread``) and in a worker process (the default, ``=process``);
* Debezium's MySQL connector on Kafka Connect standalone (jars from Maven Central via
  ``bench/debezium/*.xml``, cached), JsonConverter without schemas, ``tombstones.on.delete=false``,
  its offset set to the same position through Connect's REST offsets API while the connector is
  STOPPED, ``snapshot.mode=recovery`` (schema history rebuilt from the live tables).

Rates: *wall* = change events / seconds from the reader's start (process start for Connect,
``run_pipeline`` call for changelake) until its last record is in Kafka; *streaming* = change
events / seconds between the first and the last record's Kafka timestamp (CreateTime: when the
producer got it). Snapshot: ``--snapshot-rows`` rows of a sysbench-shaped table read by
changelake (``scan.startup.mode: snapshot``, in a child process) and by Debezium
(``snapshot.mode=initial``), rows/s the same two ways, and each one's peak RSS (VmHWM, MiB).

    .venv/bin/python bench/bench_pipeline1.py                      # 20k transactions, 1M-row snapshot
    .venv/bin/python bench/bench_pipeline1.py --transactions 2000 --snapshot-rows 50000 --skip-debezium
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _upsert_kafka_common import kafka_broker, machine_note, print_table, progress  # noqa: E402

from changelake.pipeline.definition import parse_pipeline  # noqa: E402
from changelake.pipeline.runner import run_pipeline  # noqa: E402
from changelake.services import KafkaService, MariaDBService, free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("CHANGELAKE_BENCH_CACHE", Path.home() / ".cache" / "changelake-bench"))
DB = "sbtest"
MARIADB_VERSION = "5.7.19-10.11.19-MariaDB-log"


# -- services -------------------------------------------------------------------------------------


@contextlib.contextmanager
def mariadb(home: Path) -> Iterator[MariaDBService]:
    db = MariaDBService(home=home / "mariadb", port=free_port(), extra_args=(f"--version={MARIADB_VERSION}",))
    t0 = time.perf_counter()
    try:
        db.start()
        progress(f"MariaDB up on port {db.port} in {time.perf_counter() - t0:.1f} s")
        yield db
    finally:
        db.stop()


def sql(db: MariaDBService, *statements: str, database: str | None = None) -> list[Any]:
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=db.port, user=db.user, password=db.password, database=database,
                           autocommit=True)
    try:
        out = []
        with conn.cursor() as cur:
            for stmt in statements:
                cur.execute(stmt)
                out.append(cur.fetchall())
        return out
    finally:
        conn.close()


def master_status(db: MariaDBService) -> tuple[str, int]:
    (rows,) = sql(db, "SHOW MASTER STATUS")
    return str(rows[0][0]), int(rows[0][1])


def sysbench(db: MariaDBService, command: str, *extra: str, database: str = DB) -> None:
    args = ["sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={db.port}",
            f"--mysql-user={db.user}", f"--mysql-password={db.password}", f"--mysql-db={database}", *extra, command]
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"sysbench {command} failed: {proc.stderr[-500:] or proc.stdout[-500:]}")


# -- Kafka side: count what a reader wrote ------------------------------------------------------------


def topic_stats(bootstrap: str, topics: list[str], expected: int, idle_s: float = 20.0) -> tuple[int, int, int]:
    """(records, first CreateTime ms, last CreateTime ms) over ``topics`` (read_committed), reading
    until ``expected`` records are seen or nothing arrives for ``idle_s``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.subscribe(topics)
        count, first, last = 0, None, 0
        quiet_since = time.monotonic()
        while count < expected and time.monotonic() - quiet_since < idle_s:
            msgs = consumer.consume(5000, timeout=1.0)
            for m in msgs:
                if m.error() or m.value() is None:
                    continue
                count += 1
                ts = m.timestamp()[1]
                first = ts if first is None else min(first, ts)
                last = max(last, ts)
            if msgs:
                quiet_since = time.monotonic()
        _ = TopicPartition
        return count, first or 0, last
    finally:
        consumer.close()


def wait_until_count(bootstrap: str, topics: list[str], expected: int, timeout_s: float) -> float:
    """Poll until ``topics`` hold ``expected`` records (end offsets); returns the time it happened."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-w-{uuid.uuid4().hex[:6]}"})
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            total = 0
            md = consumer.list_topics(timeout=5)
            for t in topics:
                if t not in md.topics:
                    continue
                for p in md.topics[t].partitions:
                    total += consumer.get_watermark_offsets(TopicPartition(t, p), timeout=5)[1]
            if total >= expected:
                return time.perf_counter()
            time.sleep(0.25)
        raise TimeoutError(f"{topics}: fewer than {expected} records after {timeout_s} s")
    finally:
        consumer.close()


# -- changelake ---------------------------------------------------------------------------------------


def _peak_rss_mb(pid: int | None = None) -> float:
    """Peak resident set size (VmHWM) of a process (this one by default), MiB."""
    for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _changelake_in_child(port: int, user: str, password: str, bootstrap: str, tables: str, guarantee: str,
                         name: str) -> dict[str, Any]:
    """run_changelake (snapshot mode) in a fresh process, with that process's peak RSS."""
    from types import SimpleNamespace

    db = SimpleNamespace(port=port, user=user, password=password)
    res = run_changelake(db, SimpleNamespace(bootstrap_servers=bootstrap), None, tables, guarantee, name)  # type: ignore[arg-type]
    res["peak_rss_mb"] = _peak_rss_mb()
    return res


def run_changelake_child(db: MariaDBService, kafka: KafkaService, tables: str, guarantee: str, name: str) -> dict[str, Any]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_changelake_in_child, db.port, db.user, db.password, kafka.bootstrap_servers, tables,
                           guarantee, name).result()


def run_changelake(db: MariaDBService, kafka: KafkaService, start: tuple[str, int] | None, tables: str,
                   guarantee: str, name: str) -> dict[str, Any]:
    topic = f"{name}-out"
    source: dict[str, Any] = {
        "type": "mysql", "hostname": "127.0.0.1", "port": db.port, "username": db.user, "password": db.password,
        "tables": tables, "server-id": str(6000 + hash(name) % 1000),
    }
    if start is None:
        source["scan.startup.mode"] = "snapshot"
    else:
        source.update({"scan.startup.mode": "specific-offset", "scan.startup.specific-offset.file": start[0],
                       "scan.startup.specific-offset.pos": str(start[1])})
    defn = parse_pipeline({
        "pipeline": {"name": name},
        "source": source,
        "sink": {"type": "kafka", "properties.bootstrap.servers": kafka.bootstrap_servers, "topic": topic,
                 "value.format": "debezium-json", "sink.delivery-guarantee": guarantee},
    }, env={})
    t0 = time.perf_counter()
    stats = run_pipeline(defn, until_caught_up=True)
    wall = time.perf_counter() - t0
    count, first, last = topic_stats(kafka.bootstrap_servers, [topic], stats.events)
    return {"events": count, "wall_s": wall, "stream_s": (last - first) / 1000 if last > first else wall,
            "batches": stats.batches}


# -- Debezium on Kafka Connect standalone -------------------------------------------------------------


def fetch_connect() -> tuple[Path, Path]:
    """(Connect worker classpath folder, plugin path) in the cache; Maven fetches them once."""
    connect, plugins = CACHE / "connect", CACHE / "plugins"
    for pom, out in ((HERE / "debezium" / "connect-pom.xml", connect),
                     (HERE / "debezium" / "debezium-pom.xml", plugins / "debezium-connector-mysql")):
        if out.exists() and any(out.glob("*.jar")):
            continue
        staging = out.with_name(out.name + ".part")
        shutil.rmtree(staging, ignore_errors=True)
        progress(f"fetching {pom.name} from Maven Central into {out}")
        subprocess.run(["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={staging}"],
                       check=True)
        staging.rename(out)
    return connect, plugins


def _rest(port: int, method: str, path: str, body: Any = None) -> Any:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read()
    return json.loads(text) if text else None


def _wait_rest(port: int, path: str, ok: Any, timeout_s: float, proc: subprocess.Popen[bytes], log: Path) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Kafka Connect exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            last = _rest(port, "GET", path)
            if ok(last):
                return last
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"Connect: {path} not ready after {timeout_s} s (last: {last}); log {log}")


def start_debezium(db: MariaDBService | Any, bootstrap: str, work: Path, name: str, tables: str, snapshot_mode: str,
                   stopped: bool = False) -> tuple[subprocess.Popen[bytes], int, Path]:
    """Start Debezium's MySQL connector for ``tables`` (``db.t1,db.t2``) on Kafka Connect standalone
    (JSON converter without schemas, topic prefix ``name``) writing to ``bootstrap``.

    Returns (the Connect process, its REST port, its log file); stop it with :func:`stop_process`.
    """
    connect_cp, plugins = fetch_connect()
    work.mkdir(parents=True)
    port = free_port()
    (work / "worker.properties").write_text("\n".join([
        f"bootstrap.servers={bootstrap}",
        "key.converter=org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable=false",
        "value.converter=org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable=false",
        f"offset.storage.file.filename={work / 'offsets.dat'}", "offset.flush.interval.ms=1000",
        f"plugin.path={plugins}", f"listeners=http://127.0.0.1:{port}", "",
    ]))
    config = {
        "connector.class": "io.debezium.connector.mysql.MySqlConnector", "tasks.max": "1",
        "database.hostname": "127.0.0.1", "database.port": str(db.port), "database.user": db.user,
        "database.password": db.password, "database.server.id": str(8000 + hash(name) % 1000), "topic.prefix": name,
        "database.include.list": tables.split(".")[0], "table.include.list": tables,
        "schema.history.internal.kafka.bootstrap.servers": bootstrap,
        "schema.history.internal.kafka.topic": f"{name}-history", "include.schema.changes": "false",
        "tombstones.on.delete": "false", "snapshot.mode": snapshot_mode,
    }
    (work / "connector.json").write_text(json.dumps({"name": name, "config": config,
                                                     **({"initial_state": "STOPPED"} if stopped else {})}))
    log = work / "connect.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["java", "-Xmx1g", "-cp", f"{connect_cp}/*", "org.apache.kafka.connect.cli.ConnectStandalone",
             str(work / "worker.properties"), str(work / "connector.json")],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, port, log


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def run_debezium(db: MariaDBService, kafka: KafkaService, home: Path, start: tuple[str, int] | None, tables: str,
                 expected: int, name: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc, port, log = start_debezium(db, kafka.bootstrap_servers, home / name, name, tables,
                                     "initial" if start is None else "recovery", stopped=start is not None)
    try:
        if start is not None:
            _wait_rest(port, f"/connectors/{name}/status", lambda s: s["connector"]["state"] == "STOPPED", 120, proc, log)
            _rest(port, "PATCH", f"/connectors/{name}/offsets", {"offsets": [
                {"partition": {"server": name}, "offset": {"file": start[0], "pos": start[1]}}]})
            _rest(port, "PUT", f"/connectors/{name}/resume")
        topics = [f"{name}.{t}" for t in tables.split(",")]
        done = wait_until_count(kafka.bootstrap_servers, topics, expected, timeout_s=1800)
        wall = done - t0
        peak_rss = _peak_rss_mb(proc.pid)
    finally:
        stop_process(proc)
    count, first, last = topic_stats(kafka.bootstrap_servers, topics, expected)
    return {"events": count, "wall_s": wall, "stream_s": (last - first) / 1000 if last > first else wall, "batches": None,
            "peak_rss_mb": peak_rss}


# -- main -----------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=2)
    ap.add_argument("--table-size", type=int, default=10000)
    ap.add_argument("--transactions", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=2, help="sysbench threads generating the binlog")
    ap.add_argument("--snapshot-rows", type=int, default=1_000_000, help="0 skips the snapshot comparison")
    ap.add_argument("--rounds", type=int, default=1, help="binlog readers are run this many times, interleaved")
    ap.add_argument("--skip-debezium", action="store_true")
    ap.add_argument("--skip-process-reader", action="store_true",
                    help="leave out the runs with CHANGELAKE_MYSQL_CDC_READER=process (binlog decoded in a worker process)")
    ap.add_argument("--skip-thread-reader", action="store_true",
                    help="leave out the runs with CHANGELAKE_MYSQL_CDC_READER=thread (the goal's figure is the default, process)")
    ap.add_argument("--guarantee", action="append", choices=("at-least-once", "exactly-once"),
                    help="changelake delivery guarantees to run (repeatable; default both)")
    args = ap.parse_args()
    guarantees = args.guarantee or ["at-least-once", "exactly-once"]

    with tempfile.TemporaryDirectory(prefix="changelake-bench-p1-") as tmp, kafka_broker() as kafka, \
            mariadb(Path(tmp)) as db:
        home = Path(tmp)
        sql(db, f"CREATE DATABASE {DB}")
        t0 = time.perf_counter()
        sysbench(db, "prepare", f"--tables={args.tables}", f"--table-size={args.table_size}")
        start = master_status(db)
        sysbench(db, "run", f"--tables={args.tables}", f"--table-size={args.table_size}", f"--events={args.transactions}",
                 "--time=0", f"--threads={args.threads}", "--rand-seed=42")
        end = master_status(db)
        progress(f"binlog generated in {time.perf_counter() - t0:.1f} s: {start} .. {end}")
        tables = ",".join(f"{DB}.sbtest{i}" for i in range(1, args.tables + 1))
        selector = f"{DB}.sbtest[0-9]+"

        rows: list[list[Any]] = []
        results: dict[str, list[dict[str, Any]]] = {}
        expected = None
        for r in range(args.rounds):
            for label, guarantee, reader in (("changelake at-least-once", "at-least-once", "thread"),
                                             ("changelake exactly-once", "exactly-once", "thread"),
                                             ("changelake at-least-once, process reader", "at-least-once", "process"),
                                             ("changelake exactly-once, process reader", "exactly-once", "process")):
                if ((reader == "process" and args.skip_process_reader) or (reader == "thread" and args.skip_thread_reader)
                        or guarantee not in guarantees):
                    continue
                progress(f"round {r + 1}: {label} ...")
                os.environ["CHANGELAKE_MYSQL_CDC_READER"] = reader
                try:
                    res = run_changelake(db, kafka, start, selector, guarantee, f"cl-{guarantee}-{r}-{uuid.uuid4().hex[:4]}")
                finally:
                    os.environ.pop("CHANGELAKE_MYSQL_CDC_READER", None)
                expected = expected or res["events"]
                res["load"] = os.getloadavg()[0]
                results.setdefault(label, []).append(res)
                progress(f"  {res['events']:,} events, wall {res['wall_s']:.1f} s, streaming {res['stream_s']:.1f} s")
            if not args.skip_debezium:
                progress(f"round {r + 1}: Debezium 3.6.1 on Connect standalone ...")
                res = run_debezium(db, kafka, home, start, tables, expected or 0, f"dbz{r}{uuid.uuid4().hex[:4]}")
                res["load"] = os.getloadavg()[0]
                results.setdefault("Debezium 3.6.1 (Connect standalone)", []).append(res)
                progress(f"  {res['events']:,} events, wall {res['wall_s']:.1f} s, streaming {res['stream_s']:.1f} s")

        snapshot: dict[str, dict[str, Any]] = {}
        if args.snapshot_rows:
            progress(f"snapshot table: {args.snapshot_rows:,} rows ...")
            sql(db, "CREATE DATABASE sbsnap")
            sysbench(db, "prepare", "--tables=1", f"--table-size={args.snapshot_rows}", "--create-secondary=off",
                     database="sbsnap")
            res = run_changelake_child(db, kafka, "sbsnap.sbtest1", "at-least-once", f"cl-snap-{uuid.uuid4().hex[:4]}")
            snapshot["changelake (snapshot mode, at-least-once)"] = res
            progress(f"  changelake: {res['events']:,} rows, wall {res['wall_s']:.1f} s")
            if not args.skip_debezium:
                res = run_debezium(db, kafka, home, None, "sbsnap.sbtest1", args.snapshot_rows, f"dbzs{uuid.uuid4().hex[:4]}")
                snapshot["Debezium 3.6.1 (snapshot.mode=initial)"] = res
                progress(f"  Debezium: {res['events']:,} rows, wall {res['wall_s']:.1f} s")

    def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return max(runs, key=lambda x: x["events"] / x["stream_s"])

    dbz = results.get("Debezium 3.6.1 (Connect standalone)")
    ref = best(dbz) if dbz else None
    for label, runs in results.items():
        for res in runs:
            wall, stream = res["events"] / res["wall_s"], res["events"] / res["stream_s"]
            rows.append([label, res["events"], round(res["wall_s"], 2), round(wall), round(stream),
                         f"{wall / (ref['events'] / ref['wall_s']):.2f}" if ref else "",
                         f"{stream / (ref['events'] / ref['stream_s']):.2f}" if ref else "",
                         f"{res.get('load', float('nan')):.1f}"])
    print(f"binlog: sysbench oltp_write_only, {args.transactions:,} transactions on {args.tables} x {args.table_size:,} rows, "
          f"{args.threads} threads")
    print_table(["reader", "events", "wall s", "events/s wall", "events/s streaming", "wall vs Debezium",
                 "streaming vs Debezium", "load 1 min after"], rows)
    if args.rounds >= 2:  # the goal's figure: medians over the interleaved rounds, against Debezium's median
        def median_rate(runs: list[dict[str, Any]], key: str) -> float:
            return float(statistics.median(r["events"] / r[key] for r in runs))

        mrows = []
        for label, runs in results.items():
            wall, stream = median_rate(runs, "wall_s"), median_rate(runs, "stream_s")
            mrows.append([label, len(runs), round(wall), round(stream),
                          f"{wall / median_rate(dbz, 'wall_s'):.2f}" if dbz else "",
                          f"{stream / median_rate(dbz, 'stream_s'):.2f}" if dbz else ""])
        print(f"\nmedians over {args.rounds} interleaved rounds (ratios against Debezium's median)")
        print_table(["reader", "rounds", "events/s wall", "events/s streaming", "wall vs Debezium",
                     "streaming vs Debezium"], mrows)
    if snapshot:
        sref = snapshot.get("Debezium 3.6.1 (snapshot.mode=initial)")
        srows = []
        for label, res in snapshot.items():
            wall, stream = res["events"] / res["wall_s"], res["events"] / res["stream_s"]
            srows.append([label, res["events"], round(res["wall_s"], 2), round(wall), round(stream),
                          f"{wall / (sref['events'] / sref['wall_s']):.2f}" if sref else "",
                          f"{stream / (sref['events'] / sref['stream_s']):.2f}" if sref else "",
                          round(res.get("peak_rss_mb", float("nan")))])
        print(f"\nsnapshot: one sysbench table of {args.snapshot_rows:,} rows")
        print_table(["reader", "rows", "wall s", "rows/s wall", "rows/s streaming", "wall vs Debezium",
                     "streaming vs Debezium", "peak RSS MiB"], srows)
    print(f"machine: {machine_note()}")


if __name__ == "__main__":
    main()
