"""``changelake check`` against real services: each pipeline's checks land on its own assets
(the README's Paimon CI command, run before the Paimon demo, leaves the Iceberg assets alone), a
failed check prints sample keys and the next step, a run whose checks failed is not a Success,
and freshness compares with MySQL's binlog position too."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import dagster as dg
import pymysql
import pytest

from dagster_dev import REPO_ROOT, service_env, write_pipelines

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
    write_pipelines(pipes, db, "7520-7530")
    paimon = tmp_path / "examples" / "paimon.yaml"  # as pipelines/examples/kafka-to-paimon.yaml: not loaded
    paimon.parent.mkdir()
    paimon.write_text(textwrap.dedent(f"""\
        pipeline: {{name: p3-{db}}}
        source: {{type: kafka, properties.bootstrap.servers: "${{KAFKA_BOOTSTRAP_SERVERS}}", topic: '{db}.a;{db}.b',
                 value.format: debezium-json}}
        transform:
          - {{source-table: '{db}.\\.*', primary-keys: id}}
        sink: {{type: paimon, catalog.properties.metastore: filesystem, commit.user: p3}}
        """))
    env = service_env(tmp_path, mysql_params, kafka_bootstrap, pipes)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cli", *args], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=300)

    return db, pipes, paimon, run, tmp_path / "state" / "dagster"


def _executions(instance: dg.DagsterInstance, path: list[str], check: str) -> list:
    return list(instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey(path), check), limit=100))


def test_paimon_check_before_the_paimon_demo_leaves_the_iceberg_assets_green(cli):
    db, pipes, paimon, run, home = cli
    for name in ("one", "two"):
        result = run("pipeline", "run", str(pipes / f"{name}.yaml"), "--until-caught-up")
        assert result.returncode == 0, result.stderr
    # README order: the Paimon CI command before the Paimon pipeline ever ran.
    red = run("check", "--pipeline", str(paimon))
    assert red.returncode == 1
    assert "PaimonSinkError" in red.stdout and "): Run the pipelines until caught up" in red.stdout, red.stdout
    green = run("check")
    assert green.returncode == 0, green.stdout + green.stderr
    assert "lake checks passed: 6, failed: 0" in green.stdout, green.stdout

    with dg.DagsterInstance.from_config(str(home)) as instance:
        for table in ("a", "b"):
            iceberg = _executions(instance, ["lake", f"p2_{db}", db, table], "key_state_matches_mysql")
            paimon_runs = _executions(instance, ["lake", f"p3_{db}", db, table], "key_state_matches_mysql")
            # Each lake's asset holds only its own results: Iceberg's all passed, Paimon's failed.
            assert iceberg and all(e.status.value == "SUCCEEDED" for e in iceberg), [e.status for e in iceberg]
            assert paimon_runs and all(e.status.value == "FAILED" for e in paimon_runs), [e.status for e in paimon_runs]
        # The check run whose ERROR checks failed is not listed as a plain Success.
        runs = {r.run_id: r.status for r in instance.get_runs(dg.RunsFilter(job_name="changelake_check"))}
        assert sorted(s.value for s in runs.values()) == ["FAILURE", "SUCCESS"], runs


def test_a_failed_check_shows_sample_keys_mysql_vs_lake_and_the_next_step(cli, mysql_params):
    db, pipes, _, run, home = cli
    for name in ("one", "two"):
        assert run("pipeline", "run", str(pipes / f"{name}.yaml"), "--until-caught-up").returncode == 0
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:  # not captured: Pipeline 1 is not running
        cur.execute("UPDATE a SET name = 'changed' WHERE id = 1")
        cur.execute("INSERT INTO b VALUES (2, 20)")
    conn.close()
    bad = run("check", "--pipeline", str(pipes / "two.yaml"))
    assert bad.returncode == 1
    out = bad.stdout
    assert "| key | difference | column | MySQL | lake |" in out, out
    assert "| id=1 | value differs | name | changed | x |" in out, out
    assert "| id=2 | missing in lake |  | (row) | (absent) |" in out, out
    assert re.search(r"next step \(\d+ failed check\(s\), e.g. [^)]*\): Run the pipelines until caught up", out), out
    # Freshness compares with MySQL's binlog too: drained topics, but Pipeline 1 is behind the server.
    fresh = [line for line in out.splitlines() if f"{db}.a " in line and "lake_is_fresh" in line]
    assert fresh and "behind_mysql=True" in fresh[0], out
    assert "error:" not in bad.stderr, bad.stderr  # the failed checks are printed once, in the table
    with dg.DagsterInstance.from_config(str(home)) as instance:
        (latest,) = _executions(instance, ["lake", f"p2_{db}", db, "a"], "key_state_matches_mysql")[:1]
        evaluation = latest.event.dagster_event.event_specific_data
        samples = evaluation.metadata["samples"]
        assert isinstance(samples, dg.MarkdownMetadataValue) and "| id=1 | value differs |" in samples.value
    # Caught up again: green, and no longer behind MySQL.
    for name in ("one", "two"):
        assert run("pipeline", "run", str(pipes / f"{name}.yaml"), "--until-caught-up").returncode == 0
    ok = run("check", "--pipeline", str(pipes / "two.yaml"))
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_a_dropped_mysql_table_checks_red_while_its_lake_table_holds_rows_and_green_once_emptied(cli, mysql_params):
    db, pipes, _, run, home = cli
    # Pipeline 1 without the schema envelope: with debezium-json.include-schema.enabled a captured
    # DROP TABLE stops it ("include-schema.enabled needs the table schema"), reported separately
    one = pipes / "one.yaml"
    one.write_text(one.read_text().replace(", debezium-json.include-schema.enabled: true", ""))
    assert "include-schema" not in one.read_text()
    for name in ("one", "two"):
        assert run("pipeline", "run", str(pipes / f"{name}.yaml"), "--until-caught-up").returncode == 0
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("DROP TABLE b")
    conn.close()
    # Pipeline 1 captured the DROP, Pipeline 2 did not run: lake table b still holds its row
    assert run("pipeline", "run", str(pipes / "one.yaml"), "--until-caught-up").returncode == 0
    bad = run("check", "--pipeline", str(pipes / "two.yaml"))
    out = bad.stdout
    assert bad.returncode == 1, out + bad.stderr
    line = [ln for ln in out.splitlines() if f"{db}.b " in ln and "key_state_matches_mysql" in ln]
    assert line and "FAIL" in line[0] and f"MySQL table {db}.b no longer exists; lake=1 extra_in_lake=1" in line[0], out
    assert "| id=1 | extra in lake |  | (absent) | (row) |" in out, out
    assert "next step" in out and "The MySQL table no longer exists" in out, out
    assert "not found in information_schema" not in out, out
    with dg.DagsterInstance.from_config(str(home)) as instance:  # the Dagster asset check says the same
        (latest,) = _executions(instance, ["lake", f"p2_{db}", db, "b"], "key_state_matches_mysql")[:1]
        md = latest.event.dagster_event.event_specific_data.metadata
        assert md["mysql_table_exists"].value is False and md["extra_in_lake"].value == 1, md
        assert f"MySQL table {db}.b no longer exists" in md["reason"].value, md
    # Pipeline 2 applies the DROP: the empty lake table b is green, a is untouched
    assert run("pipeline", "run", str(pipes / "two.yaml"), "--until-caught-up").returncode == 0
    ok = run("check", "--pipeline", str(pipes / "two.yaml"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    line = [ln for ln in ok.stdout.splitlines() if f"{db}.b " in ln and "key_state_matches_mysql" in ln]
    assert line and "PASS" in line[0] and "no longer exists; lake=0 extra_in_lake=0" in line[0], ok.stdout
