"""Parsing RENAME TABLE / ALTER TABLE ... RENAME (pure logic; end to end: tests/integration/pipelines/test_rename_table.py)."""

from changelake.changelog import TableId
from changelake.connectors.mysql_cdc.binlog.event_handler import renamed_tables
from changelake.connectors.mysql_cdc.schema.statements import parse_table_renames


def T(db: str, t: str) -> TableId:
    return TableId(db, t)


def test_rename_table_pairs_in_order_with_default_and_quoted_databases():
    assert parse_table_renames("RENAME TABLE a TO b, `x`.`odd``name` TO y.z", "d") == [
        (T("d", "a"), T("d", "b")), (T("x", "odd`name"), T("y", "z"))]
    assert parse_table_renames("/* c */ rename tables a to b;", "d") == [(T("d", "a"), T("d", "b"))]
    assert parse_table_renames("RENAME TABLE a TO b", None) == []  # no database to name them


def test_alter_table_rename_clause_but_not_rename_column_or_index():
    assert parse_table_renames("ALTER TABLE t RENAME TO u", "d") == [(T("d", "t"), T("d", "u"))]
    assert parse_table_renames("ALTER TABLE t RENAME u", "d") == [(T("d", "t"), T("d", "u"))]
    assert parse_table_renames("ALTER TABLE t ADD c INT, RENAME AS e.u", "d") == [(T("d", "t"), T("e", "u"))]
    for q in ("ALTER TABLE t RENAME COLUMN a TO b", "ALTER TABLE t RENAME INDEX a TO b", "ALTER TABLE t RENAME KEY a TO b",
              "ALTER TABLE t COMMENT 'x, RENAME TO z'", "ALTER TABLE t MODIFY a INT", "DROP TABLE a", "RENAME USER a TO b"):
        assert parse_table_renames(q, "d") == [], q


def test_a_swap_through_a_temporary_name_drops_and_re_reads_both_names_never_the_temporary_one():
    a, b, tmp = T("d", "a"), T("d", "b"), T("d", "tmp")
    assert renamed_tables([(a, tmp), (b, a), (tmp, b)]) == ([a, b], [a, b])
    assert renamed_tables([(a, b)]) == ([a], [b])
    gho, old = T("d", "_t_gho"), T("d", "_t_del")
    assert renamed_tables([(a, old), (gho, a)]) == ([a, gho], [old, a])
