"""The local services module drives real servers: idempotent up, clear errors, env overrides."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pymysql
import pytest

from changelake.services import KafkaService, MariaDBService, ServiceError, Services, free_port

pytestmark = pytest.mark.integration


def test_mariadb_up_is_idempotent_and_binlog_is_row_based(tmp_path):
    db = MariaDBService(home=tmp_path / "m", port=free_port())
    db.start()
    try:
        pid = (tmp_path / "m" / "mariadb.pid").read_text()
        db.start()  # healthy -> reused, not restarted
        assert (tmp_path / "m" / "mariadb.pid").read_text() == pid
        conn = pymysql.connect(host="127.0.0.1", port=db.port, user=db.user, password=db.password)
        with conn.cursor() as cur:
            cur.execute(
                "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@server_id"
            )
            assert cur.fetchone() == (1, "ROW", "FULL", "FULL", 1)
        conn.close()
    finally:
        db.stop()
    assert not db.is_healthy()


def _signal_masks(pid: int) -> dict[str, int]:
    """SigIgn / SigCgt of ``pid`` (bit ``n - 1`` is signal ``n``), from /proc/<pid>/status."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: int(v, 16) for k, v in (line.split(":\t") for line in lines if line.startswith(("SigIgn:", "SigCgt:")))}


def test_kafka_stops_by_sigterm_when_the_launching_process_ignores_sigterm(tmp_path):
    """Dagster gives SIGTERM the handler of SIGINT (SIG_IGN in a shell's background job), and an
    ignored signal stays ignored across exec: a broker started from such a process installed no
    SIGTERM handler, and each ``stop`` waited its 30 s, then sent SIGKILL. The broker takes
    SIGTERM's default disposition, so its own handler (shutdown hooks) runs and it stops at once."""
    kafka = KafkaService(home=tmp_path / "k", port=free_port(), controller_port=free_port())
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        kafka.start()
    finally:
        signal.signal(signal.SIGTERM, previous)
    term = 1 << (signal.SIGTERM - 1)
    try:
        masks = _signal_masks(int(kafka.pid_file.read_text()))
        assert not masks["SigIgn"] & term, "the broker ignores SIGTERM"
        assert masks["SigCgt"] & term, "the broker has no SIGTERM handler"
    finally:
        started = time.monotonic()
        kafka.stop()
        stop_s = time.monotonic() - started
    assert not kafka.is_healthy()
    assert stop_s < 30.0, f"stop took {stop_s:.1f} s: the broker outlived SIGTERM until SIGKILL"


def test_port_taken_is_one_clear_error_and_nothing_is_left_running(tmp_path):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        services = Services.ephemeral(tmp_path)
        services.mariadb.port = port
        with pytest.raises(ServiceError, match=rf"port 127.0.0.1:{port} is already taken.*CHANGELAKE_MYSQL_PORT"):
            services.up()
    assert not services.kafka.is_healthy() and not services.mariadb.is_healthy()


def test_env_prefers_the_users_own_clusters(tmp_path, monkeypatch):
    services = Services.ephemeral(tmp_path)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "broker.example:9092")
    env = services.env()
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "broker.example:9092"
    assert env["MYSQL_PORT"] == str(services.mariadb.port)
    assert env["ICEBERG_CATALOG_URI"].startswith("sqlite:///")


def test_services_up_starts_the_shared_catalogs_and_env_names_them(tmp_path):
    """``changelake services up --catalog postgres --catalog rest`` (the README's scaling section,
    as written): both catalogs run, ``services env`` prints their URIs, pyiceberg commits through
    each, ``status`` lists them and ``down`` stops them."""
    import os
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    from pyiceberg.catalog import load_catalog

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "CHANGELAKE_STATE_DIR": str(tmp_path / "state"),
           "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for var in ("KAFKA_BOOTSTRAP_SERVERS", "MYSQL_HOST", "MYSQL_PORT", "MYSQL_USER", "MYSQL_PASSWORD",
                "ICEBERG_CATALOG_URI", "ICEBERG_WAREHOUSE"):
        env.pop(var, None)  # the printed values are the local services', not the caller's
    for var in ("CHANGELAKE_KAFKA_PORT", "CHANGELAKE_KAFKA_CONTROLLER_PORT", "CHANGELAKE_MYSQL_PORT",
                "CHANGELAKE_POSTGRES_PORT", "CHANGELAKE_ICEBERG_REST_PORT"):
        env[var] = str(free_port())

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cli", "services", *args], cwd=root, env=env,
                              capture_output=True, text=True, timeout=300)

    try:
        up = cli("up", "--catalog", "postgres", "--catalog", "rest")
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"postgres: up 127.0.0.1:{env['CHANGELAKE_POSTGRES_PORT']}" in up.stdout, up.stdout
        assert f"rest: up http://127.0.0.1:{env['CHANGELAKE_ICEBERG_REST_PORT']}" in up.stdout, up.stdout
        exports = {}
        for line in cli("env").stdout.splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            exports[key] = shlex.split(value)[0]
        assert exports["CHANGELAKE_POSTGRES_CATALOG_URI"] == (
            f"postgresql+psycopg2://postgres@127.0.0.1:{env['CHANGELAKE_POSTGRES_PORT']}/lake")
        assert exports["CHANGELAKE_ICEBERG_REST_URI"] == f"http://127.0.0.1:{env['CHANGELAKE_ICEBERG_REST_PORT']}"
        (tmp_path / "wh").mkdir()
        sql = load_catalog("pg", type="sql", uri=exports["CHANGELAKE_POSTGRES_CATALOG_URI"],
                           warehouse=f"file://{tmp_path / 'wh'}")
        rest = load_catalog("rest", type="rest", uri=exports["CHANGELAKE_ICEBERG_REST_URI"],
                            warehouse=exports["CHANGELAKE_ICEBERG_REST_WAREHOUSE"])
        for catalog in (sql, rest):
            catalog.create_namespace("shop")
            assert ("shop",) in catalog.list_namespaces()
        again = cli("up")  # a later plain up keeps the catalogs
        assert again.returncode == 0 and "postgres: up" in again.stdout and "rest: up" in again.stdout, again.stdout
        bad = cli("up", "--catalog", "hive")
        assert bad.returncode != 0 and "invalid choice: 'hive'" in bad.stderr
    finally:
        down = cli("down")
    assert down.returncode == 0, down.stderr
    status = cli("status")
    assert status.returncode == 1
    assert "postgres: down" in status.stdout and "rest: down" in status.stdout, status.stdout
