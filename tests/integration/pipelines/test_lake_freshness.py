"""The freshness check reads each lake's last commit time (Iceberg snapshot, Paimon snapshot)."""

from __future__ import annotations

import pytest

from changelake.changelog import TableId
from changelake.pipeline.lake_checks import check_freshness
from changelake.pipeline.runner import run_pipeline

pytestmark = pytest.mark.integration


def test_a_caught_up_lake_is_fresh_and_names_its_commit_age(database_factory, mysql_exec, pipeline_pair):
    db = database_factory()
    mysql_exec(db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)")
    p1, p2 = pipeline_pair(db, ["t"])
    run_pipeline(p1, until_caught_up=True)
    behind = check_freshness(p2, TableId(db, "t"))  # two change events in Kafka, none in the lake
    assert behind.lag > 0 and behind.last_commit_age_s is None and not behind.passed
    run_pipeline(p2, until_caught_up=True)
    after = check_freshness(p2, TableId(db, "t"))
    assert after.lag == 0 and after.last_commit_age_s is not None and after.last_commit_age_s < 120
    assert after.passed
