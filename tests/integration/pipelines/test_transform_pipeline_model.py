"""The rest of Flink CDC's pipeline model on real MariaDB -> Kafka -> the lake (both lakes):
Python UDFs (scalar and vectorised) registered in ``pipeline.user-defined-function``, and sharded
tables merged into one lake table with a composite key built from metadata columns.

UDF classpaths name the module ``udfs_for_pipeline`` beside this file (pytest puts a test file's
directory on ``sys.path``)."""

from __future__ import annotations

import random
from decimal import ROUND_HALF_UP, Decimal

import pytest

from changelake.changelog import TableId
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table

pytestmark = pytest.mark.integration


def _p1(name, mysql_params, kafka_bootstrap, tables: str):
    return parse_pipeline({
        "pipeline": {"name": f"{name}-p1"},
        "source": {"type": "mysql", "hostname": mysql_params["host"], "port": mysql_params["port"],
                   "username": mysql_params["user"], "password": mysql_params["password"], "tables": tables,
                   "server-id": str(random.randint(7000, 7999))},
        "sink": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap,
                 "sink.delivery-guarantee": "exactly-once"},
    }, env={})


def _p2(name, kafka_bootstrap, topics, sink: dict, *, transform, route=(), pipeline_extra=None):
    return parse_pipeline({
        "pipeline": {"name": f"{name}-p2", **(pipeline_extra or {})},
        "source": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap, "topic": ";".join(topics),
                   "scan.startup.mode": "earliest-offset", "value.format": "debezium-json"},
        "transform": list(transform), "route": list(route), "sink": dict(sink),
    }, env={})


def test_python_udfs_scalar_and_vectorised_in_a_real_pipeline(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap, pipeline_pair
):
    db = database_factory()
    sink = pipeline_pair(db, [])[1].sink  # the lake of the ``lake`` fixture (Iceberg, then Paimon)
    mysql_exec(db, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(10,2))",
               "INSERT INTO items VALUES (1,'pen',1.25),(2,'ink',10.00),(3,'cap',NULL),(4,'box',99.99)")
    name = f"udf-{db}"
    p1 = _p1(name, mysql_params, kafka_bootstrap, f"{db}.items")
    p2 = _p2(name, kafka_bootstrap, [f"{db}.items"], sink,
             pipeline_extra={"user-defined-function": [
                 {"name": "with_tax", "classpath": "udfs_for_pipeline.with_tax"},
                 {"name": "shout", "classpath": "udfs_for_pipeline.shout"}]},
             transform=[{"source-table": f"{db}.items", "projection": "id, shout(name) AS loud, with_tax(price) AS gross",
                         "filter": "with_tax(price) IS NULL OR with_tax(price) < 100", "primary-keys": "id"}])
    assert [u["name"] for u in p2.user_defined_functions] == ["with_tax", "shout"]
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "UPDATE items SET price = 50.00 WHERE id = 2", "INSERT INTO items VALUES (5,'cup',0.05)")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)

    table = read_lake_table(p2, TableId(db, "items"))
    rows = sorted(table.to_pylist(), key=lambda r: r["id"])

    def taxed(p):
        return None if p is None else (Decimal(p) * Decimal("1.2")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)

    source = {1: ("pen", "1.25"), 2: ("ink", "50.00"), 3: ("cap", None), 5: ("cup", "0.05")}  # 4: 119.99 > 100
    assert rows == [{"id": i, "loud": n.upper() + "!", "gross": taxed(p)} for i, (n, p) in source.items()]
    assert str(table.schema.field("gross").type) == "decimal128(12, 2)"


def test_sharded_tables_merge_into_one_lake_table_without_key_collisions(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap, pipeline_pair
):
    dbs = [database_factory(), database_factory()]  # both named db_<uid>: the seed's db_.* pattern
    for n, db in enumerate(dbs):
        for shard in ("order_1", "order_2"):
            mysql_exec(db, f"CREATE TABLE {shard} (id INT PRIMARY KEY, amount DECIMAL(8,2))",
                       # the same ids in every shard: a key of id alone would collide
                       f"INSERT INTO {shard} VALUES (1, {n}{shard[-1]}.10), (2, {n}{shard[-1]}.20)")
    name = f"shard-{dbs[0]}"
    p1 = _p1(name, mysql_params, kafka_bootstrap, ",".join(f"{db}.order_\\.*" for db in dbs))
    topics = [f"{db}.{shard}" for db in dbs for shard in ("order_1", "order_2")]
    p2 = _p2(name, kafka_bootstrap, topics, pipeline_pair(dbs[0], [])[1].sink,
             transform=[{"source-table": "db_\\.*.order_\\.*",
                         "projection": "\\*, __schema_name__ AS src_db, __table_name__ AS src_table",
                         "primary-keys": "src_db, src_table, id"}],
             route=[{"source-table": "db_\\.*.order_\\.*", "sink-table": "ods.orders"}])
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(dbs[1], "UPDATE order_2 SET amount = 0.99 WHERE id = 1", "DELETE FROM order_1 WHERE id = 2")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)

    rows = read_lake_table(p2, TableId("ods", "orders")).to_pylist()
    got = sorted((r["src_db"], r["src_table"], r["id"], r["amount"]) for r in rows)
    expected = sorted(
        (db, shard, i, Decimal(f"{n}{shard[-1]}.{i}0"))
        for n, db in enumerate(dbs) for shard in ("order_1", "order_2") for i in (1, 2)
        if not (n == 1 and shard == "order_1" and i == 2)
    )
    expected = [(d, s, i, Decimal("0.99") if (d, s, i) == (dbs[1], "order_2", 1) else a) for d, s, i, a in expected]
    assert got == expected  # 7 rows: every shard's ids kept apart, the update and the delete applied per shard


def test_append_only_mode_keeps_every_change_as_a_row_with_its_operation(
    database_factory, mysql_exec, mysql_params, kafka_bootstrap, pipeline_pair
):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE acct (id INT PRIMARY KEY, balance INT)", "INSERT INTO acct VALUES (1, 10), (2, 20)")
    name = f"append-{db}"
    p1 = _p1(name, mysql_params, kafka_bootstrap, f"{db}.acct")
    p2 = parse_pipeline({
        "pipeline": {"name": f"{name}-p2"},
        "source": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap, "topic": f"{db}.acct",
                   "scan.startup.mode": "earliest-offset", "value.format": "debezium-json",
                   "scan.read-changelog-as-append-only.enabled": True},
        "transform": [{"source-table": f"{db}.acct",
                       "projection": "\\*, __data_event_type__ AS op, __event_position__ AS pos",
                       "primary-keys": "id, op, pos"}],
        "sink": pipeline_pair(db, [])[1].sink,
    }, env={})
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    # two updates of one row in one transaction (the same commit time), then a delete
    mysql_exec(db, "BEGIN", "UPDATE acct SET balance = 11 WHERE id = 1", "UPDATE acct SET balance = 12 WHERE id = 1",
               "COMMIT", "DELETE FROM acct WHERE id = 2")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)

    rows = read_lake_table(p2, TableId(db, "acct")).to_pylist()
    got = sorted((r["pos"], r["op"], r["id"], r["balance"]) for r in rows)
    kinds_in_order = [(op, i, b) for _, op, i, b in sorted(got, key=lambda r: (int(r[0].split(":")[-1]), r[1] != "-U"))]
    assert kinds_in_order == [("+I", 1, 10), ("+I", 2, 20), ("-U", 1, 10), ("+U", 1, 11), ("-U", 1, 11),
                              ("+U", 1, 12), ("-D", 2, 20)]
    assert len({r["pos"] for r in rows}) == 5  # one Kafka record per change (2 snapshot rows, 2 updates, 1 delete)
