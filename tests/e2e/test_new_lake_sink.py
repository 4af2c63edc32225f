"""A new lake sink is one package plus one registry line for the whole house.

A throwaway lake ``tinylake`` is written at test time as a package of its own (``factory.py``
declaring ``FACTORY`` with :func:`~changelake.connectors.lake.factory.lake_sink_factory`, ``sink.py``,
``maintenance.py``) and registered with one ``FACTORY_MODULES`` line. With no other edit, a
pipeline file writing it gets its lake-table assets, their checks, the lag sensor, the connection
keys from the deployment's lake catalog resource (a ``LakeCatalogResource`` implementation of
``tinylake``) and a maintenance job that runs the package's own maintenance. Services are not needed:
the sink is a Paimon filesystem lake under another name, and nothing connects to Kafka or MySQL.
"""

from __future__ import annotations

import sys
import textwrap
from typing import Any, ClassVar

import dagster as dg
import pytest

from changelake.connectors.registry import FACTORY_MODULES

PACKAGE = {
    "__init__.py": '"""tinylake: a throwaway lake sink (a Paimon filesystem lake under another identifier)."""\n',
    "factory.py": """
        from changelake.connectors.lake.factory import lake_sink_factory
        from changelake.connectors.paimon.options import SUPPORTED_KEYS, parse_sink_options

        FACTORY = lake_sink_factory("tinylake", SUPPORTED_KEYS, parse_sink_options, "tinylake.sink:TinyLakeSink",
                                    maintenance="tinylake.maintenance:maintain")
    """,
    "sink.py": """
        from changelake.connectors.paimon.writer import PaimonSink


        class TinyLakeSink(PaimonSink):
            pass
    """,
    "maintenance.py": """
        from changelake.connectors.lake.maintenance import MaintenanceResult

        CALLS = []


        def maintain(options, maintenance, *, tables=None):
            CALLS.append((dict(options.catalog_properties), maintenance, tables))
            return [MaintenanceResult("shop.orders", snapshots_expired=2, files_compacted=3)]
    """,
}

PIPELINE = """
pipeline: {name: kafka-to-tinylake}
source:
  type: kafka
  properties.bootstrap.servers: ${KAFKA_BOOTSTRAP_SERVERS}
  topic: shop.orders;shop.customers
  value.format: debezium-json
sink:
  type: tinylake
  commit.user: kafka-to-tinylake
"""


@pytest.fixture
def tinylake(tmp_path, monkeypatch):
    """The package on ``sys.path``, its one registry line, and a pipelines folder holding only
    a Kafka -> tinylake pipeline."""
    import platform_defs.definitions  # noqa: F401 - its module-level defs built from the real pipelines, first
    root = tmp_path / "src" / "tinylake"
    root.mkdir(parents=True)
    for name, text in PACKAGE.items():
        (root / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setitem(FACTORY_MODULES, "tinylake", "tinylake.factory")
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    (pipelines / "kafka-to-tinylake.yaml").write_text(PIPELINE)
    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(pipelines))
    yield tmp_path
    for module in [m for m in sys.modules if m == "tinylake" or m.startswith("tinylake.")]:
        del sys.modules[module]


def _resource(tmp_path) -> Any:
    from resources.lake import LakeCatalogResource

    class TinyLakeCatalogResource(LakeCatalogResource):
        """The deployment's catalog of the tinylake lake."""

        identifier: ClassVar[str] = "tinylake"
        warehouse: str

        def connection_options(self) -> dict[str, str]:
            return {"catalog.properties.metastore": "filesystem", "catalog.properties.warehouse": self.warehouse}

        def catalog(self) -> Any:
            return None

        def read_table(self, namespace: str, table: str) -> tuple[Any, str]:
            raise NotImplementedError

    return TinyLakeCatalogResource(warehouse=str(tmp_path / "warehouse"))


def test_a_registered_lake_sink_gets_assets_checks_sensors_and_maintenance(tinylake):
    from platform_defs.definitions import build_defs

    defs = build_defs()
    graph = defs.resolve_asset_graph()
    orders = dg.AssetKey(["lake", "kafka_to_tinylake", "shop", "orders"])  # lake/<pipeline>/<db>/<table>
    assert {orders, dg.AssetKey(["lake", "kafka_to_tinylake", "shop", "customers"])} <= set(graph.get_all_asset_keys())
    assert "tinylake" in graph.get(orders).kinds
    assert graph.get(orders).parent_keys == {dg.AssetKey(["kafka", "shop", "orders"])}
    checks = {f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys}
    assert {"lake/kafka_to_tinylake/shop/orders:key_state_matches_mysql",
            "lake/kafka_to_tinylake/shop/orders:no_duplicate_primary_keys",
            "lake/kafka_to_tinylake/shop/orders:lake_is_fresh"} <= checks
    assert {"kafka_to_tinylake_relaunch_if_dead", "kafka_to_tinylake_lake_on_kafka_lag",
            "kafka_to_tinylake_lake_checks_after_commits"} <= {s.name for s in defs.sensors}
    assert {j.name for j in defs.jobs} >= {"kafka_to_tinylake", "kafka_to_tinylake_lake_maintenance"}
    assert "kafka_to_tinylake_lake_maintenance_daily" in {s.name for s in defs.schedules}


def test_the_deployment_lake_resource_fills_the_new_sinks_connection_keys(tinylake):
    from resources import IcebergCatalogResource, KafkaResource
    from resources.binding import bind, connection_options

    lake = _resource(tinylake)
    assert connection_options("tinylake", lake=lake) == {
        "catalog.properties.metastore": "filesystem", "catalog.properties.warehouse": str(tinylake / "warehouse")}
    # an Iceberg catalog fills nothing of another lake
    iceberg = IcebergCatalogResource(uri="sqlite:////tmp/c.db", warehouse="file:///tmp/w")
    assert connection_options("tinylake", lake=iceberg) == {}
    defn = bind(tinylake / "pipelines" / "kafka-to-tinylake.yaml", kafka=KafkaResource(bootstrap_servers="k:1"), lake=lake)
    assert defn.sink["catalog.properties.warehouse"] == str(tinylake / "warehouse")
    assert defn.source["properties.bootstrap.servers"] == "k:1"
    sink = lake.sink({"commit.user": "x"}, pipeline="p")
    assert type(sink).__name__ == "TinyLakeSink"
    assert sink.options.catalog_properties["warehouse"] == str(tinylake / "warehouse")


def test_the_maintenance_job_runs_the_new_sinks_own_maintenance(tinylake):
    from platform_defs.maintenance import build_maintenance_job
    from resources import KafkaResource, MySqlResource

    job = build_maintenance_job(tinylake / "pipelines" / "kafka-to-tinylake.yaml")
    result = job.execute_in_process(
        resources={"mysql": MySqlResource(host="h", user="u", password="p"),
                   "kafka": KafkaResource(bootstrap_servers="k:1"), "lake": _resource(tinylake)},
        run_config={"ops": {"maintain_kafka_to_tinylake_lake": {"config": {"min_input_files": 7}}}},
    )
    assert result.success
    calls = sys.modules["tinylake.maintenance"].CALLS
    assert len(calls) == 1
    properties, options, tables = calls[0]
    assert properties["warehouse"] == str(tinylake / "warehouse") and options.min_input_files == 7 and tables is None
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = output.event_specific_data.metadata
    assert metadata["tables"].value == 1 and metadata["snapshots_expired"].value == 2
    assert metadata["files_compacted"].value == 3
