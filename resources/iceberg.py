"""``IcebergCatalogResource``: the lake's Iceberg catalog (pyiceberg SQL catalog) and the
``iceberg`` sink (Flink CDC's Iceberg pipeline connector)."""

from __future__ import annotations

from typing import Any, Mapping

import dagster as dg
from pydantic import Field

__all__ = ["IcebergCatalogResource"]


class IcebergCatalogResource(dg.ConfigurableResource):
    """The Iceberg catalog of the lake (pyiceberg; SQL catalog on SQLite by default). No I/O until a
    method is called."""

    uri: str = Field(description="Catalog URI, e.g. sqlite:////abs/path/catalog.db.")
    warehouse: str = Field(description="Warehouse location, e.g. file:///abs/path/warehouse.")
    catalog_name: str = Field(default="changelake", description="pyiceberg catalog name (the sink's catalog.name).")

    def connection_options(self) -> dict[str, str]:
        """The ``iceberg`` sink's catalog options: ``catalog.properties.type|uri|warehouse``."""
        return {
            "catalog.properties.type": "sql",
            "catalog.properties.uri": self.uri,
            "catalog.properties.warehouse": self.warehouse,
        }

    def catalog(self) -> Any:
        """The ``pyiceberg`` catalog (``SqlCatalog``); creates its tables in the database if missing."""
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(self.catalog_name, uri=self.uri, warehouse=self.warehouse)

    def sink(self, options: Mapping[str, str], pipeline: str) -> Any:
        """An ``iceberg`` sink on this catalog, unopened: primary-key tables upserted per commit,
        the pipeline's offsets or source position stored with each snapshot.

        ``options``: Flink CDC's keys (``namespace``, ``table.properties.*``, ...); the catalog's
        options fill what they leave out.

        Raises:
            OptionValidationError: unknown or invalid options (the supported keys are listed).
        """
        from changelake.connectors.registry import ConnectorContext, find_factory

        raw = {**self.connection_options(), "catalog.name": self.catalog_name, **options}
        return find_factory("iceberg").create_sink(raw, ConnectorContext(pipeline))
