"""Helpers to build both pipelines' definitions against the test services."""

from __future__ import annotations

import random

import pytest

from changelake.pipeline.definition import parse_pipeline
from lake_blocks import LAKES, lake_sink, pair, run_sql  # beside this file (pytest puts it on sys.path)


@pytest.fixture
def mysql_exec(mysql_params):
    """``mysql_exec(db, *statements)``: run SQL statements (utf8mb4, UTC session)."""

    def run(db: str, *statements: str, params=None) -> None:
        run_sql(mysql_params, db, *statements, params=params)

    return run


@pytest.fixture(params=LAKES)
def lake(request):
    """The lake sink type of Pipeline 2: every test using ``pipeline_pair`` runs once per lake."""
    return request.param


@pytest.fixture
def pipeline_pair(mysql_params, kafka_bootstrap, tmp_path, lake):
    """``pipeline_pair(db, tables, primary_keys="id", p1_extra={}, name=None)`` -> (pipeline 1, pipeline 2);
    Pipeline 2 writes the lake of the ``lake`` fixture (Iceberg, then Paimon); see :func:`lake_blocks.pair`."""

    def make(db: str, tables: list[str], primary_keys: str = "id", p1_extra: dict | None = None, name: str | None = None):
        return pair(mysql_params, kafka_bootstrap, lake_sink(lake, tmp_path), db, tables, primary_keys=primary_keys,
                    p1_extra=p1_extra, name=name)

    return make


@pytest.fixture
def direct_pipeline(mysql_params, tmp_path, lake):
    """``direct_pipeline(db, primary_keys=None, name=None)`` -> a ``mysql`` -> lake pipeline without
    Kafka (as Flink CDC runs it), writing the lake of the ``lake`` fixture."""

    def make(db: str, primary_keys: str | None = None, name: str | None = None):
        block = {
            "pipeline": {"name": name or f"direct-{db}"},
            "source": {
                "type": "mysql", "hostname": mysql_params["host"], "port": mysql_params["port"],
                "username": mysql_params["user"], "password": mysql_params["password"],
                "tables": f"{db}.\\.*", "server-id": str(random.randint(7000, 7999)),
            },
            "sink": lake_sink(lake, tmp_path),
        }
        if primary_keys:
            block["transform"] = [{"source-table": "\\.*.\\.*", "projection": "\\*", "primary-keys": primary_keys}]
        return parse_pipeline(block, env={})

    return make


# -- shared catalogs (several writers of one lake) ------------------------------------------------


@pytest.fixture(scope="session")
def postgres_service(_services_dir):
    """A real PostgreSQL on 127.0.0.1 (:class:`changelake.services.PostgresService`), started once."""
    from changelake.services import PostgresService, free_port

    service = PostgresService(_services_dir / "postgres", port=free_port())
    service.start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="session")
def iceberg_rest_service(_services_dir):
    """Apache Iceberg's REST catalog on 127.0.0.1 (:class:`changelake.services.IcebergRestService`)."""
    from changelake.services import IcebergRestService, free_port

    service = IcebergRestService(_services_dir / "iceberg-rest", port=free_port())
    service.start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(params=["postgresql", "rest"])
def shared_catalog_sink(request, tmp_path):
    """An Iceberg sink block on a catalog that serialises several machines' commits: pyiceberg's
    SQL catalog on PostgreSQL (a database per test), or the Iceberg REST catalog."""
    import uuid

    if request.param == "postgresql":
        service = request.getfixturevalue("postgres_service")
        (tmp_path / "warehouse").mkdir(exist_ok=True)
        return {"type": "iceberg", "catalog.properties.type": "sql",
                "catalog.properties.uri": service.create_database(f"lake_{uuid.uuid4().hex[:10]}"),
                "catalog.properties.warehouse": f"file://{tmp_path / 'warehouse'}"}
    service = request.getfixturevalue("iceberg_rest_service")
    return {"type": "iceberg", "catalog.properties.type": "rest", "catalog.properties.uri": service.uri,
            "catalog.properties.warehouse": service.warehouse}
