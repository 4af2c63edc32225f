"""One writing pipeline per lake table, for tables found only at run time: a pipeline reading a
``topic-pattern`` stops before its first commit of a table another pipeline of the folder (same
lake) lists or has written, naming both pipelines and the table; the lake table stays untouched.
Real Kafka and MariaDB, both lakes (README "One writing pipeline per lake table")."""

from __future__ import annotations

import re

import pytest
import yaml

from changelake.changelog import TableId
from changelake.connectors.errors import OptionValidationError
from changelake.pipeline.definition import load_pipeline
from changelake.pipeline.discovery import discovered_tables
from changelake.pipeline.files import load_pipelines
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table

pytestmark = pytest.mark.integration


def _file(folder, name: str, p2, source: dict) -> object:
    """A Pipeline 2 file named ``name`` in ``folder``: ``p2``'s sink and transform, ``source``."""
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "pipeline": {"name": name}, "source": source, "sink": dict(p2.sink), "transform": [dict(t) for t in p2.transform],
    }), encoding="utf-8")
    return path


def _rows(defn, table: TableId) -> list[dict]:
    try:
        return read_lake_table(defn, table).to_pylist()
    except Exception:  # the table does not exist
        return []


@pytest.fixture
def setting(database_factory, mysql_exec, pipeline_pair, tmp_path, monkeypatch):
    """(db, Pipeline 2 as built by the fixture, the pipelines folder): MySQL table ``a`` with two
    rows, already in Kafka topic ``<db>.a``."""
    folder = tmp_path / "pipelines"
    folder.mkdir()
    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(folder))
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    db = database_factory()
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY, v INT)", "INSERT INTO a VALUES (1, 1), (2, 2)")
    p1, p2 = pipeline_pair(db, ["a"])
    run_pipeline(p1, until_caught_up=True)
    return db, p2, folder


def _pattern_source(p2, db: str) -> dict:
    source = {k: v for k, v in p2.source.items() if k != "topic"}
    source["topic-pattern"] = re.escape(db) + r"\..*"
    return source


def test_a_pattern_pipeline_stops_before_writing_a_table_another_pipeline_lists(setting):
    db, p2, folder = setting
    _file(folder, f"owner-{db}", p2, dict(p2.source))  # lists topic <db>.a literally
    finder = load_pipeline(_file(folder, f"finder-{db}", p2, _pattern_source(p2, db)), env={})
    # the folder loads: the pattern's tables are not known before a run
    assert len(load_pipelines()) == 2

    with pytest.raises(OptionValidationError) as caught:
        run_pipeline(finder, until_caught_up=True)
    message = str(caught.value)
    assert f"pipeline 'finder-{db}' found lake table {db}.a" in message
    assert f"pipeline 'owner-{db}'" in message and "before its first commit" in message
    assert _rows(finder, TableId(db, "a")) == []  # nothing written
    assert TableId(db, "a") not in discovered_tables(finder.name)

    # the owner runs as before
    owner = load_pipeline(folder / f"owner-{db}.yaml", env={})
    run_pipeline(owner, until_caught_up=True)
    assert sorted(r["id"] for r in _rows(owner, TableId(db, "a"))) == [1, 2]


def test_of_two_pattern_pipelines_the_second_to_find_a_table_stops(setting):
    db, p2, folder = setting
    first = load_pipeline(_file(folder, f"first-{db}", p2, _pattern_source(p2, db)), env={})
    second = load_pipeline(_file(folder, f"second-{db}", p2, _pattern_source(p2, db)), env={})

    run_pipeline(first, until_caught_up=True)
    assert sorted(r["id"] for r in _rows(first, TableId(db, "a"))) == [1, 2]
    assert TableId(db, "a") in discovered_tables(first.name)

    with pytest.raises(OptionValidationError) as caught:
        run_pipeline(second, until_caught_up=True)
    message = str(caught.value)
    assert f"pipeline 'second-{db}' found lake table {db}.a" in message and f"pipeline 'first-{db}'" in message
    assert sorted(r["id"] for r in _rows(first, TableId(db, "a"))) == [1, 2]  # untouched by the second
    assert TableId(db, "a") not in discovered_tables(second.name)
    # so the folder still loads (before, the second's run wrote the table and the next load failed)
    assert len(load_pipelines()) == 2


def test_a_mysql_to_lake_pipeline_with_a_tables_pattern_stops_likewise(database_factory, mysql_exec, direct_pipeline,
                                                                       pipeline_pair, tmp_path, monkeypatch):
    # the other path into a lake: MySQL straight to the lake (LakePositionSink), tables by pattern
    folder = tmp_path / "pipelines"
    folder.mkdir()
    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(folder))
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    db = database_factory()
    mysql_exec(db, "CREATE TABLE a (id INT PRIMARY KEY, v INT)", "INSERT INTO a VALUES (1, 1)")
    _, p2 = pipeline_pair(db, ["a"])
    _file(folder, f"owner-{db}", p2, dict(p2.source))  # a Kafka -> lake pipeline listing <db>.a, same lake
    direct = direct_pipeline(db, name=f"direct-{db}")  # tables: <db>.\.*
    assert dict(direct.sink) == dict(p2.sink)
    with pytest.raises(OptionValidationError, match=f"pipeline 'direct-{db}' found lake table {db}.a, which pipeline "
                                                    f"'owner-{db}'"):
        run_pipeline(direct, until_caught_up=True)
    assert _rows(direct, TableId(db, "a")) == []
