"""Shared fixtures: real Kafka and MariaDB for the integration tests.

The servers are started once per test session through :mod:`changelake.services` on free ports
in a temporary folder, so a running demo never collides with a test run. Set
``CHANGELAKE_TEST_KAFKA_BOOTSTRAP`` and ``CHANGELAKE_TEST_MYSQL_HOST/PORT/USER/PASSWORD`` to use
servers of your own instead.
"""

from __future__ import annotations

import gc
import os
import uuid
from typing import Callable, Iterator

import pytest

from changelake.services import KafkaService, MariaDBService


def _uid() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def _services_dir(tmp_path_factory: pytest.TempPathFactory):
    return tmp_path_factory.mktemp("services")


@pytest.fixture(scope="session")
def kafka_bootstrap(_services_dir) -> Iterator[str]:
    """Bootstrap servers ("127.0.0.1:PORT") of a real single-node Kafka 4.x broker."""
    given = os.environ.get("CHANGELAKE_TEST_KAFKA_BOOTSTRAP")
    if given:
        yield given
        return
    from changelake.services import free_port

    kafka = KafkaService(home=_services_dir / "kafka", port=free_port(), controller_port=free_port())
    kafka.start()
    try:
        yield kafka.bootstrap_servers
    finally:
        # Destroy clients that tests left unreferenced while the broker still answers, so they do
        # not log connection failures after the session.
        gc.collect()
        kafka.stop()


@pytest.fixture(scope="session")
def mysql_params(_services_dir) -> Iterator[dict]:
    """dict(host, port, user, password) of a real MariaDB with row-based binlog (FULL row image
    and metadata, server_id 1); the user has all privileges including replication."""
    if os.environ.get("CHANGELAKE_TEST_MYSQL_HOST"):
        yield {
            "host": os.environ["CHANGELAKE_TEST_MYSQL_HOST"],
            "port": int(os.environ.get("CHANGELAKE_TEST_MYSQL_PORT", "3306")),
            "user": os.environ.get("CHANGELAKE_TEST_MYSQL_USER", "root"),
            "password": os.environ.get("CHANGELAKE_TEST_MYSQL_PASSWORD", ""),
        }
        return
    from changelake.services import free_port

    db = MariaDBService(home=_services_dir / "mariadb", port=free_port())
    db.start()
    try:
        yield {"host": "127.0.0.1", "port": db.port, "user": db.user, "password": db.password}
    finally:
        db.stop()


@pytest.fixture
def topic_factory(kafka_bootstrap) -> Callable[..., str]:
    """``topic_factory(partitions=1, config=None) -> name``: create a uuid-named topic."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})

    def make(partitions: int = 1, config: dict | None = None, prefix: str = "t") -> str:
        name = f"{prefix}-{_uid()}"
        fut = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})])
        fut[name].result(timeout=30)
        return name

    return make


@pytest.fixture
def database_factory(mysql_params) -> Callable[[], str]:
    """``database_factory() -> name``: create a uuid-named empty database (dropped afterwards)."""
    import pymysql

    created: list[str] = []

    def connect():
        return pymysql.connect(
            host=mysql_params["host"], port=mysql_params["port"], user=mysql_params["user"],
            password=mysql_params["password"], autocommit=True, charset="utf8mb4",
        )

    def make() -> str:
        name = f"db_{_uid()}"
        conn = connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE `{name}`")
        finally:
            conn.close()
        created.append(name)
        return name

    yield make
    conn = connect()
    try:
        with conn.cursor() as cur:
            for name in created:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        conn.close()
