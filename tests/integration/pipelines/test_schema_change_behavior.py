"""``pipeline.schema.change.behavior`` and ``include/exclude.schema.changes`` on a real pipeline
(MariaDB -> Pipeline 1 -> Kafka -> Pipeline 2 -> Iceberg / Paimon), with Flink CDC's meanings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from changelake.changelog import TableId
from changelake.connectors.lake.schema_change import SchemaChangeError
from changelake.errors import ChangelakeError
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table

pytestmark = pytest.mark.integration


def _with(p2, behavior=None, **sink):
    pipeline = dict(p2.pipeline)
    if behavior:
        pipeline["schema.change.behavior"] = behavior
    return replace(p2, pipeline=pipeline, sink={**p2.sink, **sink})


def _lake(p2, t):
    arrow = read_lake_table(p2, t)
    return arrow.schema.names, sorted(arrow.to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("behavior", [None, "exception", "evolve", "try_evolve", "lenient", "ignore"])
def test_each_schema_change_behavior_on_a_real_pipeline(database_factory, mysql_exec, mysql_params, pipeline_pair,
                                                         behavior):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, a VARCHAR(10), b INT)", "INSERT INTO t VALUES (1,'1',10),(2,'2',20)")
    p1, p2 = pipeline_pair(db, ["t"])
    p2 = _with(p2, behavior)
    t = TableId(db, "t")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "ALTER TABLE t ADD COLUMN c INT", "INSERT INTO t VALUES (3,'3',30,300)",
               "ALTER TABLE t DROP COLUMN b", "INSERT INTO t VALUES (4,'4',400)")
    run_pipeline(p1, until_caught_up=True)
    if behavior == "exception":
        with pytest.raises(SchemaChangeError) as err:
            run_pipeline(p2, until_caught_up=True)
        assert f"{db}.t" in str(err.value) and "add.column of column 'c'" in str(err.value)
        names, rows = _lake(p2, t)
        assert names == ["id", "a", "b"] and [r["id"] for r in rows] == [1, 2]  # not past the change
        return
    run_pipeline(p2, until_caught_up=True)
    names, rows = _lake(p2, t)
    by_id = {r["id"]: r for r in rows}
    assert sorted(by_id) == [1, 2, 3, 4]  # rows keep flowing in every mode
    if behavior == "ignore":
        assert names == ["id", "a", "b"]  # the lake schema is kept
        assert by_id[3]["b"] == 30 and by_id[4]["b"] is None
    elif behavior in ("evolve", "try_evolve"):
        assert names == ["id", "a", "c"]  # drop.column applied
        assert by_id[4]["c"] == 400
        assert verify_lake_table(p2, t, mysql=mysql_params).passed
    else:  # default and lenient: the dropped column stays, NULL from then on
        assert names == ["id", "a", "b", "c"]
        assert by_id[3]["b"] == 30 and by_id[4]["b"] is None and by_id[4]["c"] == 400
        assert verify_lake_table(p2, t, mysql=mysql_params).passed

    # an incompatible type change (VARCHAR -> INT)
    mysql_exec(db, "ALTER TABLE t MODIFY a INT", "INSERT INTO t (id, a, c) VALUES (5, 5, 500)")
    run_pipeline(p1, until_caught_up=True)
    if behavior in (None, "evolve"):  # the lake cannot widen string to int: stop, never silently
        with pytest.raises(ChangelakeError, match="'a'"):
            run_pipeline(p2, until_caught_up=True)
        assert sorted(r["id"] for r in _lake(p2, t)[1]) == [1, 2, 3, 4]
        return
    run_pipeline(p2, until_caught_up=True)
    names, rows = _lake(p2, t)
    by_id = {r["id"]: r for r in rows}
    assert by_id[5].get("c") == (None if behavior == "ignore" else 500)
    if behavior == "lenient":  # the old column stays, a new one takes the new type
        assert "a_int" in names and by_id[5]["a_int"] == 5 and by_id[5]["a"] is None
    else:  # try_evolve, ignore: the lake type stays, the value is NULL
        assert "a_int" not in names and by_id[5]["a"] is None


@pytest.mark.parametrize("behavior, sink, expected", [
    ("lenient", {}, [1, 2, 3]),  # Flink's lenient ignores TRUNCATE (not changelake's default)
    (None, {"exclude.schema.changes": "[truncate.table]"}, [1, 2, 3]),
    ("lenient", {"exclude.schema.changes": "[drop.table]"}, [3]),  # an explicit exclude overrides (FLINK-36514)
    ("evolve", {"include.schema.changes": "[table]"}, [3]),
    ("ignore", {}, [1, 2, 3]),
    ("exception", {}, None),
])
def test_truncate_per_mode_and_include_exclude(database_factory, mysql_exec, mysql_params, pipeline_pair,
                                               behavior, sink, expected):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY)", "INSERT INTO t VALUES (1),(2)")
    p1, p2 = pipeline_pair(db, ["t"])
    p2 = _with(p2, behavior, **sink)
    t = TableId(db, "t")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "TRUNCATE TABLE t", "INSERT INTO t VALUES (3)")
    run_pipeline(p1, until_caught_up=True)
    if expected is None:
        with pytest.raises(SchemaChangeError, match="truncate.table"):
            run_pipeline(p2, until_caught_up=True)
        assert sorted(r["id"] for r in _lake(p2, t)[1]) == [1, 2]
        return
    run_pipeline(p2, until_caught_up=True)
    assert sorted(r["id"] for r in _lake(p2, t)[1]) == expected


def _lake_comments(p2, t):
    from changelake.connectors.registry import ConnectorContext, find_factory

    sink = find_factory(p2.sink_type).create_sink(p2.options("sink"), ConnectorContext(p2.name))
    with sink:
        table = sink.load_table(t)
        if p2.sink_type == "iceberg":
            return {f.name: f.doc for f in table.schema().fields}, table.properties.get("comment")
        return {f.name: f.description for f in table.table_schema.fields}, table.table_schema.comment


def test_table_and_column_comment_changes_reach_the_lake(database_factory, mysql_exec, pipeline_pair):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t(id INT PRIMARY KEY, v INT COMMENT 'old') COMMENT='first'", "INSERT INTO t VALUES (1, 1)")
    p1, p2 = pipeline_pair(db, ["t"])
    p1 = replace(p1, source={**p1.source, "include-comments.enabled": "true"})
    t = TableId(db, "t")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    columns, table = _lake_comments(p2, t)
    assert columns["v"] == "old" and table == "first"
    mysql_exec(db, "ALTER TABLE t MODIFY v INT COMMENT 'the value', COMMENT='the table'", "INSERT INTO t VALUES (2, 2)")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    columns, table = _lake_comments(p2, t)
    assert columns["v"] == "the value" and table == "the table"


def _mysql_state(mysql_params, db, t):
    import pymysql

    conn = pymysql.connect(**mysql_params, database=db, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, v FROM `{t}` ORDER BY id")
            return [{"id": i, "v": v} for i, v in cur.fetchall()]
    finally:
        conn.close()


def _committed(p2, t):
    """The lake table's stored offsets (what its last commit absorbed)."""
    from changelake.connectors.registry import ConnectorContext, find_factory

    sink = find_factory(p2.sink_type).create_sink(p2.options("sink"), ConnectorContext(p2.name))
    with sink:
        return sink._read_committed_offsets(sink.load_table(t))


@pytest.mark.parametrize("exclude, refused", [
    ("[add.column]", "truncate.table"),  # the ADD COLUMN is ignored: the TRUNCATE is the first refused change
    (None, "add.column of column 'w'"),  # the ADD COLUMN comes first, although the batch also holds the TRUNCATE
])
def test_exception_stops_with_the_lake_at_mysqls_state_just_before_the_first_refused_change(
        database_factory, mysql_exec, mysql_params, pipeline_pair, exclude, refused):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE ex3(id INT PRIMARY KEY, v INT)", "INSERT INTO ex3 VALUES (1,1),(2,2)")
    p1, p2 = pipeline_pair(db, ["ex3"])
    p2 = _with(p2, "exception", **({"exclude.schema.changes": exclude} if exclude else {}))
    t = TableId(db, "ex3")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "INSERT INTO ex3 VALUES (3,3)")
    before_alter = _mysql_state(mysql_params, db, "ex3")
    mysql_exec(db, "ALTER TABLE ex3 ADD COLUMN w INT", "INSERT INTO ex3 VALUES (4,4,4)",
               "UPDATE ex3 SET v=22 WHERE id=2")
    before_truncate = _mysql_state(mysql_params, db, "ex3")
    mysql_exec(db, "TRUNCATE TABLE ex3", "INSERT INTO ex3 VALUES (5,5,5)")
    run_pipeline(p1, until_caught_up=True)
    expected = before_truncate if exclude else before_alter
    seen = []
    for _ in range(2):  # a restart stops at the same change, and the lake does not move
        with pytest.raises(SchemaChangeError) as err:
            run_pipeline(p2, until_caught_up=True)
        assert f"{db}.ex3" in str(err.value) and f"schema change {refused}" in str(err.value)
        names, rows = _lake(p2, t)
        assert names == ["id", "v"]  # the ADD COLUMN never reached the lake (excluded, or refused)
        assert rows == expected
        seen.append((rows, _committed(p2, t)))
    assert seen[0] == seen[1]


def test_exception_on_a_hash_by_key_topic_stops_with_every_partition_at_the_truncate(
        database_factory, mysql_exec, mysql_params, pipeline_pair):
    """Pipeline 1 writes a TRUNCATE into each of the 3 partitions; each partition's rows before its
    copy precede the TRUNCATE, so the lake holds them all, whatever order the partitions are polled in."""
    db = database_factory()
    mysql_exec(db, "CREATE TABLE ex3(id INT PRIMARY KEY, v INT)", "INSERT INTO ex3 VALUES (1,1),(2,2)")
    p1, p2 = pipeline_pair(db, ["ex3"], p1_extra={"partition.strategy": "hash-by-key", "sink.topic.partitions": 3})
    p2 = _with(p2, "exception")
    t = TableId(db, "ex3")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "INSERT INTO ex3 VALUES " + ",".join(f"({i},{i})" for i in range(3, 40)),
               "UPDATE ex3 SET v = v + 100 WHERE id % 3 = 0", "DELETE FROM ex3 WHERE id % 5 = 0")
    before_truncate = _mysql_state(mysql_params, db, "ex3")
    mysql_exec(db, "TRUNCATE TABLE ex3", "INSERT INTO ex3 VALUES (100,100),(101,101),(102,102)")
    run_pipeline(p1, until_caught_up=True)
    seen = []
    for _ in range(2):
        with pytest.raises(SchemaChangeError, match="truncate.table"):
            run_pipeline(p2, until_caught_up=True)
        assert _lake(p2, t)[1] == before_truncate
        seen.append(_committed(p2, t))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("batch_size", [7, 1000])
def test_exception_on_a_hash_by_key_topic_never_moves_a_partition_past_a_refused_column_change(
        database_factory, mysql_exec, mysql_params, pipeline_pair, batch_size):
    """A column change has no copy in every partition (unlike a TRUNCATE): each partition is cut at
    its own first record with the new definition; a partition whose records after the ALTER the
    stopping round had not read yet may stop short of MySQL's state before the ALTER, never past it.
    Every lake row is a state the row had before the ALTER, and a relaunch does not move the lake."""
    db = database_factory()
    mysql_exec(db, "CREATE TABLE ex4(id INT PRIMARY KEY, v INT)", "INSERT INTO ex4 VALUES (1,1),(2,2)")
    p1, p2 = pipeline_pair(db, ["ex4"], p1_extra={"partition.strategy": "hash-by-key", "sink.topic.partitions": 3})
    p2 = _with(p2, "exception")
    t = TableId(db, "ex4")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "INSERT INTO ex4 VALUES " + ",".join(f"({i},{i})" for i in range(3, 40)),
               "UPDATE ex4 SET v = v + 100 WHERE id % 3 = 0", "DELETE FROM ex4 WHERE id % 5 = 0")
    before_alter = {r["id"]: r["v"] for r in _mysql_state(mysql_params, db, "ex4")}
    earlier = {(i, i) for i in range(1, 40)} | {(i, i + 100) for i in range(1, 40) if i % 3 == 0}
    mysql_exec(db, "ALTER TABLE ex4 ADD COLUMN w INT", "UPDATE ex4 SET v = v + 1000, w = 1",
               "INSERT INTO ex4 VALUES (100,100,1),(101,101,1),(102,102,1)")
    run_pipeline(p1, until_caught_up=True)
    for _ in range(2):
        with pytest.raises(SchemaChangeError) as err:
            run_pipeline(p2, until_caught_up=True, batch_size=batch_size)
        assert f"{db}.ex4" in str(err.value) and "schema change add.column of column 'w'" in str(err.value)
        names, rows = _lake(p2, t)
        assert names == ["id", "v"]
        lake = {(r["id"], r["v"]) for r in rows}
        assert lake <= earlier, f"past the ALTER: {sorted(lake - earlier)}"  # no state after the ALTER
        assert all(v < 1000 for _, v in lake) and not any(i >= 100 for i, _ in lake)
        # a key the lake holds that MySQL had deleted before the ALTER: its partition stopped short
        assert {i for i, _ in lake} - set(before_alter) <= {i for i in range(1, 40) if i % 5 == 0}
    # nothing was lost at the cut: with the mode changed the lake catches up to MySQL
    p2 = _with(p2, "evolve")
    run_pipeline(p2, until_caught_up=True, batch_size=batch_size)
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, str(result.metadata())


@pytest.mark.parametrize("behavior", [None, "exception", "evolve", "ignore"])
def test_modify_to_a_narrower_type_is_handled_by_the_mode_never_silently(database_factory, mysql_exec, mysql_params,
                                                                         pipeline_pair, behavior, caplog):
    """``MODIFY v INT`` on a BIGINT column: ``exception`` stops naming the table, the column and
    both types; the other modes write the values into the wider lake column (logged under an
    explicit mode) and the lake equals MySQL."""
    import logging

    db = database_factory()
    mysql_exec(db, "CREATE TABLE nr(id INT PRIMARY KEY, v BIGINT)", "INSERT INTO nr VALUES (1, 10), (2, 20)")
    p1, p2 = pipeline_pair(db, ["nr"])
    p2 = _with(p2, behavior)
    t = TableId(db, "nr")
    run_pipeline(p1, until_caught_up=True)
    run_pipeline(p2, until_caught_up=True)
    mysql_exec(db, "ALTER TABLE nr MODIFY v INT", "INSERT INTO nr VALUES (3, 30)", "UPDATE nr SET v = 11 WHERE id = 1")
    run_pipeline(p1, until_caught_up=True)
    if behavior == "exception":
        with pytest.raises(SchemaChangeError) as err:
            run_pipeline(p2, until_caught_up=True)
        message = str(err.value)
        assert f"{db}.nr" in message and "alter.column.type of column 'v'" in message
        assert "int" in message.lower().split("column 'v'")[1]  # both types (Paimon spells them in capitals)
        assert _lake(p2, t)[1] == [{"id": 1, "v": 10}, {"id": 2, "v": 20}]
        return
    with caplog.at_level(logging.INFO, logger="changelake.connectors.lake.schema_change"):
        run_pipeline(p2, until_caught_up=True)
    if behavior is not None:  # (the default mode writes it into the wider column as documented, unlogged)
        assert any("'v' narrowed" in r.getMessage() for r in caplog.records)
    arrow = read_lake_table(p2, t)
    assert str(arrow.schema.field("v").type) == "int64"  # kept wider
    result = verify_lake_table(p2, t, mysql=mysql_params)
    assert result.passed, str(result.metadata())
