"""An example of building on the lake: a downstream asset that depends on the lake table
``kafka_test.customers`` of the deployment's lake (``lake/kafka_to_iceberg/kafka_test/customers``
with the shipped pipelines) and loads it through the lake IO manager (see ``resources.lake_io``)."""


from typing import Any, Sequence

import dagster as dg
from dagster_duckdb import DuckDBResource

__all__ = ["ANALYTICS_GROUP", "CUSTOMERS_TABLE", "CUSTOMERS", "customers_by_age_band", "customers_key",
           "build_customers_by_age_band", "assets"]

ANALYTICS_GROUP = "analytics"
#: the sink table the example reads, in whichever Iceberg pipeline writes it
CUSTOMERS_TABLE = "kafka_test.customers"


def build_customers_by_age_band(customers_key: dg.AssetKey) -> dg.AssetsDefinition:
    """The asset ``customers_by_age_band`` downstream of lake asset ``customers_key``."""

    @dg.asset(
        group_name=ANALYTICS_GROUP,
        kinds={"duckdb"},
        ins={"customers": dg.AssetIn(key=customers_key, input_manager_key="lake_io_manager")},
    )
    def customers_by_age_band(
        context: dg.AssetExecutionContext, customers: Any, duckdb: DuckDBResource
    ) -> dg.MaterializeResult:
        """Number of customers per age band (decade), computed in DuckDB (the ``duckdb`` resource,
        dagster-duckdb's DuckDBResource) from the lake table kafka_test.customers."""
        with duckdb.get_connection() as con:
            con.register("customers", customers)
            rows = con.execute(
                "SELECT coalesce(CAST(age // 10 * 10 AS VARCHAR) || 's', 'unknown') AS band, count(*) AS n "
                "FROM customers GROUP BY 1 ORDER BY 1"
            ).fetchall()
        return dg.MaterializeResult(metadata={
            "bands": len(rows),
            "customers": sum(n for _, n in rows),
            "per_band": dg.MetadataValue.json({band: n for band, n in rows}),
        })

    return customers_by_age_band


#: the lake asset of kafka_test.customers written by the shipped pipelines/kafka-to-iceberg.yaml
CUSTOMERS = dg.AssetKey(["lake", "kafka_to_iceberg", "kafka_test", "customers"])
customers_by_age_band = build_customers_by_age_band(CUSTOMERS)


def customers_key(existing: Sequence[Any]) -> dg.AssetKey | None:
    """The key of the lake asset of ``kafka_test.customers`` among ``existing`` in the deployment's
    lake (``$LAKE``, else iceberg: the lake the ``lake`` resource and the lake IO manager read),
    or None."""
    import os

    from assets.metadata import LAKE_KIND, LAKE_TABLE

    kind = os.environ.get("LAKE") or "iceberg"
    for a in existing:
        for spec in getattr(a, "specs", ()) or ():
            md = spec.metadata or {}
            if md.get(LAKE_TABLE) == CUSTOMERS_TABLE and md.get(LAKE_KIND) == kind:
                return spec.key
    return None


def assets(existing: Sequence[Any]) -> list[Any]:
    """The example assets whose upstream lake table exists in ``existing`` (none otherwise)."""
    key = customers_key(existing)
    if key is None:
        return []
    return [customers_by_age_band if key == CUSTOMERS else build_customers_by_age_band(key)]
