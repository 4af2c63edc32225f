"""Dagster resources wrapping changelake's connectors (config and secrets only; no I/O at import)."""

from resources.connections import IcebergCatalogResource, KafkaResource, MySqlResource

__all__ = ["IcebergCatalogResource", "KafkaResource", "MySqlResource"]
