"""Dagster resources wrapping changelake's connectors (config and secrets only; no I/O at import)."""

from resources.connections import IcebergCatalogResource, KafkaResource, MySqlResource
from resources.upsert_kafka import UpsertKafkaResource

__all__ = ["IcebergCatalogResource", "KafkaResource", "MySqlResource", "UpsertKafkaResource"]
