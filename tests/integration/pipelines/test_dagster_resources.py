"""The Dagster resources wrap the connectors, and hand pipelines their connections without the
environment: MySQL -> Iceberg directly as Dagster lake assets and as its own job, the binlog
capture from MySqlResource, the Kafka admin client, and the lag sensor with resources only (real
MariaDB, Kafka and an Iceberg SQL catalog; every ``${VAR}`` of the YAML unset)."""

from __future__ import annotations

import random

import dagster as dg
import pytest

from resources import IcebergCatalogResource, KafkaResource, MySqlResource

pytestmark = pytest.mark.integration

CONNECTION_VARS = ("MYSQL_HOST", "MYSQL_PORT", "MYSQL_USER", "MYSQL_PASSWORD", "KAFKA_BOOTSTRAP_SERVERS",
                   "ICEBERG_CATALOG_URI", "ICEBERG_WAREHOUSE")


@pytest.fixture
def lake():
    """The lake of ``pipeline_pair`` here: Iceberg (the catalog IcebergCatalogResource gives)."""
    return "iceberg"


@pytest.fixture
def no_connection_env(monkeypatch, tmp_path):
    """No connection variable in the environment: only the resources can connect."""
    for var in CONNECTION_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def resources(mysql_params, kafka_bootstrap, tmp_path):
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    return {
        "mysql": MySqlResource(host=mysql_params["host"], port=mysql_params["port"], user=mysql_params["user"],
                               password=mysql_params["password"]),
        "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap),
        "lake": IcebergCatalogResource(uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{tmp_path / 'warehouse'}"),
    }


def _direct_yaml(tmp_path, db: str) -> object:
    path = tmp_path / "mysql-to-iceberg.yaml"
    path.write_text(
        f"pipeline: {{name: direct-{db}}}\n"
        "source: {type: mysql, hostname: '${MYSQL_HOST}', port: '${MYSQL_PORT}', username: '${MYSQL_USER}',\n"
        f"         password: '${{MYSQL_PASSWORD}}', tables: '{db}.a,{db}.b', server-id: {random.randint(7000, 7999)}}}\n"
        "sink: {type: iceberg, catalog.properties.type: sql, catalog.properties.uri: '${ICEBERG_CATALOG_URI}',\n"
        "       catalog.properties.warehouse: '${ICEBERG_WAREHOUSE}'}\n"
    )
    return path


def test_mysql_to_iceberg_as_lake_assets_then_as_its_job_with_resources_only(
    database_factory, mysql_exec, mysql_params, resources, tmp_path, no_connection_env
):
    from assets.checks import build_key_state_checks
    from assets.lake import build_lake_assets
    from changelake.pipeline.files import load_structure
    from platform_defs.pipelines import build_pipeline_job

    db = database_factory()
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(8))", "CREATE TABLE b (id INT PRIMARY KEY)",
               "INSERT INTO a VALUES (1,'x'),(2,'y')", "INSERT INTO b VALUES (7)")
    path = _direct_yaml(tmp_path, db)
    structure = load_structure(path)
    lake = build_lake_assets(path, structure)
    checks = build_key_state_checks(path, structure)
    defs = dg.Definitions(assets=[lake], asset_checks=checks, resources=resources,
                          jobs=[dg.define_asset_job("lake", selection=dg.AssetSelection.assets(lake))])
    instance = dg.DagsterInstance.ephemeral()

    # The lake assets: snapshot, then the binlog, until caught up; checks against MySQL pass.
    result = defs.resolve_job_def("lake").execute_in_process(instance=instance)
    assert result.success
    mats = {m.asset_key.path[-1]: m.metadata for m in result.asset_materializations_for_node(lake.node_def.name)}
    assert mats["a"]["rows_inserted"].value == 2 and mats["b"]["rows_inserted"].value == 1
    assert "lag" not in mats["a"]  # no Kafka between: no lag in offsets
    evaluations = {(e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {(t, c) for t in "ab" for c in ("key_state_matches_mysql", "no_duplicate_primary_keys")}
    assert all(e.passed for e in evaluations.values()), {k: e.metadata for k, e in evaluations.items()}

    # Its own job (the long-running op, bounded here) resumes at the stored binlog position and
    # reports the lake tables per commit: one update and one delete, nothing replayed.
    mysql_exec(db, "UPDATE a SET v='z' WHERE id=1", "DELETE FROM a WHERE id=2")
    job = build_pipeline_job(path)
    run = dg.Definitions(jobs=[job], resources=resources).resolve_job_def(job.name).execute_in_process(
        run_config={"ops": {f"run_{job.name}": {"config": {"until_caught_up": True}}}}, instance=instance)
    assert run.success
    per_commit = [m for m in run.asset_materializations_for_node(f"run_{job.name}")]
    assert {m.asset_key.path[-1] for m in per_commit} == {"a"}
    assert sum(m.metadata["rows_updated"].value for m in per_commit) == 1
    assert sum(m.metadata["rows_deleted"].value for m in per_commit) == 1
    output = [e for e in run.all_events if e.event_type_value == "STEP_OUTPUT"][0].step_output_data.metadata
    assert output["events"].value == 2

    # The checks again, after the job: the lake holds MySQL's rows; the password never in the log.
    result = defs.resolve_job_def("lake").execute_in_process(instance=instance)
    assert result.success and all(e.passed for e in result.get_asset_check_evaluations())
    for run_id in (run.run_id, result.run_id):
        assert all(mysql_params["password"] not in str(r) for r in instance.all_logs(run_id))


def test_mysql_resource_hands_out_the_binlog_capture(database_factory, mysql_exec, resources):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1,10),(2,20)")
    mysql: MySqlResource = resources["mysql"]

    @dg.asset
    def captured(mysql: MySqlResource) -> dg.MaterializeResult:
        events = []
        with mysql.cdc_source(tables=f"{db}.t", startup="snapshot") as source:
            while not source.caught_up():
                events += source.poll(max_events=100, timeout_s=0.5)
        return dg.MaterializeResult(metadata={"rows": sorted(e.after["id"] for e in events)})

    result = dg.materialize([captured], resources={"mysql": mysql})
    assert result.success
    assert result.asset_materializations_for_node("captured")[0].metadata["rows"].value == [1, 2]


def test_mysql_resource_refuses_an_unknown_option_naming_the_supported_ones(resources):
    from changelake.connectors.errors import OptionValidationError

    with pytest.raises(OptionValidationError, match=r"(?s)Unsupported options found for 'mysql'.*scan.startup.mode"):
        resources["mysql"].cdc_source(tables="db.t", options={"no.such.option": "1"})


def test_kafka_resource_admin_client_and_pipeline_sink(resources, kafka_bootstrap):
    kafka: KafkaResource = resources["kafka"]
    with kafka.admin_client() as admin:
        assert isinstance(admin.list_topics(timeout=10).topics, dict)
    sink = kafka.sink({"value.format": "canal-json"}, pipeline="resource-test")  # built, not opened
    assert type(sink).__name__ == "KafkaPipelineSink"


def test_lag_sensor_with_resources_only(database_factory, mysql_exec, pipeline_pair, resources, tmp_path,
                                        no_connection_env):
    """The lag sensor takes its Kafka and lake connections from the resources (the YAML's
    ``${VAR}`` are unset), and launches only when Kafka is ahead of the lake."""
    import yaml

    from changelake.pipeline.files import load_structure
    from changelake.pipeline.runner import run_pipeline
    from sensors.pipelines import make_lag_sensor

    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1),(2)")
    p1, p2 = pipeline_pair(db, ["t"])
    lake_res: IcebergCatalogResource = resources["lake"]
    source = {**p2.source, "properties.bootstrap.servers": "${KAFKA_BOOTSTRAP_SERVERS}"}
    sink = {**p2.sink, "catalog.properties.uri": "${ICEBERG_CATALOG_URI}", "catalog.properties.warehouse": "${ICEBERG_WAREHOUSE}"}
    path = tmp_path / "p2.yaml"
    path.write_text(yaml.safe_dump({"pipeline": p2.pipeline, "source": source, "sink": sink, "transform": p2.transform}))
    from assets.keys import lake_asset_key
    from assets.lake import build_lake_assets

    sensor = make_lag_sensor(path, load_structure(path))
    bound = {"kafka": resources["kafka"], "lake": lake_res}
    lake_assets = dg.Definitions(assets=[build_lake_assets(path, load_structure(path))], resources=resources)

    run_pipeline(p1, until_caught_up=True)
    with dg.instance_for_test() as instance:
        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=lake_assets, resources=bound))
        assert len(result.run_requests) == 1
        assert result.run_requests[0].asset_selection == [lake_asset_key(p2, f"{db}.t")]
        # Pipeline 2 into the resource's catalog, then nothing is behind.
        from resources.binding import bind

        run_pipeline(bind(path, kafka=resources["kafka"], lake=lake_res), until_caught_up=True)
        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=lake_assets, resources=bound))
        assert not result.run_requests and result.skip_message == "no Kafka lag"
