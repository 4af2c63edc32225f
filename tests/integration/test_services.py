"""The local services module drives real servers: idempotent up, clear errors, env overrides."""

from __future__ import annotations

import socket

import pymysql
import pytest

from changelake.services import MariaDBService, ServiceError, Services, free_port

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
