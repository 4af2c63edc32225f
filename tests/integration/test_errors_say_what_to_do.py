"""Errors that say what to do, from the command line against real servers: a ``tables`` pattern
that matches nothing lists the tables that exist; a refused login names where each credential
came from (YAML literal or environment); an unreachable Kafka is reported with the 10 s probe's
timeout, not after the 30 s client timeouts add up."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pymysql
import pytest

from changelake.services import free_port

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, mysql_params: dict, kafka: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env.update({
        "CHANGELAKE_STATE_DIR": str(tmp_path / "state"), "CHANGELAKE_PIPELINES_DIR": str(tmp_path / "none"),
        "MYSQL_HOST": mysql_params["host"], "MYSQL_PORT": str(mysql_params["port"]),
        "MYSQL_USER": mysql_params["user"], "MYSQL_PASSWORD": mysql_params["password"],
        "KAFKA_BOOTSTRAP_SERVERS": kafka, "PYTHONWARNINGS": "ignore",
        "ICEBERG_CATALOG_URI": f"sqlite:///{tmp_path / 'catalog.db'}", "ICEBERG_WAREHOUSE": f"file://{tmp_path / 'wh'}",
    })
    return env


def _p1(tmp_path: Path, tables: str, password: str = "${MYSQL_PASSWORD}", server_ids: str = "7540-7545") -> Path:
    path = tmp_path / "p1.yaml"
    path.write_text(textwrap.dedent(f"""\
        pipeline: {{name: errors-{tmp_path.name}}}
        source: {{type: mysql, hostname: "${{MYSQL_HOST}}", port: "${{MYSQL_PORT}}", username: "${{MYSQL_USER}}",
                 password: "{password}", tables: '{tables}', server-id: {server_ids}}}
        sink: {{type: kafka, properties.bootstrap.servers: "${{KAFKA_BOOTSTRAP_SERVERS}}",
               sink.delivery-guarantee: exactly-once}}
        """))
    return path


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_tables_pattern_matching_nothing_lists_the_tables_that_exist(tmp_path, mysql_params, kafka_bootstrap,
                                                                       database_factory):
    db = database_factory()
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE customers (id INT PRIMARY KEY)")
        cur.execute("CREATE TABLE products (id INT PRIMARY KEY)")
    conn.close()
    result = _run(_env(tmp_path, mysql_params, kafka_bootstrap), "pipeline", "run",
                  str(_p1(tmp_path, f"{db}.custmers")), "--until-caught-up")
    assert result.returncode == 1
    assert f"Cannot find any table by the option 'tables' = {db}.custmers" in result.stderr, result.stderr
    assert f"Tables on the server: {db}.customers, {db}.products" in result.stderr, result.stderr
    assert f"Did you mean '{db}.customers'?" in result.stderr, result.stderr


def test_a_refused_login_names_where_each_credential_came_from(tmp_path, mysql_params, kafka_bootstrap,
                                                               database_factory):
    db = database_factory()
    wrong = "not-the-password-0"
    result = _run(_env(tmp_path, mysql_params, kafka_bootstrap), "pipeline", "run",
                  str(_p1(tmp_path, f"{db}.\\.*", password=wrong)), "--until-caught-up")
    assert result.returncode == 1
    assert "Access denied" in result.stderr, result.stderr
    assert "hint: authentication failed; where the credentials came from:" in result.stderr
    assert "source.username: ${MYSQL_USER} from the environment (set)" in result.stderr
    assert "source.password: a literal in the YAML (it wins over the environment" in result.stderr
    assert "password: ${MYSQL_PASSWORD}" in result.stderr
    assert wrong not in result.stderr + result.stdout  # secrets never in errors


def test_kafka_unreachable_is_reported_by_the_ten_second_probe(tmp_path, mysql_params, database_factory):
    db = database_factory()
    dead = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = _run(_env(tmp_path, mysql_params, dead), "pipeline", "run", str(_p1(tmp_path, f"{db}.\\.*")),
                  "--until-caught-up")
    elapsed = time.monotonic() - started
    print(f"Kafka unreachable reported after {elapsed:.1f} s (process start included)")
    assert result.returncode == 1
    assert f"cannot reach Kafka at {dead} within 10 s" in result.stderr, result.stderr
    assert "is the broker running" in result.stderr
