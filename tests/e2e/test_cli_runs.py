"""The command line against real services: a second run of a running pipeline is refused naming the
first; Ctrl-C is a clean stop with final stats; ``changelake check`` gates CI."""

from __future__ import annotations

import signal
import subprocess
import sys

import pymysql
import pytest

from dagster_dev import REPO_ROOT, service_env, wait_committed, write_pipelines

pytestmark = pytest.mark.integration


@pytest.fixture
def cli(tmp_path, mysql_params, kafka_bootstrap, database_factory):
    db = database_factory()
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("CREATE TABLE b (id INT PRIMARY KEY, n INT)")
        cur.execute("INSERT INTO a VALUES (1,'x'),(2,'y')")
        cur.execute("INSERT INTO b VALUES (1,10)")
    conn.close()
    pipes = tmp_path / "pipelines"
    write_pipelines(pipes, db, "7500-7510")
    env = service_env(tmp_path, mysql_params, kafka_bootstrap, pipes)

    def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cli", *args], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=300, **kwargs)

    def start(*args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=REPO_ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    return db, pipes, run, start, kafka_bootstrap


def test_second_run_refused_then_ctrl_c_is_a_clean_stop_with_final_stats(cli):
    db, pipes, run, start, bootstrap = cli
    first = start("pipeline", "run", str(pipes / "one.yaml"))
    try:
        wait_committed(bootstrap, {f"{db}.a": 2, f"{db}.b": 1})  # snapshot done, now following the binlog
        second = run("pipeline", "run", str(pipes / "one.yaml"), "--until-caught-up")
        assert second.returncode == 1
        assert f"pipeline 'p1-{db}' is already running: run " in second.stderr
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    assert "Traceback" not in err and "Interrupted" not in err, err
    assert "stopped_because=stop requested" in out
    for field in ("events=3", "batches=", "position={", "offsets={\"", "elapsed_s="):
        assert field in out, out


def test_changelake_check_prints_each_table_and_exits_non_zero_on_failure(cli, mysql_params):
    db, pipes, run, _, _ = cli
    for name in ("one", "two"):
        result = run("pipeline", "run", str(pipes / f"{name}.yaml"), "--until-caught-up")
        assert result.returncode == 0, result.stderr
    ok = run("check")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for table in ("a", "b"):
        for check in ("key_state_matches_mysql", "no_duplicate_primary_keys", "lake_is_fresh"):
            assert any(line.startswith(f"{db}.{table} ") and check in line and "PASS" in line
                       for line in ok.stdout.splitlines()), ok.stdout
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO b VALUES (2, 20)")  # not captured: the lake falls behind MySQL
    conn.close()
    bad = run("check", "--pipeline", str(pipes / "two.yaml"))
    assert bad.returncode == 1
    assert any(line.startswith(f"{db}.b ") and "key_state_matches_mysql" in line and "FAIL" in line
               for line in bad.stdout.splitlines()), bad.stdout
    assert "lake checks passed: 5, failed: 1" in bad.stdout
