"""``PaimonCatalogResource``: the lake's Paimon catalog (pypaimon filesystem or REST metastore)
and the ``paimon`` sink (Flink CDC's Paimon pipeline connector); a :class:`~resources.lake.LakeCatalogResource`."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from resources.lake import LakeCatalogResource

__all__ = ["PaimonCatalogResource"]


class PaimonCatalogResource(LakeCatalogResource):
    """The Paimon catalog of the lake. No I/O until a method is called.

    ``warehouse`` None leaves the sink's default (``<state dir>/lake/paimon``, see
    :func:`changelake.connectors.paimon.options.default_warehouse`).
    """

    identifier: ClassVar[str] = "paimon"

    warehouse: str | None = Field(default=None, description="Warehouse path or URI (None: the sink's default).")
    metastore: str = Field(default="filesystem", description="Paimon metastore: filesystem or rest.")

    def connection_options(self) -> dict[str, str]:
        """The ``paimon`` sink's catalog options: ``catalog.properties.metastore`` and, when set,
        ``catalog.properties.warehouse``."""
        options = {"catalog.properties.metastore": self.metastore}
        if self.warehouse:
            options["catalog.properties.warehouse"] = self.warehouse
        return options

    def _options(self) -> Any:
        from changelake.connectors.paimon.options import parse_sink_options

        return parse_sink_options(self.connection_options())

    def catalog(self) -> Any:
        """The pypaimon catalog (a filesystem warehouse's folder is created)."""
        from changelake.connectors.paimon.catalog import open_catalog

        return open_catalog(self._options())

    def read_table(self, namespace: str, table: str) -> tuple[Any, str]:
        """A merged read of Paimon table ``namespace.table`` and its latest snapshot id."""
        from changelake.changelog import TableId
        from changelake.connectors.paimon.catalog import load_table
        from changelake.connectors.paimon.reader import read_table

        options = self._options()
        loaded = load_table(self.catalog(), TableId(namespace, table))
        latest = loaded.snapshot_manager().get_latest_snapshot() if loaded is not None else None
        return read_table(options, TableId(namespace, table)), str(latest.id if latest is not None else "")
