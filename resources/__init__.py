"""Dagster resources wrapping changelake's connectors (config and secrets only; no I/O at import)."""

from resources.iceberg import IcebergCatalogResource
from resources.kafka import KafkaResource
from resources.lake import LakeCatalogResource
from resources.mysql import MySqlResource
from resources.paimon import PaimonCatalogResource
from resources.upsert_kafka import UpsertKafkaResource

__all__ = [
    "IcebergCatalogResource", "KafkaResource", "LakeCatalogResource", "MySqlResource", "PaimonCatalogResource",
    "UpsertKafkaResource",
]
