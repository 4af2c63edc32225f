"""An example of building on the lake: a downstream asset that depends on ``lake/kafka_test/customers``
and loads it through the lake IO manager (see ``resources.lake_io``)."""


from typing import Any, Sequence

import dagster as dg
from dagster_duckdb import DuckDBResource

__all__ = ["ANALYTICS_GROUP", "CUSTOMERS", "customers_by_age_band", "assets"]

ANALYTICS_GROUP = "analytics"
CUSTOMERS = dg.AssetKey(["lake", "kafka_test", "customers"])


@dg.asset(
    group_name=ANALYTICS_GROUP,
    kinds={"duckdb"},
    ins={"customers": dg.AssetIn(key=CUSTOMERS, input_manager_key="lake_io_manager")},
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


def assets(existing: Sequence[Any]) -> list[Any]:
    """The example assets whose upstream lake tables exist in ``existing`` (none otherwise)."""
    keys = set()
    for a in existing:
        keys |= set(getattr(a, "keys", ()) or ([a.key] if hasattr(a, "key") else []))
    return [customers_by_age_band] if CUSTOMERS in keys else []
