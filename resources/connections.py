"""Connection resources: MySQL, Kafka and the Iceberg catalog.

Secrets come from the environment through ``dg.EnvVar`` (resolved at run launch and never shown in
the UI or run config). Each resource contributes the ``${VAR}`` values that pipeline YAML files
reference, so one YAML runs against the local services or a user's own clusters.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import dagster as dg
from pydantic import Field

__all__ = ["MySqlResource", "KafkaResource", "IcebergCatalogResource", "pipeline_env"]


class MySqlResource(dg.ConfigurableResource):
    """A MySQL/MariaDB server: the CDC source of Pipeline 1 and the truth of the key-state checks."""

    host: str = Field(description="MySQL host name or address.")
    port: int = Field(default=3306, description="MySQL TCP port.")
    user: str = Field(description="User with SELECT, REPLICATION SLAVE and REPLICATION CLIENT privileges.")
    password: str = Field(description="Password; pass dg.EnvVar('MYSQL_PASSWORD'), never a literal.")

    @contextlib.contextmanager
    def connect(self, database: str | None = None) -> Iterator["object"]:
        """A PyMySQL connection (utf8mb4, session time zone UTC), closed on exit."""
        import pymysql

        conn = pymysql.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, database=database,
            charset="utf8mb4", autocommit=True, init_command="SET time_zone='+00:00'",
        )
        try:
            yield conn
        finally:
            conn.close()

    def env(self) -> dict[str, str]:
        return {"MYSQL_HOST": self.host, "MYSQL_PORT": str(self.port), "MYSQL_USER": self.user, "MYSQL_PASSWORD": self.password}


class KafkaResource(dg.ConfigurableResource):
    """A Kafka cluster (bootstrap servers)."""

    bootstrap_servers: str = Field(description="Comma-separated host:port list of Kafka brokers.")

    def env(self) -> dict[str, str]:
        return {"KAFKA_BOOTSTRAP_SERVERS": self.bootstrap_servers}


class IcebergCatalogResource(dg.ConfigurableResource):
    """The Iceberg catalog of the lake (pyiceberg; SQL catalog on SQLite by default)."""

    uri: str = Field(description="Catalog URI, e.g. sqlite:////abs/path/catalog.db.")
    warehouse: str = Field(description="Warehouse location, e.g. file:///abs/path/warehouse.")

    def env(self) -> dict[str, str]:
        return {"ICEBERG_CATALOG_URI": self.uri, "ICEBERG_WAREHOUSE": self.warehouse}

    def catalog_options(self) -> dict[str, str]:
        """Pipeline-sink style options (``catalog.properties.*``) for the Iceberg connector."""
        return {
            "catalog.properties.type": "sql",
            "catalog.properties.uri": self.uri,
            "catalog.properties.warehouse": self.warehouse,
        }


def pipeline_env(*resources: object) -> dict[str, str]:
    """The ``${VAR}`` values pipeline YAMLs reference, from the given resources over os.environ."""
    import os

    env = dict(os.environ)
    for resource in resources:
        env.update(resource.env())  # type: ignore[attr-defined]
    return env
