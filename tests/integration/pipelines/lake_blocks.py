"""Pipeline definitions for the pipeline tests (imported by name: pytest puts this folder on
``sys.path`` for the test files and the conftest beside it): Pipeline 2's sink block per lake,
the MariaDB -> Kafka -> lake pair, and a SQL runner, usable by fixtures of any scope."""

from __future__ import annotations

import random

import pymysql

from changelake.pipeline.definition import PipelineDefinition, parse_pipeline

LAKES = ("iceberg", "paimon")  # every test using the ``lake`` fixture runs once per lake


def lake_sink(lake: str, tmp_path) -> dict:
    """Pipeline 2's sink block for ``lake`` on a catalog under ``tmp_path``."""
    if lake == "paimon":
        return {"type": "paimon", "catalog.properties.metastore": "filesystem",
                "catalog.properties.warehouse": str(tmp_path / "paimon"), "commit.user": "it",
                "table.properties.deletion-vectors.enabled": True}
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    return {
        "type": "iceberg", "catalog.properties.type": "sql",
        "catalog.properties.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "catalog.properties.warehouse": f"file://{tmp_path / 'warehouse'}",
    }


def run_sql(mysql_params: dict, db: str, *statements: str, params=None) -> None:
    """Run SQL statements in database ``db`` (utf8mb4, UTC session, autocommit)."""
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True, charset="utf8mb4",
                           init_command="SET time_zone='+00:00'")
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql, params)
    finally:
        conn.close()


def pipeline_1(mysql_params: dict, kafka_bootstrap: str, db: str, p1_extra: dict | None = None,
               name: str | None = None) -> PipelineDefinition:
    """Pipeline 1 ``{name}-p1`` (default name ``it-{db}``): every table of ``db`` -> Kafka,
    exactly-once, ``p1_extra`` added to its sink block."""
    return parse_pipeline(
        {
            "pipeline": {"name": f"{name or f'it-{db}'}-p1"},
            "source": {
                "type": "mysql", "hostname": mysql_params["host"], "port": mysql_params["port"],
                "username": mysql_params["user"], "password": mysql_params["password"],
                "tables": f"{db}.\\.*", "server-id": str(random.randint(7000, 7999)),
            },
            "sink": {
                "type": "kafka", "properties.bootstrap.servers": kafka_bootstrap,
                "sink.delivery-guarantee": "exactly-once",
                **(p1_extra or {}),
            },
        },
        env={},
    )


def pipeline_2(kafka_bootstrap: str, sink: dict, db: str, tables: list[str], primary_keys: str = "id",
               name: str | None = None) -> PipelineDefinition:
    """Pipeline 2 ``{name}-p2`` (default name ``it-{db}``): the topics of ``db``'s ``tables``
    (debezium-json, from the earliest offset) -> the lake of the sink block ``sink``."""
    return parse_pipeline(
        {
            "pipeline": {"name": f"{name or f'it-{db}'}-p2"},
            "source": {
                "type": "kafka", "properties.bootstrap.servers": kafka_bootstrap,
                "topic": ";".join(f"{db}.{t}" for t in tables), "scan.startup.mode": "earliest-offset",
                "value.format": "debezium-json", "debezium-json.distributed-tables": True,
            },
            "transform": [{"source-table": "\\.*.\\.*", "projection": "\\*", "primary-keys": primary_keys}],
            "sink": sink,
        },
        env={},
    )


def pair(mysql_params: dict, kafka_bootstrap: str, sink: dict, db: str, tables: list[str], primary_keys: str = "id",
         p1_extra: dict | None = None, name: str | None = None) -> tuple[PipelineDefinition, PipelineDefinition]:
    """(:func:`pipeline_1`, :func:`pipeline_2`) of ``db``: its tables -> Kafka -> the lake of ``sink``."""
    return (pipeline_1(mysql_params, kafka_bootstrap, db, p1_extra, name),
            pipeline_2(kafka_bootstrap, sink, db, tables, primary_keys, name))
