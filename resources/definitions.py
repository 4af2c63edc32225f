"""The resources of the code location, configured from the environment (see ``changelake services env``)."""

from __future__ import annotations

import os

import dagster as dg
from dagster_duckdb import DuckDBResource

from resources.iceberg import IcebergCatalogResource
from resources.kafka import KafkaResource
from resources.lake import LakeCatalogResource
from resources.lake_io import LakeIOManager
from resources.mysql import MySqlResource
from resources.paimon import PaimonCatalogResource
from resources.pageviews import PageviewsTopics
from resources.upsert_kafka import UpsertKafkaResource


__all__ = ["LAKE_CATALOGS", "lake_catalog", "defs"]

#: The lake-catalog implementations a deployment picks from with ``$LAKE`` (by the lake sink type
#: each serves); their configuration comes from the environment.
LAKE_CATALOGS: dict[str, type[LakeCatalogResource]] = {
    cls.identifier: cls for cls in (IcebergCatalogResource, PaimonCatalogResource)
}


def lake_catalog() -> LakeCatalogResource:
    """The deployment's lake catalog: ``$LAKE`` names the lake (``iceberg`` when unset, as the
    demo's ``--lake``). Iceberg: ``$ICEBERG_CATALOG_URI`` / ``$ICEBERG_WAREHOUSE`` (read when a run
    uses them); Paimon: ``$PAIMON_WAREHOUSE``, else the sink's default warehouse.

    Raises:
        ValueError: ``$LAKE`` names no implementation (the message lists them).
    """
    lake = os.environ.get("LAKE") or IcebergCatalogResource.identifier
    if lake not in LAKE_CATALOGS:
        raise ValueError(f"LAKE={lake!r}: no lake catalog resource for it; choose one of {', '.join(sorted(LAKE_CATALOGS))}")
    if LAKE_CATALOGS[lake] is PaimonCatalogResource:
        return PaimonCatalogResource(warehouse=os.environ.get("PAIMON_WAREHOUSE") or None)
    return IcebergCatalogResource(uri=dg.EnvVar("ICEBERG_CATALOG_URI"), warehouse=dg.EnvVar("ICEBERG_WAREHOUSE"))


def defs() -> dg.Definitions:
    # One lake catalog for the code location's jobs, assets, checks, sensors and the IO manager.
    lake = lake_catalog()
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
