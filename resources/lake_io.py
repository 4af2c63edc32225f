"""An IO manager that loads lake tables (``lake/<db>/<table>``) as Arrow tables for downstream assets.

``dagster-iceberg``'s PyIceberg IO manager would be the natural choice, but its releases (0.3.x)
require ``pyiceberg<0.12`` while changelake pins ``pyiceberg==0.12.0`` (commit retries and
conflict validation exist only there), so this small IO manager reads the same catalog with
pyiceberg directly. Lake tables are written by the pipelines, never through this IO manager:
``handle_output`` stores nothing for them.

    @dg.asset(ins={"customers": dg.AssetIn(key=["lake", "kafka_test", "customers"],
                                           input_manager_key="lake_io_manager")})
    def customers_by_age_band(customers: pa.Table) -> ...
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field

__all__ = ["LakeIOManager"]


class LakeIOManager(dg.ConfigurableIOManager):
    """Reads lake tables (a full pyiceberg scan -> ``pyarrow.Table``) from the changelake catalog."""

    uri: str = Field(description="Catalog URI, e.g. sqlite:////abs/path/catalog.db (as the Iceberg sink's).")
    warehouse: str = Field(description="Warehouse location, e.g. file:///abs/path/warehouse.")
    catalog_name: str = Field(default="changelake", description="pyiceberg catalog name (the sink's catalog.name).")

    def _catalog(self) -> Any:
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(self.catalog_name, uri=self.uri, warehouse=self.warehouse)

    def load_input(self, context: dg.InputContext) -> Any:
        """The lake table of the upstream asset key ``lake/<namespace>/<table>`` as Arrow."""
        path = context.asset_key.path
        if len(path) != 3 or path[0] != "lake":
            raise dg.Failure(f"LakeIOManager loads lake/<namespace>/<table> assets, not {context.asset_key.to_user_string()}")
        table = self._catalog().load_table((path[1], path[2]))
        arrow = table.scan().to_arrow()
        context.add_input_metadata({"rows": arrow.num_rows, "snapshot_id": str(table.current_snapshot().snapshot_id
                                                                                 if table.current_snapshot() else "")})
        return arrow

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Lake tables are written by the pipelines; nothing is stored here."""
        if obj is not None:
            raise dg.Failure("LakeIOManager only loads lake tables; assets that use it as output manager return None")
