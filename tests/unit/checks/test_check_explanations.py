"""Failed checks explain themselves: a Markdown table of sample keys (MySQL vs lake), the next step;
freshness also compares Pipeline 1's captured binlog position with MySQL's."""

from __future__ import annotations

import pyarrow as pa

from changelake.checks.key_state import compare_key_state, next_step
from changelake.checks.source_position import source_gap
from changelake.pipeline.lake_checks import Freshness


def test_samples_markdown_lists_mysql_and_lake_values():
    source = pa.table({"id": [1, 2, 3], "name": ["a|b", "x", "y"]})
    lake = pa.table({"id": [1, 3, 4], "name": ["old", "y", "z"]})
    c = compare_key_state(lake, source, ["id"])
    md = c.samples_markdown().splitlines()
    assert md[0] == "| key | difference | column | MySQL | lake |"
    assert "| id=1 | value differs | name | a\\|b | old |" in md
    assert "| id=2 | missing in lake |  | (row) | (absent) |" in md
    assert "| id=4 | extra in lake |  | (absent) | (row) |" in md
    assert compare_key_state(source, source, ["id"]).samples_markdown() == ""
    assert c.samples_markdown(limit=1).endswith("1 sample line(s) of 3 differing key(s).")


def test_next_step_says_what_to_do():
    assert next_step(True) == ""
    assert next_step(False).startswith("Run the pipelines until caught up")
    assert "more than once" in next_step(False, duplicate_keys_lake=2)


def test_source_gap_orders_binlog_positions():
    assert source_gap({"file": "mysql-bin.000002", "pos": 10}, ("mysql-bin.000002", 10)).behind is False
    assert source_gap({"file": "mysql-bin.000002", "pos": 10}, ("mysql-bin.000002", 99)).behind is True
    assert source_gap({"file": "mysql-bin.000001", "pos": 900}, ("mysql-bin.000002", 4)).behind is True
    assert source_gap(None, ("mysql-bin.000001", 4)).captured == "none"


def test_freshness_fails_when_behind_mysql_and_stale():
    behind = source_gap({"file": "f.000001", "pos": 1}, ("f.000001", 5))
    assert not Freshness(lag=0, last_commit_age_s=600.0, max_age_s=300.0, source=behind).passed
    assert Freshness(lag=0, last_commit_age_s=10.0, max_age_s=300.0, source=behind).passed  # being worked off
    assert Freshness(lag=0, last_commit_age_s=600.0, max_age_s=300.0).passed
    md = Freshness(lag=0, last_commit_age_s=600.0, max_age_s=300.0, source=behind).metadata()
    assert md["behind_mysql"] is True and md["mysql_position"] == "f.000001:5" and md["captured_position"] == "f.000001:1"


def test_freshness_says_when_mysql_could_not_be_compared():
    md = Freshness(lag=0, last_commit_age_s=1.0, max_age_s=300.0, source_error="OperationalError: (2003, ...)").metadata()
    assert md["mysql_position"] == "not compared (OperationalError: (2003, ...))"
