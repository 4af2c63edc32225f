"""The seed's Pipeline 2 YAML (pipelines/examples/seed-kafka-to-paimon.yaml) runs as written: one
topic ``inventory`` carrying two tables (distributed tables), primary keys from ``transform``,
deletion vectors on, a local Paimon filesystem catalog under the state folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from changelake.changelog import TableId
from changelake.pipeline.definition import load_pipeline, parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration

SEED_YAML = Path(__file__).resolve().parents[3] / "pipelines" / "examples" / "seed-kafka-to-paimon.yaml"


def test_seed_pipeline_2_yaml_runs_into_paimon(database_factory, mysql_exec, mysql_params, kafka_bootstrap, tmp_path,
                                               monkeypatch):
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    db = database_factory()
    mysql_exec(
        db,
        "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(32), address VARCHAR(64), phone_number VARCHAR(16), age INT)",
        "CREATE TABLE products (id INT PRIMARY KEY, name VARCHAR(32), weight INT)",
        "INSERT INTO customers VALUES (4,'John','New York','2222',12),(5,'Ann','Lisbon','3333',30)",
        "INSERT INTO products VALUES (1,'scooter',3),(2,'car battery',8)",
    )
    # Pipeline 1 writes both tables to the one topic `inventory` (Debezium-JSON, no schema: the
    # seed's point that primary keys must come from the transform).
    p1 = parse_pipeline(
        {
            "pipeline": {"name": f"seed-p1-{db}"},
            "source": {"type": "mysql", "hostname": mysql_params["host"], "port": mysql_params["port"],
                       "username": mysql_params["user"], "password": mysql_params["password"],
                       "tables": f"{db}.\\.*", "server-id": "7421"},
            "sink": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap,
                     "sink.tableId-to-topic.mapping": f"{db}.customers:inventory;{db}.products:inventory"},
        },
        env={},
    )
    run_pipeline(p1, until_caught_up=True)
    mysql_exec(db, "UPDATE customers SET phone_number='1234' WHERE id=4", "DELETE FROM products WHERE id=2",
               "INSERT INTO products VALUES (3,'hammer',1)")
    run_pipeline(p1, until_caught_up=True)

    p2 = load_pipeline(SEED_YAML, env={"kafka.bootstrap.servers": kafka_bootstrap})
    assert p2.sink_type == "paimon" and p2.options("sink")["commit.user"] == "your_job_name"
    stats = run_pipeline(p2, until_caught_up=True)
    assert stats.tables == {f"{db}.customers": 3, f"{db}.products": 4}
    for table in ("customers", "products"):
        result = verify_lake_table(p2, TableId(db, table), mysql=mysql_params)
        assert result.passed, result.metadata()
    customers = {r["id"]: r for r in read_lake_table(p2, TableId(db, "customers")).to_pylist()}
    assert customers[4]["phone_number"] == "1234"
    assert sorted(r["id"] for r in read_lake_table(p2, TableId(db, "products")).to_pylist()) == [1, 3]

    # The lake is the local Paimon warehouse under the state folder, tables as the seed configures them.
    from changelake.connectors.paimon import create_sink

    with create_sink(p2.options("sink")) as sink:
        table = sink.load_table(TableId(db, "customers"))
        assert table.primary_keys == ["id"] and table.options.deletion_vectors_enabled()
        assert table.snapshot_manager().get_latest_snapshot().commit_user == "your_job_name"
    assert (tmp_path / "state" / "lake" / "paimon" / f"{db}.db" / "customers").is_dir()
    assert run_pipeline(p2, until_caught_up=True).events == 0  # resumes from the stored checkpoint
