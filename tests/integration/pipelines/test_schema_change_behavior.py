"""``pipeline.schema.change.behavior`` and ``include/exclude.schema.changes`` on a real pipeline
(MariaDB -> Pipeline 1 -> Kafka -> Pipeline 2 -> Iceberg / Paimon), with Flink CDC's meanings."""

from __future__ import annotations

import json
import logging
import re
import traceback
import uuid
from dataclasses import dataclass, replace

import pytest

from changelake.changelog import TableId
from changelake.connectors.lake.schema_change import SchemaChangeError
from changelake.errors import ChangelakeError
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table, verify_lake_table
from lake_blocks import LAKES, lake_sink, pair, run_sql

pytestmark = pytest.mark.integration


def _with(p2, behavior=None, **sink):
    pipeline = dict(p2.pipeline)
    if behavior:
        pipeline["schema.change.behavior"] = behavior
    return replace(p2, pipeline=pipeline, sink={**p2.sink, **sink})


def _lake(p2, t):
    arrow = read_lake_table(p2, t)
    return arrow.schema.names, sorted(arrow.to_pylist(), key=lambda r: r["id"])


@dataclass
class _Run:
    """One Pipeline 2 run of a shared scenario (:func:`_shared_runs`): what it raised, the messages
    it logged at INFO or above on ``changelake.connectors.lake.schema_change``, then the lake
    table's column names, Arrow types and rows (sorted by ``id``), and, when the stage asks,
    whether the key-state check against MySQL passed right after the run."""

    error: BaseException | None
    logged: list[str]
    names: list[str]
    types: dict[str, str]
    rows: list[dict]
    passed: bool | None = None
    check: str = ""  # the key-state check's metadata

    def why(self) -> str:
        return "".join(traceback.format_exception(self.error)) if self.error else "no error"


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _shared_runs(mysql_params, kafka_bootstrap, tmp_path_factory, create, stages, variants, table="t"):
    """The runs of several cases that differ only in Pipeline 2's options: in one fresh database,
    ``create`` (of ``table``) then each stage's statements, each followed by one run of Pipeline 1
    (caught up) and one run (caught up) of every variant's Pipeline 2 that has not raised yet --
    each its own pipeline name, consumer group and lake, all reading the one topic -- exactly the
    sequence each case ran in a test of its own; MySQL and Pipeline 1 do that work once instead
    of once per case.

    Args:
        create: statements creating and filling ``table``.
        stages: ``(statements, verify)`` per stage after the first; with ``verify`` each Pipeline 2
            run of that stage is followed by the key-state check against MySQL.
        variants: ``{key: (lake, schema.change.behavior or None, extra sink options)}``.

    Returns:
        ``(db, {key: [_Run]})``: a run per stage a variant reached (the first run, then one per
        stage); a variant whose run raised runs no further, as its test returned there.
    """
    db = f"db_{uuid.uuid4().hex[:12]}"
    run_sql(mysql_params, None, f"CREATE DATABASE `{db}`")
    run_sql(mysql_params, db, *create)
    p1 = None
    p2s = {}
    for key, (lake, behavior, sink) in variants.items():
        tmp = tmp_path_factory.mktemp("lake")
        p1, p2 = pair(mysql_params, kafka_bootstrap, lake_sink(lake, tmp), db, [table], name=f"it-{db}-{len(p2s)}")
        p2s[key] = _with(p2, behavior, **sink)
    runs: dict = {key: [] for key in variants}
    t = TableId(db, table)
    logger = logging.getLogger("changelake.connectors.lake.schema_change")

    def round_(verify: bool) -> None:
        run_pipeline(p1, until_caught_up=True)
        for key, p2 in p2s.items():
            if runs[key] and runs[key][-1].error is not None:
                continue
            handler, level = _Messages(), logger.level
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            try:
                run_pipeline(p2, until_caught_up=True)
                error = None
            except Exception as exc:  # noqa: BLE001 - the case's test asserts on it
                error = exc
            finally:
                logger.removeHandler(handler)
                logger.setLevel(level)
            arrow = read_lake_table(p2, t)
            check = verify_lake_table(p2, t, mysql=mysql_params) if verify and error is None else None
            runs[key].append(_Run(error, handler.messages, arrow.schema.names,
                                  {f.name: str(f.type) for f in arrow.schema},
                                  sorted(arrow.to_pylist(), key=lambda r: r["id"]),
                                  None if check is None else check.passed,
                                  "" if check is None else str(check.metadata())))

    try:
        round_(False)
        for statements, verify in stages:
            run_sql(mysql_params, db, *statements)
            round_(verify)
        yield db, runs
    finally:
        run_sql(mysql_params, None, f"DROP DATABASE IF EXISTS `{db}`")


BEHAVIORS = [None, "exception", "evolve", "try_evolve", "lenient", "ignore"]


@pytest.fixture(scope="module")
def each_behavior_runs(mysql_params, kafka_bootstrap, tmp_path_factory):
    """The runs of :func:`test_each_schema_change_behavior_on_a_real_pipeline`, every (lake, behavior)."""
    yield from _shared_runs(
        mysql_params, kafka_bootstrap, tmp_path_factory,
        ["CREATE TABLE t(id INT PRIMARY KEY, a VARCHAR(10), b INT)", "INSERT INTO t VALUES (1,'1',10),(2,'2',20)"],
        [(["ALTER TABLE t ADD COLUMN c INT", "INSERT INTO t VALUES (3,'3',30,300)",
           "ALTER TABLE t DROP COLUMN b", "INSERT INTO t VALUES (4,'4',400)"], True),
         # an incompatible type change (VARCHAR -> INT)
         (["ALTER TABLE t MODIFY a INT", "INSERT INTO t (id, a, c) VALUES (5, 5, 500)"], False)],
        {(lake, behavior): (lake, behavior, {}) for lake in LAKES for behavior in BEHAVIORS})


@pytest.mark.parametrize("behavior", BEHAVIORS)
def test_each_schema_change_behavior_on_a_real_pipeline(each_behavior_runs, lake, behavior):
    db, runs = each_behavior_runs
    first, changed, *modified = runs[(lake, behavior)]
    assert first.error is None, first.why()
    if behavior == "exception":
        assert isinstance(changed.error, SchemaChangeError), changed.why()
        assert f"{db}.t" in str(changed.error) and "add.column of column 'c'" in str(changed.error)
        assert changed.names == ["id", "a", "b"] and [r["id"] for r in changed.rows] == [1, 2]  # not past the change
        assert not modified
        return
    assert changed.error is None, changed.why()
    names, by_id = changed.names, {r["id"]: r for r in changed.rows}
    assert sorted(by_id) == [1, 2, 3, 4]  # rows keep flowing in every mode
    if behavior == "ignore":
        assert names == ["id", "a", "b"]  # the lake schema is kept
        assert by_id[3]["b"] == 30 and by_id[4]["b"] is None
    elif behavior in ("evolve", "try_evolve"):
        assert names == ["id", "a", "c"]  # drop.column applied
        assert by_id[4]["c"] == 400
        assert changed.passed, changed.check
    else:  # default and lenient: the dropped column stays, NULL from then on
        assert names == ["id", "a", "b", "c"]
        assert by_id[3]["b"] == 30 and by_id[4]["b"] is None and by_id[4]["c"] == 400
        assert changed.passed, changed.check

    # an incompatible type change (VARCHAR -> INT)
    (modified,) = modified
    if behavior in (None, "evolve"):  # the lake cannot widen string to int: stop, never silently
        assert isinstance(modified.error, ChangelakeError) and re.search("'a'", str(modified.error)), modified.why()
        assert sorted(r["id"] for r in modified.rows) == [1, 2, 3, 4]
        return
    assert modified.error is None, modified.why()
    names, by_id = modified.names, {r["id"]: r for r in modified.rows}
    assert by_id[5].get("c") == (None if behavior == "ignore" else 500)
    if behavior == "lenient":  # the old column stays, a new one takes the new type
        assert "a_int" in names and by_id[5]["a_int"] == 5 and by_id[5]["a"] is None
    else:  # try_evolve, ignore: the lake type stays, the value is NULL
        assert "a_int" not in names and by_id[5]["a"] is None


TRUNCATE_CASES = [
    ("lenient", {}, [1, 2, 3]),  # Flink's lenient ignores TRUNCATE (not changelake's default)
    (None, {"exclude.schema.changes": "[truncate.table]"}, [1, 2, 3]),
    ("lenient", {"exclude.schema.changes": "[drop.table]"}, [3]),  # an explicit exclude overrides (FLINK-36514)
    ("evolve", {"include.schema.changes": "[table]"}, [3]),
    ("ignore", {}, [1, 2, 3]),
    ("exception", {}, None),
]


@pytest.fixture(scope="module")
def truncate_runs(mysql_params, kafka_bootstrap, tmp_path_factory):
    """The runs of :func:`test_truncate_per_mode_and_include_exclude`, every (lake, case)."""
    yield from _shared_runs(
        mysql_params, kafka_bootstrap, tmp_path_factory,
        ["CREATE TABLE t(id INT PRIMARY KEY)", "INSERT INTO t VALUES (1),(2)"],
        [(["TRUNCATE TABLE t", "INSERT INTO t VALUES (3)"], False)],
        {(lake, behavior, json.dumps(sink)): (lake, behavior, sink)
         for lake in LAKES for behavior, sink, _ in TRUNCATE_CASES})


@pytest.mark.parametrize("behavior, sink, expected", TRUNCATE_CASES)
def test_truncate_per_mode_and_include_exclude(truncate_runs, lake, behavior, sink, expected):
    _, runs = truncate_runs
    first, truncated = runs[(lake, behavior, json.dumps(sink))]
    assert first.error is None, first.why()
    if expected is None:
        assert isinstance(truncated.error, SchemaChangeError) and "truncate.table" in str(truncated.error), \
            truncated.why()
        assert sorted(r["id"] for r in truncated.rows) == [1, 2]
        return
    assert truncated.error is None, truncated.why()
    assert sorted(r["id"] for r in truncated.rows) == expected


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


NARROW_BEHAVIORS = [None, "exception", "evolve", "ignore"]


@pytest.fixture(scope="module")
def narrow_runs(mysql_params, kafka_bootstrap, tmp_path_factory):
    """The runs of :func:`test_modify_to_a_narrower_type_is_handled_by_the_mode_never_silently`."""
    yield from _shared_runs(
        mysql_params, kafka_bootstrap, tmp_path_factory,
        ["CREATE TABLE nr(id INT PRIMARY KEY, v BIGINT)", "INSERT INTO nr VALUES (1, 10), (2, 20)"],
        [(["ALTER TABLE nr MODIFY v INT", "INSERT INTO nr VALUES (3, 30)", "UPDATE nr SET v = 11 WHERE id = 1"], True)],
        {(lake, behavior): (lake, behavior, {}) for lake in LAKES for behavior in NARROW_BEHAVIORS}, table="nr")


@pytest.mark.parametrize("behavior", NARROW_BEHAVIORS)
def test_modify_to_a_narrower_type_is_handled_by_the_mode_never_silently(narrow_runs, lake, behavior):
    """``MODIFY v INT`` on a BIGINT column: ``exception`` stops naming the table, the column and
    both types; the other modes write the values into the wider lake column (logged under an
    explicit mode) and the lake equals MySQL."""
    db, runs = narrow_runs
    first, narrowed = runs[(lake, behavior)]
    assert first.error is None, first.why()
    if behavior == "exception":
        assert isinstance(narrowed.error, SchemaChangeError), narrowed.why()
        message = str(narrowed.error)
        assert f"{db}.nr" in message and "alter.column.type of column 'v'" in message
        assert "int" in message.lower().split("column 'v'")[1]  # both types (Paimon spells them in capitals)
        assert narrowed.rows == [{"id": 1, "v": 10}, {"id": 2, "v": 20}]
        return
    assert narrowed.error is None, narrowed.why()
    if behavior is not None:  # (the default mode writes it into the wider column as documented, unlogged)
        assert any("'v' narrowed" in m for m in narrowed.logged), narrowed.logged
    assert narrowed.types["v"] == "int64"  # kept wider
    assert narrowed.passed, narrowed.check
