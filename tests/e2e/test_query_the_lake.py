"""README's "Query the lake" runs as written, and a downstream asset loads a lake table through the
lake IO manager. The lake is made by the Iceberg sink's own catalog loader (same catalog name)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parents[2]


def _lake(tmp_path: Path) -> dict[str, str]:
    from changelake.connectors.iceberg import parse_sink_options
    from changelake.connectors.iceberg.catalog import open_catalog

    (tmp_path / "wh").mkdir()
    env = {"ICEBERG_CATALOG_URI": f"sqlite:///{tmp_path / 'catalog.db'}", "ICEBERG_WAREHOUSE": f"file://{tmp_path / 'wh'}"}
    catalog = open_catalog(parse_sink_options({
        "catalog.properties.type": "sql", "catalog.properties.uri": env["ICEBERG_CATALOG_URI"],
        "catalog.properties.warehouse": env["ICEBERG_WAREHOUSE"],
    }))
    assert catalog.name == "changelake"  # what the README tells readers to open
    catalog.create_namespace("kafka_test")
    catalog.create_namespace("changelake")  # the checkpoints' namespace, as the pipelines leave it
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "name": ["a", "b", "c"],
                     "age": pa.array([20, 35, None], pa.int32())})
    catalog.create_table("kafka_test.customers", schema=rows.schema).append(rows)
    return env


def test_the_readme_query_runs_as_written(tmp_path):
    env = _lake(tmp_path)
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Query the lake"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "query.py").write_text(code)
    out = subprocess.run([sys.executable, str(tmp_path / "query.py")], env={**os.environ, **env},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "('kafka_test', 'customers')" in out.stdout
    assert "[(3, 27.5)]" in out.stdout


def test_a_downstream_asset_loads_the_lake_table_through_the_io_manager(tmp_path):
    from assets.examples import CUSTOMERS, customers_by_age_band
    from dagster_duckdb import DuckDBResource

    from resources import IcebergCatalogResource
    from resources.lake_io import LakeIOManager

    env = _lake(tmp_path)
    result = dg.materialize(
        [dg.AssetSpec(CUSTOMERS), customers_by_age_band],
        selection=[customers_by_age_band],
        resources={"lake_io_manager": LakeIOManager(lake=IcebergCatalogResource(uri=env["ICEBERG_CATALOG_URI"],
                                                                                warehouse=env["ICEBERG_WAREHOUSE"])),
                   "duckdb": DuckDBResource(database=":memory:")},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    (mat,) = result.asset_materializations_for_node("customers_by_age_band")
    assert mat.metadata["customers"].value == 3
    assert mat.metadata["per_band"].value == {"20s": 1, "30s": 1, "unknown": 1}


def test_the_io_manager_loads_a_paimon_lake_table_through_the_paimon_catalog_resource(tmp_path):
    from assets.examples import CUSTOMERS, customers_by_age_band
    from dagster_duckdb import DuckDBResource

    from changelake.changelog import ChangelogRow, Schema, TableId
    from changelake.changelog.types import parse_data_type
    from resources import PaimonCatalogResource
    from resources.lake_io import LakeIOManager

    lake = PaimonCatalogResource(warehouse=str(tmp_path / "paimon"))
    schema = Schema.of([("id", parse_data_type("INT NOT NULL")), ("age", parse_data_type("INT"))], ["id"])
    with lake.sink({}, pipeline="p") as sink:  # the registry's paimon sink on the resource's warehouse
        sink.write(TableId("kafka_test", "customers"),
                   [ChangelogRow.insert({"id": i, "age": age}) for i, age in ((1, 20), (2, 35), (3, None), (4, 38))],
                   schema, {"kafka_test.customers/0": 4})
    table, snapshot_id = lake.read_table("kafka_test", "customers")
    assert table.num_rows == 4 and snapshot_id != ""
    result = dg.materialize(
        [dg.AssetSpec(CUSTOMERS), customers_by_age_band],
        selection=[customers_by_age_band],
        resources={"lake_io_manager": LakeIOManager(lake=lake), "duckdb": DuckDBResource(database=":memory:")},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    (mat,) = result.asset_materializations_for_node("customers_by_age_band")
    assert mat.metadata["customers"].value == 4
    assert mat.metadata["per_band"].value == {"20s": 1, "30s": 2, "unknown": 1}
