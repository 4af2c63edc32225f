"""The Dagster layer against real services: the pipeline job (long-running op, bounded), the lake
assets, and the DuckDB key-state checks; secrets stay out of the event log."""

from __future__ import annotations

import json
import textwrap

import dagster as dg
import pymysql
import pytest

pytestmark = pytest.mark.integration


LAKE_SINKS = {
    "iceberg": '{type: iceberg, catalog.properties.uri: "${ICEBERG_CATALOG_URI}", '
               'catalog.properties.warehouse: "${ICEBERG_WAREHOUSE}"}',
    # the default local warehouse: <CHANGELAKE_STATE_DIR>/lake/paimon
    "paimon": "{type: paimon, catalog.properties.metastore: filesystem, table.properties.deletion-vectors.enabled: true}",
}


@pytest.fixture(params=sorted(LAKE_SINKS))
def code_location(request, tmp_path, monkeypatch, mysql_params, kafka_bootstrap, database_factory):
    """Pipeline files one (MySQL -> Kafka) and two (Kafka -> lake), once per lake sink type."""
    db = database_factory()
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, v DECIMAL(8,3), t DATETIME(6))")
        cur.execute("CREATE TABLE b (k1 INT, k2 VARCHAR(4), n INT, PRIMARY KEY (k1, k2))")
        cur.execute("INSERT INTO a VALUES (1, 1.5, '2020-02-29 12:00:00.000001'), (2, NULL, NULL)")
        cur.execute("INSERT INTO b VALUES (1,'x',1),(1,'y',2)")
    conn.close()
    pipes = tmp_path / "pipelines"
    pipes.mkdir()
    (pipes / "one.yaml").write_text(textwrap.dedent(f"""\
        pipeline: {{name: e2e-{db}-one}}
        source: {{type: mysql, hostname: "${{MYSQL_HOST}}", port: "${{MYSQL_PORT}}", username: "${{MYSQL_USER}}",
                 password: "${{MYSQL_PASSWORD}}", tables: '{db}.\\.*', server-id: 7300-7310}}
        sink: {{type: kafka, properties.bootstrap.servers: "${{KAFKA_BOOTSTRAP_SERVERS}}",
               sink.delivery-guarantee: exactly-once, debezium-json.include-schema.enabled: true}}
        """))
    (pipes / "two.yaml").write_text(textwrap.dedent(f"""\
        pipeline: {{name: e2e-{db}-two}}
        source: {{type: kafka, properties.bootstrap.servers: "${{KAFKA_BOOTSTRAP_SERVERS}}", topic: '{db}.a;{db}.b',
                 value.format: debezium-json}}
        transform:
          - {{source-table: '{db}.a', primary-keys: id}}
          - {{source-table: '{db}.b', primary-keys: 'k1,k2'}}
        sink: LAKE_SINK
        """).replace("LAKE_SINK", LAKE_SINKS[request.param]))
    (tmp_path / "wh").mkdir()
    for key, value in {
        "CHANGELAKE_PIPELINES_DIR": str(pipes),
        "MYSQL_HOST": mysql_params["host"], "MYSQL_PORT": str(mysql_params["port"]),
        "MYSQL_USER": mysql_params["user"], "MYSQL_PASSWORD": mysql_params["password"],
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "ICEBERG_CATALOG_URI": f"sqlite:///{tmp_path / 'catalog.db'}",
        "ICEBERG_WAREHOUSE": f"file://{tmp_path / 'wh'}",
        "CHANGELAKE_STATE_DIR": str(tmp_path / "state"),
    }.items():
        monkeypatch.setenv(key, value)
    from platform_defs.definitions import build_defs

    return db, build_defs()


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))


def test_pipeline_job_then_lake_assets_pass_their_checks(code_location, mysql_params):
    db, defs = code_location
    instance = dg.DagsterInstance.ephemeral()
    op = f"run_e2e_{db}_one"
    job = defs.resolve_job_def(f"e2e_{db}_one")
    result = job.execute_in_process(run_config={"ops": {op: {"config": {"until_caught_up": True}}}}, instance=instance)
    assert result.success
    outputs = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    md = outputs[0].step_output_data.metadata
    assert md["events"].value == 4 and md["batches"].value >= 1 and md["position"].value
    assert json.loads(md["offsets"].value)  # Pipeline 1's topics' end offsets, not {}
    # Pipeline 1 reports each topic it wrote (lineage: mysql -> kafka -> lake).
    topics = {}
    for m in result.asset_materializations_for_node(op):
        topics.setdefault(m.asset_key.to_user_string(), []).append(m.metadata)
    assert set(topics) == {f"kafka/{db}/a", f"kafka/{db}/b"}
    assert sum(m["records"].value for m in topics[f"kafka/{db}/a"]) == 2
    assert topics[f"kafka/{db}/a"][-1]["offsets"].value and topics[f"kafka/{db}/a"][-1]["position"].value

    lake_defs = dg.Definitions.merge(defs, dg.Definitions(jobs=[dg.define_asset_job("lake", selection=dg.AssetSelection.groups("lake"))]))
    result = lake_defs.resolve_job_def("lake").execute_in_process(instance=instance)
    assert result.success
    evaluations = {(".".join(e.asset_key.path[2:]), e.check_name): e for e in result.get_asset_check_evaluations()}
    assert {t for t, _ in evaluations} == {f"{db}.a", f"{db}.b"}
    assert {c for _, c in evaluations} == {"key_state_matches_mysql", "no_duplicate_primary_keys", "lake_is_fresh"}
    assert all(e.passed for e in evaluations.values()), {k: e.metadata for k, e in evaluations.items()}
    assert evaluations[(f"{db}.b", "key_state_matches_mysql")].metadata["rows_lake"].value == 2
    # One metadata vocabulary: rows by operation, the table's own offsets, snapshot id, lag.
    mats = {m.asset_key.path[-1]: m.metadata for m in result.get_asset_materialization_events() for m in [m.materialization]}
    assert mats["a"]["rows_inserted"].value == 2 and mats["a"]["rows_updated"].value == 0
    assert list(mats["a"]["offsets"].value) == [f"{db}.a/0"] and list(mats["b"]["offsets"].value) == [f"{db}.b/0"]
    assert mats["a"]["snapshot_id"].value and mats["a"]["lag"].value == 0

    # One table at a time: only the selected table runs; a table with nothing new is not materialized.
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("UPDATE a SET v = 2.5 WHERE id = 1")
    conn.close()
    job.execute_in_process(run_config={"ops": {op: {"config": {"until_caught_up": True}}}}, instance=instance)
    one = dg.define_asset_job("one", selection=dg.AssetSelection.assets(dg.AssetKey(["lake", f"e2e_{db}_two", db, "a"]), dg.AssetKey(["lake", f"e2e_{db}_two", db, "b"])))
    result = dg.Definitions.merge(defs, dg.Definitions(jobs=[one])).resolve_job_def("one").execute_in_process(instance=instance)
    (mat,) = [m.materialization for m in result.get_asset_materialization_events()]
    assert mat.asset_key == dg.AssetKey(["lake", f"e2e_{db}_two", db, "a"])  # b had nothing new
    assert mat.metadata["rows_updated"].value == 1 and mat.metadata["rows_inserted"].value == 0
    # a's checks ran after its materialization; b, not materialized, held nothing back
    checked = {(e.asset_key.path[-1], e.check_name) for e in result.get_asset_check_evaluations()}
    assert checked == {("a", "key_state_matches_mysql"), ("a", "no_duplicate_primary_keys"), ("a", "lake_is_fresh")}
    assert all(e.passed for e in result.get_asset_check_evaluations())

    # A row the lake does not have makes the check fail (after its one re-check).
    conn = pymysql.connect(**mysql_params, database=db, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO b VALUES (2,'z',3)")
    conn.close()
    checks_only = dg.define_asset_job("checks_only", selection=dg.AssetSelection.checks_for_assets(
        dg.AssetKey(["lake", f"e2e_{db}_two", db, "b"])))
    result = dg.Definitions.merge(defs, dg.Definitions(jobs=[checks_only])).resolve_job_def("checks_only") \
        .execute_in_process(instance=instance, raise_on_error=False)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    evaluation = evaluations["key_state_matches_mysql"]
    assert not evaluation.passed and evaluation.metadata["missing_in_lake"].value == 1
    assert evaluations["no_duplicate_primary_keys"].passed

    # Secrets never reach the event log or the run config of any run.
    password = mysql_params["password"]
    runs = instance.get_runs()
    assert len(runs) == 5
    for run in runs:
        assert password not in str(run.run_config)
        assert all(password not in str(record) for record in instance.all_logs(run.run_id))


def test_long_running_op_of_pipeline_2_reports_a_materialization_per_commit(code_location, mysql_params):
    db, defs = code_location
    instance = dg.DagsterInstance.ephemeral()
    for name in ("one", "two"):
        job = defs.resolve_job_def(f"e2e_{db}_{name}")
        result = job.execute_in_process(
            run_config={"ops": {f"run_e2e_{db}_{name}": {"config": {"until_caught_up": True}}}}, instance=instance
        )
        assert result.success
    materialized = {
        ".".join(m.asset_key.path) for m in result.asset_materializations_for_node(f"run_e2e_{db}_two")
    }
    assert materialized == {f"lake.e2e_{db}_two.{db}.a", f"lake.e2e_{db}_two.{db}.b"}
    for m in result.asset_materializations_for_node(f"run_e2e_{db}_two"):
        assert {"rows_inserted", "rows_updated", "rows_deleted", "offsets", "snapshot_id", "lag"} <= set(m.metadata)
        assert "change_events" not in m.metadata

    # Checks follow the long-running op's commits: the sensor asks for the checks of what it wrote.
    sensor = next(s for s in defs.sensors if s.name == f"e2e_{db}_two_lake_checks_after_commits")
    context = dg.build_sensor_context(instance=instance, definitions=defs)
    (request,) = sensor.evaluate_tick(context).run_requests
    assert {(k.asset_key.path[-1], k.name) for k in request.asset_check_keys} == {
        (t, c) for t in ("a", "b") for c in ("key_state_matches_mysql", "no_duplicate_primary_keys", "lake_is_fresh")}
    assert not sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs,
                                                            cursor=context.cursor)).run_requests
    checks_job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection=set(), asset_check_selection=set(request.asset_check_keys))
    result = checks_job.execute_in_process(instance=instance)
    assert len(result.get_asset_check_evaluations()) == 6
    assert all(e.passed for e in result.get_asset_check_evaluations())
