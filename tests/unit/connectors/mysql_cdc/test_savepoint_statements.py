"""Savepoint statements as MariaDB logs them (pure parsing; the binlog behaviour is tested on a
real server in tests/integration/pipelines/test_ddl_and_transactions.py)."""

from __future__ import annotations

import pytest

from changelake.connectors.mysql_cdc.schema.statements import StatementKind, classify, savepoint_action


@pytest.mark.parametrize(
    "query, expected",
    [
        ("SAVEPOINT `sp1`", ("set", "sp1")),
        ("SAVEPOINT sp1", ("set", "sp1")),
        ("ROLLBACK TO `sp1`", ("rollback", "sp1")),
        ("rollback work to savepoint SP1", ("rollback", "sp1")),
        ("ROLLBACK TO SAVEPOINT `a``b`", ("rollback", "a`b")),
        ("RELEASE SAVEPOINT c", ("release", "c")),
        ("/* x */ SAVEPOINT s;", ("set", "s")),
        ("ROLLBACK", None),
        ("COMMIT", None),
    ],
)
def test_savepoint_action(query, expected):
    assert savepoint_action(query) == expected
    if expected is not None:
        assert classify(query) is StatementKind.SAVEPOINT
