"""Pipeline start refuses a server without row-based binlog; the CLI runs YAML files and fails loudly."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.services import MariaDBService, free_port

pytestmark = pytest.mark.integration


def test_statement_binlog_server_is_refused_naming_the_setting(tmp_path, kafka_bootstrap):
    db = MariaDBService(home=tmp_path / "m", port=free_port(), extra_args=("--binlog-format=STATEMENT",))
    db.start()
    try:
        defn = parse_pipeline(
            {
                "source": {"type": "mysql", "hostname": "127.0.0.1", "port": db.port, "username": db.user,
                           "password": db.password, "tables": "mysql.user", "server-id": "7100"},
                "sink": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap},
            },
            env={},
        )
        with pytest.raises(Exception, match=r"binlog_format") as info:
            run_pipeline(defn, until_caught_up=True)
        assert "ROW" in str(info.value)
        assert db.password not in str(info.value)
    finally:
        db.stop()


def _cli(args: list[str], env: dict[str, str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_pipeline_run_cli_resumes_and_exits_nonzero_on_failure(
    tmp_path, mysql_params, kafka_bootstrap, database_factory
):
    import pymysql

    db = database_factory()
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(8))")
        cur.execute("INSERT INTO t VALUES (1,'a'),(2,'b')")
    conn.close()
    yaml_file = tmp_path / "p1.yaml"
    yaml_file.write_text(textwrap.dedent(f"""\
        pipeline:
          name: cli-{db}
        source:
          type: mysql
          hostname: ${{MYSQL_HOST}}
          port: ${{MYSQL_PORT}}
          username: ${{MYSQL_USER}}
          password: ${{MYSQL_PASSWORD}}
          tables: {db}.\\.*
          server-id: 7200-7210
        sink:
          type: kafka
          properties.bootstrap.servers: ${{KAFKA_BOOTSTRAP_SERVERS}}
        """))
    env = {
        **os.environ,
        "MYSQL_HOST": mysql_params["host"], "MYSQL_PORT": str(mysql_params["port"]),
        "MYSQL_USER": mysql_params["user"], "MYSQL_PASSWORD": mysql_params["password"],
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "ICEBERG_CATALOG_URI": f"sqlite:///{tmp_path / 'c.db'}", "ICEBERG_WAREHOUSE": f"file://{tmp_path}",
        "DAGSTER_HOME": str(tmp_path / "dagster"), "CHANGELAKE_STATE_DIR": str(tmp_path / "state"),
        "CHANGELAKE_LOG_LEVEL": "INFO",
    }
    first = _cli(["pipeline", "run", str(yaml_file), "--until-caught-up"], env, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "events=2" in first.stdout
    second = _cli(["pipeline", "run", str(yaml_file), "--until-caught-up"], env, tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "events=0" in second.stdout
    # The password never reaches the output or Dagster's logs.
    assert mysql_params["password"] not in first.stdout + first.stderr + second.stdout + second.stderr

    bad = dict(env, MYSQL_PASSWORD="wrong-password-123")
    failed = _cli(["pipeline", "run", str(yaml_file), "--until-caught-up"], bad, tmp_path)
    assert failed.returncode != 0
    assert "wrong-password-123" not in failed.stdout + failed.stderr
