"""Long work shows progress: an unbounded ``changelake pipeline run`` prints a progress line at a
steady interval (plain lines when stderr is not a terminal) and its Dagster run logs the same
lines; the snapshot's row estimate comes from the server. ``changelake dev`` started the way a
shell starts a background job (SIGINT ignored) still stops on SIGTERM and on SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import dagster as dg
import pymysql
import pytest

from dagster_dev import REPO_ROOT, service_env, wait_committed, write_pipelines

pytestmark = pytest.mark.integration


def test_an_unbounded_run_prints_progress_lines_and_logs_them_in_dagster(tmp_path, mysql_params, kafka_bootstrap,
                                                                         database_factory):
    db = database_factory()
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("CREATE TABLE b (id INT PRIMARY KEY, n INT)")
        cur.execute("INSERT INTO a VALUES (1,'x'),(2,'y')")
        cur.execute("INSERT INTO b VALUES (1,10)")
    pipes = tmp_path / "pipelines"
    write_pipelines(pipes, db, "7550-7560")
    env = {**service_env(tmp_path, mysql_params, kafka_bootstrap, pipes), "CHANGELAKE_PROGRESS_INTERVAL_S": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "cli", "pipeline", "run", str(pipes / "one.yaml")],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_committed(kafka_bootstrap, {f"{db}.a": 2, f"{db}.b": 1})  # snapshot, then following the binlog
        with conn.cursor() as cur:
            cur.execute("INSERT INTO b VALUES (2,20)")
        time.sleep(5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        conn.close()
    assert proc.returncode == 0, err
    lines = [line for line in err.splitlines() if line.startswith("progress: ")]
    assert len(lines) >= 5, err  # about one a second, also while idle
    last = lines[-1]
    assert f"{db}.a 2" in last and f"{db}.b 2" in last, last  # events per table
    assert "position binlog " in last, last
    with dg.DagsterInstance.from_config(str(tmp_path / "state" / "dagster")) as instance:
        (run,) = instance.get_runs(dg.RunsFilter(job_name=f"p1_{db}"))
        logged = [e.user_message for e in instance.all_logs(run.run_id) if e.user_message.startswith("progress: ")]
    assert len(logged) >= 5 and f"{db}.b 2" in logged[-1], logged[-3:]


def test_the_snapshot_estimate_comes_from_the_server(mysql_params, database_factory):
    from changelake.connectors.mysql_cdc.snapshot.estimate import snapshot_row_estimate

    db = database_factory()
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE big (id INT PRIMARY KEY)")
        cur.execute("CREATE TABLE other (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO big SELECT seq FROM seq_1_to_3000")
        cur.execute("INSERT INTO other VALUES (1)")
        cur.execute("ANALYZE TABLE big, other")
        cur.fetchall()
    conn.close()
    options = {"hostname": mysql_params["host"], "port": str(mysql_params["port"]), "username": mysql_params["user"],
               "password": mysql_params["password"], "tables": f"{db}.big", "server-id": "7561"}
    estimate = snapshot_row_estimate(options)
    assert estimate is not None and 1500 <= estimate <= 4500, estimate  # InnoDB's estimate, not a count
    assert snapshot_row_estimate({**options, "password": "wrong"}) is None


def _dev(tmp_path, port: int) -> subprocess.Popen:
    from changelake.services import free_port  # noqa: F401 - same helper as the browser test

    env = service_env(tmp_path, {"host": "127.0.0.1", "port": 1, "user": "u", "password": "p"}, "127.0.0.1:1",
                      tmp_path / "pipelines")
    (tmp_path / "pipelines").mkdir(exist_ok=True)

    def background() -> None:  # as `changelake dev &` in a non-interactive shell
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen([sys.executable, "-m", "cli", "dev", "--port", str(port)], cwd=REPO_ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=background)


def _wait_listening(port: int, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "changelake dev exited early"
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2).read()
            return
        except OSError:
            time.sleep(1)
    raise AssertionError("the UI did not come up")


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT])
def test_dev_started_in_the_background_stops_on_sigterm_and_sigint(tmp_path, signo):
    from changelake.services import free_port

    port = free_port()
    proc = _dev(tmp_path, port)
    try:
        _wait_listening(port, proc)
        proc.send_signal(signo)
        assert proc.wait(timeout=60) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
