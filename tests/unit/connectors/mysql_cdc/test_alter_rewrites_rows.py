"""Which ALTER TABLE statements change what the existing rows show without binlog rows (issue 17):
the source re-reads those tables right after them."""

from __future__ import annotations

import pytest

from changelake.changelog.schema import TableId
from changelake.connectors.mysql_cdc.schema.statements import added_column_fills_rows


@pytest.mark.parametrize("query, table", [
    ("ALTER TABLE t ADD COLUMN w INT DEFAULT 5", TableId("d", "t")),
    ("alter table db.`t 2` add w varchar(3) default 'x'", TableId("db", "t 2")),
    ("ALTER TABLE t ADD COLUMN IF NOT EXISTS w INT DEFAULT 1", TableId("d", "t")),
    ("ALTER TABLE t ADD COLUMN w INT NOT NULL", TableId("d", "t")),  # the type's implicit default (0)
    ("ALTER TABLE t ADD (a INT, b INT DEFAULT 2)", TableId("d", "t")),
    ("ALTER TABLE t ADD w INT AS (v + 1) PERSISTENT", TableId("d", "t")),
    ("ALTER TABLE t ADD seq BIGINT AUTO_INCREMENT UNIQUE", TableId("d", "t")),
    ("/* c */ ALTER ONLINE TABLE t ADD w INT DEFAULT 0;", TableId("d", "t")),
    ("ALTER TABLE t RENAME COLUMN a TO b", TableId("d", "t")),
    ("ALTER TABLE t CHANGE a b INT", TableId("d", "t")),
])
def test_alters_that_fill_or_rename_name_their_table(query, table):
    assert added_column_fills_rows(query, "d") == table


@pytest.mark.parametrize("query", [
    "ALTER TABLE t ADD COLUMN w INT",
    "ALTER TABLE t ADD COLUMN w INT DEFAULT NULL",
    "ALTER TABLE t ADD INDEX i (v), MODIFY v INT DEFAULT 1",  # a default change leaves old rows as they are
    "ALTER TABLE t ADD CONSTRAINT c CHECK (v > 0)",
    "ALTER TABLE t DROP COLUMN w",
    "ALTER TABLE t CHANGE COLUMN `a` `a` BIGINT",
    "ALTER TABLE t RENAME TO u",
    "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL DEFAULT 1)",
    "INSERT INTO t VALUES (1)",
])
def test_other_statements_do_not(query):
    assert added_column_fills_rows(query, "d") is None

