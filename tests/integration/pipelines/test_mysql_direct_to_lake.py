"""``mysql`` source -> ``iceberg``/``paimon`` sink directly, without Kafka (as Flink CDC runs it),
on real MariaDB and a real lake: snapshot, binlog, resume, and a crash between a batch's table
commits and its checkpoint."""

from __future__ import annotations

import pytest

from changelake.changelog import TableId
from changelake.connectors.lake.changelog_sink import POSITION_KEY
from changelake.connectors.registry import ConnectorContext, find_factory
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration


def _ids(defn, table: TableId) -> list[int]:
    return sorted(read_lake_table(defn, table).column("id").to_pylist())


def _checkpoint(defn) -> str | None:
    lake = find_factory(defn.sink_type).create_sink(defn.options("sink"), ConnectorContext(defn.name))
    lake.open()
    try:
        return lake.read_pipeline_property(POSITION_KEY.format(pipeline=defn.name))
    finally:
        lake.close()


def _set_checkpoint(defn, text: str) -> None:
    lake = find_factory(defn.sink_type).create_sink(defn.options("sink"), ConnectorContext(defn.name))
    lake.open()
    try:
        lake.write_pipeline_property(POSITION_KEY.format(pipeline=defn.name), text)
    finally:
        lake.close()


def test_snapshot_binlog_and_resume_without_kafka(database_factory, mysql_exec, mysql_params, direct_pipeline):
    db = database_factory()
    mysql_exec(
        db,
        "CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(16))",
        "CREATE TABLE items (sku VARCHAR(8) NOT NULL, qty INT, PRIMARY KEY (sku))",
        "INSERT INTO orders VALUES (1,12.34,'a'),(2,-0.50,NULL),(3,7.00,'c')",
        "INSERT INTO items VALUES ('x',1),('y',2)",
    )
    defn = direct_pipeline(db)
    orders, items = TableId(db, "orders"), TableId(db, "items")

    first = run_pipeline(defn, until_caught_up=True)
    assert first.stopped_because == "caught-up"
    assert first.tables == {f"{db}.orders": 3, f"{db}.items": 2}
    assert first.metrics["table_commits"] == 2 and first.metrics["replays_skipped"] == 0
    assert verify_lake_table(defn, orders, mysql=mysql_params).passed
    assert verify_lake_table(defn, items, mysql=mysql_params).passed

    mysql_exec(
        db,
        "UPDATE orders SET amount=99.99 WHERE id=1",
        "DELETE FROM orders WHERE id=2",
        "INSERT INTO orders VALUES (4,1.25,'d')",
        "UPDATE items SET qty=5 WHERE sku='y'",
    )
    second = run_pipeline(defn, until_caught_up=True)
    assert second.events == 4, second
    assert _ids(defn, orders) == [1, 3, 4]
    result = verify_lake_table(defn, orders, mysql=mysql_params)
    assert result.passed, result.metadata()
    assert verify_lake_table(defn, items, mysql=mysql_params).passed

    # A third run resumes at the stored position: nothing read, nothing applied again.
    third = run_pipeline(defn, until_caught_up=True)
    assert third.events == 0 and third.metrics["table_commits"] == 0
    assert verify_lake_table(defn, orders, mysql=mysql_params).passed


def test_crash_between_table_commits_and_checkpoint_applies_nothing_twice(
    database_factory, mysql_exec, mysql_params, direct_pipeline
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY, v INT)", "CREATE TABLE b (id INT PRIMARY KEY, v INT)",
               "INSERT INTO a VALUES (1,1)", "INSERT INTO b VALUES (1,1)")
    defn = direct_pipeline(db)
    run_pipeline(defn, until_caught_up=True)
    before = _checkpoint(defn)
    assert before is not None

    mysql_exec(db, "INSERT INTO a VALUES (2,2)", "UPDATE b SET v=v+10 WHERE id=1", "DELETE FROM a WHERE id=1")
    run_pipeline(defn, until_caught_up=True)
    # As if the process died after both tables committed but before the checkpoint was stored:
    _set_checkpoint(defn, before)

    replay = run_pipeline(defn, until_caught_up=True)
    assert replay.events == 3  # read again from the older position ...
    assert replay.metrics["table_commits"] == 0 and replay.metrics["replays_skipped"] == 2  # ... applied nowhere
    for table in (TableId(db, "a"), TableId(db, "b")):
        result = verify_lake_table(defn, table, mysql=mysql_params)
        assert result.passed, result.metadata()
    assert read_lake_table(defn, TableId(db, "b")).column("v").to_pylist() == [11]

    # New changes after the replay still land, once.
    mysql_exec(db, "UPDATE b SET v=v+10 WHERE id=1")
    after = run_pipeline(defn, until_caught_up=True)
    assert after.events == 1 and after.metrics["table_commits"] == 1
    assert read_lake_table(defn, TableId(db, "b")).column("v").to_pylist() == [21]
