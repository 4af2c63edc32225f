"""The resources of the code location, configured from the environment (see ``changelake services env``)."""

from __future__ import annotations

import dagster as dg
from dagster_duckdb import DuckDBResource

from resources.iceberg import IcebergCatalogResource
from resources.kafka import KafkaResource
from resources.mysql import MySqlResource
from resources.lake_io import LakeIOManager
from resources.pageviews import PageviewsTopics
from resources.upsert_kafka import UpsertKafkaResource


def defs() -> dg.Definitions:
    # The deployment's lake catalog (the platform's lake pipelines write Iceberg); a Paimon
    # deployment registers PaimonCatalogResource(warehouse=...) under the same key.
    lake = IcebergCatalogResource(uri=dg.EnvVar("ICEBERG_CATALOG_URI"), warehouse=dg.EnvVar("ICEBERG_WAREHOUSE"))
    return dg.Definitions(
        resources={
            "mysql": MySqlResource(
                host=dg.EnvVar("MYSQL_HOST"),
                port=dg.EnvVar.int("MYSQL_PORT"),
                user=dg.EnvVar("MYSQL_USER"),
                password=dg.EnvVar("MYSQL_PASSWORD"),
            ),
            "kafka": KafkaResource(bootstrap_servers=dg.EnvVar("KAFKA_BOOTSTRAP_SERVERS")),
            "lake": lake,
            "lake_io_manager": LakeIOManager(lake=lake),
            "pageviews_topics": PageviewsTopics(),
            # DuckDB for assets computing on lake tables (in memory: the lake is the storage)
            "duckdb": DuckDBResource(database=":memory:"),
            "upsert_kafka": UpsertKafkaResource(bootstrap_servers=dg.EnvVar("KAFKA_BOOTSTRAP_SERVERS")),
        }
    )
