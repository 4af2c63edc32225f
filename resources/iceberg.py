"""``IcebergCatalogResource``: the lake's Iceberg catalog (pyiceberg SQL catalog) and the
``iceberg`` sink (Flink CDC's Iceberg pipeline connector); a :class:`~resources.lake.LakeCatalogResource`."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from resources.lake import LakeCatalogResource

__all__ = ["IcebergCatalogResource"]


class IcebergCatalogResource(LakeCatalogResource):
    """The Iceberg catalog of the lake (pyiceberg; SQL catalog on SQLite by default). No I/O until a
    method is called."""

    identifier: ClassVar[str] = "iceberg"

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

    def sink_options(self) -> dict[str, str]:
        """The catalog options plus ``catalog.name``."""
        return {**self.connection_options(), "catalog.name": self.catalog_name}

    def catalog(self) -> Any:
        """The ``pyiceberg`` catalog (``SqlCatalog``); creates its tables in the database if missing."""
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(self.catalog_name, uri=self.uri, warehouse=self.warehouse)

    def read_table(self, namespace: str, table: str) -> tuple[Any, str]:
        """A full pyiceberg scan of ``namespace.table`` and its current snapshot id."""
        loaded = self.catalog().load_table((namespace, table))
        snapshot = loaded.current_snapshot()
        return loaded.scan().to_arrow(), str(snapshot.snapshot_id if snapshot else "")
