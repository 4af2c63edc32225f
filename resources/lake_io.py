"""An IO manager that loads lake tables (``lake/<pipeline>/<db>/<table>``) as Arrow tables for downstream
assets, from either lake: it reads through the deployment's :class:`~resources.lake.LakeCatalogResource`
(Iceberg: a pyiceberg scan; Paimon: a pypaimon read merged by row kind).

``dagster-iceberg``'s PyIceberg IO manager would be the natural choice for Iceberg, but its
releases (0.3.x) require ``pyiceberg<0.12`` while changelake pins ``pyiceberg==0.12.0`` (commit
retries and conflict validation exist only there), and it reads no Paimon. Lake tables are written
by the pipelines, never through this IO manager: ``handle_output`` stores nothing for them.

    @dg.asset(ins={"customers": dg.AssetIn(key=["lake", "kafka_to_iceberg", "kafka_test", "customers"],
                                           input_manager_key="lake_io_manager")})
    def customers_by_age_band(customers: pa.Table) -> ...
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field

from resources.lake import LakeCatalogResource

__all__ = ["LakeIOManager"]


class LakeIOManager(dg.ConfigurableIOManager):
    """Reads lake tables (a full scan -> ``pyarrow.Table``) from the lake catalog ``lake``."""

    lake: LakeCatalogResource = Field(description="The lake's catalog (Iceberg or Paimon).")

    def load_input(self, context: dg.InputContext) -> Any:
        """The lake table of the upstream asset key ``lake/<pipeline>/<namespace>/<table>`` as Arrow."""
        path = context.asset_key.path
        if len(path) != 4 or path[0] != "lake":
            raise dg.Failure(f"LakeIOManager loads lake/<pipeline>/<namespace>/<table> assets, "
                             f"not {context.asset_key.to_user_string()}")
        arrow, snapshot_id = self.lake.read_table(path[2], path[3])
        context.add_input_metadata({"rows": arrow.num_rows, "snapshot_id": snapshot_id})
        return arrow

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Lake tables are written by the pipelines; nothing is stored here."""
        if obj is not None:
            raise dg.Failure("LakeIOManager only loads lake tables; assets that use it as output manager return None")
