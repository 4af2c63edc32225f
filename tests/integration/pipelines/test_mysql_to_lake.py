"""Both pipelines end to end on real MariaDB, Kafka and the lake (Iceberg and Paimon, by the
``lake`` fixture): snapshot, binlog, resume, evolve."""

from __future__ import annotations

import pytest

from changelake.changelog import TableId
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration


def _lake_rows(p2, table: TableId) -> list[dict]:
    arrow = read_lake_table(p2, table)
    return sorted(arrow.to_pylist(), key=lambda r: tuple(str(r[k]) for k in ("id", "region") if k in r))


def test_snapshot_binlog_resume_and_schema_evolution(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(
        db,
        "CREATE TABLE orders (id INT NOT NULL, region VARCHAR(8) NOT NULL, amount DECIMAL(10,2), "
        "placed DATETIME(3), paid TIMESTAMP(3) NULL, note VARCHAR(32) CHARACTER SET utf8mb4, PRIMARY KEY (id, region))",
        "INSERT INTO orders VALUES (1,'eu',12.34,'2024-01-01 10:00:00.120','2024-01-01 02:00:00.120','a😀b'),"
        "(2,'us',-0.50,NULL,NULL,NULL),(2,'eu',7.00,'2023-12-31 23:59:59.999',NULL,'x')",
    )
    p1, p2 = pipeline_pair(db, ["orders"], primary_keys="id,region")
    orders = TableId(db, "orders")

    # Snapshot -> Kafka -> lake.
    s1 = run_pipeline(p1, until_caught_up=True)
    assert s1.events == 3 and s1.stopped_because == "caught-up"
    s2 = run_pipeline(p2, until_caught_up=True)
    assert s2.tables == {f"{db}.orders": 3}
    assert verify_lake_table(p2, orders, mysql=mysql_params).passed

    # Binlog: update, delete, insert, and a new column (schema evolution).
    mysql_exec(
        db,
        "UPDATE orders SET amount=99.99 WHERE id=1 AND region='eu'",
        "DELETE FROM orders WHERE id=2 AND region='us'",
        "ALTER TABLE orders ADD COLUMN qty INT NULL",
        "INSERT INTO orders (id, region, amount, qty) VALUES (3,'apac',1.25,5)",
    )
    s1 = run_pipeline(p1, until_caught_up=True)
    assert s1.events == 3, s1  # u, d, c (DDL produces no change event)
    s2 = run_pipeline(p2, until_caught_up=True)
    result = verify_lake_table(p2, orders, mysql=mysql_params)
    assert result.passed, result.metadata()
    rows = {(r["id"], r["region"]): r for r in _lake_rows(p2, orders)}
    assert set(rows) == {(1, "eu"), (2, "eu"), (3, "apac")}
    assert str(rows[(1, "eu")]["amount"]) == "99.99"
    assert rows[(3, "apac")]["qty"] == 5 and rows[(1, "eu")]["qty"] is None
    assert rows[(1, "eu")]["note"] == "a😀b"

    # Running both again reads nothing new and re-applies nothing.
    again1 = run_pipeline(p1, until_caught_up=True)
    again2 = run_pipeline(p2, until_caught_up=True)
    assert again1.events == 0 and again2.events == 0
    assert verify_lake_table(p2, orders, mysql=mysql_params).passed


def test_truncate_and_many_rows_reach_the_lake(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, pad CHAR(20))")
    p1, p2 = pipeline_pair(db, ["t"])
    run_pipeline(p1, until_caught_up=True)  # empty snapshot, binlog position stored
    mysql_exec(
        db,
        "INSERT INTO t SELECT seq, 'x' FROM seq_1_to_3000",
        "TRUNCATE TABLE t",
        "INSERT INTO t VALUES (3,'y'),(4,'z')",
    )
    s1 = run_pipeline(p1, until_caught_up=True, batch_size=700)
    assert s1.events == 3000 + 1 + 2
    run_pipeline(p2, until_caught_up=True, batch_size=1000)
    assert [r["id"] for r in _lake_rows(p2, TableId(db, "t"))] == [3, 4]
    assert verify_lake_table(p2, TableId(db, "t"), mysql=mysql_params).passed


def test_key_state_check_catches_a_lake_that_differs(database_factory, mysql_exec, mysql_params, pipeline_pair):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1,1),(2,2)")
    p1, p2 = pipeline_pair(db, ["t"])
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "UPDATE t SET v=3 WHERE id=2", "INSERT INTO t VALUES (5,5)")  # not yet ingested
    result = verify_lake_table(p2, TableId(db, "t"), mysql=mysql_params, recheck_after_s=0.1)
    assert not result.passed
    md = result.metadata()
    assert md["missing_in_lake"] == 1 and md["value_mismatches"] == 1 and md["attempts"] == 2


def test_lag_sensor_launches_ingestion_only_when_kafka_is_ahead_of_the_lake(
    database_factory, mysql_exec, pipeline_pair, tmp_path, monkeypatch, kafka_bootstrap
):
    import dagster as dg
    import yaml

    from assets.keys import lake_asset_key
    from assets.lake import build_lake_assets
    from changelake.pipeline.files import load_structure
    from resources import IcebergCatalogResource, KafkaResource, MySqlResource
    from sensors.pipelines import make_lag_sensor

    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1),(2),(3)")
    p1, p2 = pipeline_pair(db, ["t"])
    path = tmp_path / "p2.yaml"
    path.write_text(yaml.safe_dump({"pipeline": p2.pipeline, "source": p2.source, "sink": p2.sink,
                                    "transform": p2.transform}))
    lake = build_lake_assets(path, load_structure(path))
    sensor = make_lag_sensor(path, load_structure(path))
    # The YAML's literal connection values win over the resources' (see changelake.pipeline.bind).
    resources = {"mysql": MySqlResource(host="unused", user="unused", password=""),
                 "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap),
                 "lake": IcebergCatalogResource(uri=f"sqlite:///{tmp_path / 'other.db'}", warehouse=f"file://{tmp_path}")}

    run_pipeline(p1, until_caught_up=True)
    with dg.instance_for_test() as instance:
        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=dg.Definitions(assets=[lake], resources=resources), resources=resources))
        # Lag is in offsets: 3 records plus the transaction's commit marker (exactly-once).
        assert len(result.run_requests) == 1 and result.run_requests[0].tags["changelake/lag"] == "4"
        # only the lake tables that fell behind, tagged with the pipeline (one run per pipeline)
        assert result.run_requests[0].asset_selection == [lake_asset_key(p2, f"{db}.t")]  # lake/<pipeline>/<db>/t
        assert result.run_requests[0].tags["changelake/pipeline"] == p2.name
        run_pipeline(p2, until_caught_up=True)
        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=dg.Definitions(assets=[lake], resources=resources), resources=resources))
        assert not result.run_requests and result.skip_message == "no Kafka lag"


@pytest.mark.parametrize("strategy", ["all-to-zero", "hash-by-key"])
def test_update_changing_the_primary_key_moves_the_row(database_factory, mysql_exec, mysql_params, pipeline_pair,
                                                       kafka_bootstrap, strategy):
    import json

    from confluent_kafka import Consumer, TopicPartition

    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(4))", "INSERT INTO t VALUES (1,'a'),(2,'b'),(3,'c')")
    p1, p2 = pipeline_pair(db, ["t"], p1_extra={"partition.strategy": strategy, "sink.topic.partitions": 3})
    run_pipeline(p1, until_caught_up=True)
    mysql_exec(db, "UPDATE t SET id = id + 100 WHERE id <= 2", "UPDATE t SET id = 1 WHERE id = 3")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    result = verify_lake_table(p2, TableId(db, "t"), mysql=mysql_params)
    assert result.passed, result.metadata()
    assert sorted(r["id"] for r in _lake_rows(p2, TableId(db, "t"))) == [1, 101, 102]

    # On Kafka, as Debezium: a delete keyed by the old key, then a create keyed by the new key.
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "pk-change", "isolation.level": "read_committed"})
    topic = f"{db}.t"
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    seen = []
    for p in parts:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        consumer.assign([TopicPartition(topic, p, low)])
        for m in consumer.consume(100, timeout=5):
            if m.error() is None and m.value():
                doc = json.loads(m.value())  # the bare payload (Flink CDC defaults)
                seen.append((json.loads(m.key())["id"], doc["op"]))
    consumer.close()
    assert all(op in ("r", "c", "d") for _, op in seen)  # no "u" for a key change
    assert {(1, "d"), (101, "c"), (2, "d"), (102, "c"), (3, "d"), (1, "c")} <= set(seen)
