"""The code location loads with the services down and exposes every job, asset and check."""

from __future__ import annotations

import dagster as dg


def test_definitions_load_and_resolve_by_name():
    from platform_defs.definitions import defs

    assert defs.resolve_job_def("mysql_to_kafka") is not None
    assert defs.resolve_job_def("kafka_to_iceberg") is not None
    assert {j.name for j in defs.jobs} == {"mysql_to_kafka", "kafka_to_iceberg", "lake_freshness_checks",
                                           "kafka_to_iceberg_lake_maintenance",  # rewrites files, adds no rows
                                           "pageviews_per_region_job"}  # no second job writing the lake
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"lake/kafka_to_iceberg/kafka_test/customers", "lake/kafka_to_iceberg/kafka_test/products",
            "lake/kafka_to_iceberg/sbtest/sbtest1"} <= keys
    # Lineage: MySQL table -> Kafka topic -> lake table -> a downstream asset through the lake IO manager.
    customers = dg.AssetKey(["lake", "kafka_to_iceberg", "kafka_test", "customers"])
    assert graph.get(customers).parent_keys == {dg.AssetKey(["kafka", "kafka_test", "customers"])}
    assert graph.get(dg.AssetKey(["kafka", "kafka_test", "customers"])).parent_keys == {
        dg.AssetKey(["mysql", "kafka_test", "customers"])}
    assert "mysql" in graph.get(dg.AssetKey(["mysql", "kafka_test", "customers"])).kinds
    assert customers in graph.get(dg.AssetKey("customers_by_age_band")).parent_keys
    # One subsettable definition per pipeline's lake tables.
    assert graph.get(customers).assets_def.can_subset
    check_keys = {f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys}
    for name in ("key_state_matches_mysql", "no_duplicate_primary_keys", "lake_is_fresh"):
        assert f"lake/kafka_to_iceberg/kafka_test/customers:{name}" in check_keys
    assert {"pageviews", "pageviews_per_region"} <= keys
    assert "pageviews_per_region:pv_uv_match_duckdb_recomputation" in check_keys
    assert defs.resolve_job_def("pageviews_per_region_job") is not None
    sensors = {s.name for s in defs.sensors}
    assert "mysql_to_kafka_relaunch_if_dead" in sensors
    assert "kafka_to_iceberg_lake_on_kafka_lag" in sensors
    # Descriptions in the UI; one-op jobs run in-process.
    assert all(s.description for s in defs.sensors) and all(s.description for s in defs.schedules)
    assert defs.resolve_job_def("mysql_to_kafka").executor_def.name == "in_process"
    assert defs.resolve_job_def("kafka_to_iceberg_lake_maintenance").executor_def.name == "in_process"
    assert {s.name for s in defs.schedules} == {"mysql_to_kafka_every_5_minutes", "lake_freshness_every_5_minutes",
                                                "kafka_to_iceberg_lake_maintenance_daily"}


def test_resources_take_secrets_from_the_environment():
    from resources.definitions import defs

    mysql = defs().resources["mysql"]
    assert isinstance(mysql.password, dg.EnvVar) or "EnvVar" in repr(mysql.password)


def test_a_broken_or_duplicate_pipeline_file_is_named(tmp_path, monkeypatch):
    import pytest

    from changelake.connectors.errors import OptionValidationError
    from platform_defs.definitions import build_defs

    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(tmp_path))
    good = "pipeline: {name: p}\nsource: {type: mysql}\nsink: {type: kafka}\n"
    (tmp_path / "a.yaml").write_text(good)
    (tmp_path / "b.yaml").write_text(good)
    with pytest.raises(OptionValidationError, match=r"a.yaml and .*b.yaml both define pipeline.name 'p'"):
        build_defs()
    (tmp_path / "b.yaml").write_text("sink: {type: kafka}\n")
    with pytest.raises(OptionValidationError, match=r"pipeline file .*b.yaml: the pipeline definition has no 'source' block"):
        build_defs()


def test_a_table_the_pipeline_discovered_appears_with_its_check_after_a_reload(tmp_path, monkeypatch):
    """The lake pipeline found a new table at run time (written to its discovery file); reloading
    the code location (services down: no network) shows its asset and key-state check."""
    from changelake.pipeline.discovery import record_tables
    from platform_defs.definitions import build_defs

    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path))
    record_tables("kafka-to-iceberg", ["kafka_test.orders_2026"])
    graph = build_defs().resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"lake/kafka_to_iceberg/kafka_test/orders_2026", "lake/kafka_to_iceberg/kafka_test/customers"} <= keys
    check_keys = {f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys}
    assert "lake/kafka_to_iceberg/kafka_test/orders_2026:key_state_matches_mysql" in check_keys


def test_a_mysql_to_lake_pipeline_is_its_own_job_with_mysql_lineage(tmp_path, monkeypatch):
    """pipelines/examples/mysql-to-iceberg.yaml in place of kafka-to-iceberg.yaml: its own job, its
    lake tables downstream of the MySQL tables (no topic between), the checks that apply."""
    import shutil

    from changelake.pipeline.files import REPO_ROOT
    from platform_defs.definitions import build_defs

    shutil.copy(REPO_ROOT / "pipelines" / "mysql-to-kafka.yaml", tmp_path)
    shutil.copy(REPO_ROOT / "pipelines" / "examples" / "mysql-to-iceberg.yaml", tmp_path)
    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(tmp_path))
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    defs = build_defs()
    assert {j.name for j in defs.jobs} == {"mysql_to_kafka", "mysql_to_iceberg", "mysql_to_iceberg_lake_maintenance",
                                           "pageviews_per_region_job"}
    assert defs.resolve_job_def("mysql_to_iceberg").executor_def.name == "in_process"
    graph = defs.resolve_asset_graph()
    for table in ("customers", "products"):
        lake = graph.get(dg.AssetKey(["lake", "mysql_to_iceberg", "kafka_test", table]))
        assert lake.parent_keys == {dg.AssetKey(["mysql", "kafka_test", table])}
        assert "iceberg" in lake.kinds
    # one binlog position for all tables: materialized together, not one at a time
    assert not graph.get(dg.AssetKey(["lake", "mysql_to_iceberg", "kafka_test", "customers"])).assets_def.can_subset
    check_keys = {f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys}
    assert {"lake/mysql_to_iceberg/kafka_test/customers:key_state_matches_mysql",
            "lake/mysql_to_iceberg/kafka_test/customers:no_duplicate_primary_keys"} <= check_keys
    assert "lake/mysql_to_iceberg/kafka_test/customers:lake_is_fresh" not in check_keys  # measures lag behind Kafka
    sensors = {s.name for s in defs.sensors}
    assert {"mysql_to_iceberg_relaunch_if_dead", "mysql_to_iceberg_lake_checks_after_commits"} <= sensors
    assert "mysql_to_iceberg_lake_on_kafka_lag" not in sensors
    assert "lake_freshness_checks" not in {j.name for j in defs.jobs}


def test_resources_of_the_code_location_and_the_connectors_they_bind():
    from resources.binding import connection_options
    from resources.definitions import defs
    from resources import IcebergCatalogResource, KafkaResource, MySqlResource

    assert set(defs().resources) == {"mysql", "kafka", "lake", "lake_io_manager", "pageviews_topics", "upsert_kafka",
                                     "duckdb"}
    mysql = MySqlResource(host="h", port=1, user="u", password="pw")
    kafka = KafkaResource(bootstrap_servers="k:9092", properties={"security.protocol": "SSL"})
    lake = IcebergCatalogResource(uri="sqlite:////tmp/c.db", warehouse="file:///tmp/w")
    given = dict(mysql=mysql, kafka=kafka, lake=lake)
    assert connection_options("mysql", **given) == {"hostname": "h", "port": "1", "username": "u", "password": "pw"}
    assert connection_options("upsert-kafka", **given) == {"properties.bootstrap.servers": "k:9092",
                                                           "properties.security.protocol": "SSL"}
    assert connection_options("iceberg", **given)["catalog.properties.uri"] == "sqlite:////tmp/c.db"
    assert connection_options("paimon", **given) == {}  # no resource holds a Paimon catalog
