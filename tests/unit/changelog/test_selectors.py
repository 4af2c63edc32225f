"""Flink CDC ``tables`` selector syntax (Selectors / Predicates in flink-cdc-common)."""

import pytest

from changelake.changelog.schema import TableId
from changelake.changelog.selectors import SelectorError, Selectors, split_unescaped


@pytest.mark.parametrize(
    "pattern, table, expected",
    [
        (r"kafka_test.\.*", TableId("kafka_test", "customers"), True),
        (r"kafka_test.\.*", TableId("other", "customers"), False),
        ("kafka_test.customers", TableId("KAFKA_TEST", "Customers"), True),  # case-insensitive
        ("kafka_test.cust", TableId("kafka_test", "customers"), False),  # full match, not search
        (r"bdb.user_table_[0-9]+", TableId("bdb", "user_table_12"), True),
        (r"bdb.user_table_[0-9]+", TableId("bdb", "user_table_x"), False),
        (r"[app|web].order_\.*", TableId("app", "order_1"), False),  # char class: one char
        (r"(app|web).order_\.*", TableId("web", "order_1"), True),
        ("db1.t1, db2.t2", TableId("db2", "t2"), True),
        ("db1.t1, db2.t2", TableId("db1", "t2"), False),
        # a one-part selector only matches tables without a database
        ("customers", TableId("kafka_test", "customers"), False),
        ("customers", TableId(None, "customers"), True),
        # a two-part selector matches a database-less TableId by its table part
        ("db.customers", TableId(None, "customers"), True),
        # a bare dot is the separator, so "k.a" is db "k", table "a"
        ("kafka_test.a.b", TableId("kafka_test", "a"), False),
        (r"db.t\{1,3\}", TableId("db", "t"), False),
        (r"db.t{1\,3}", TableId("db", "ttt"), True),
    ],
)
def test_selector_matching(pattern, table, expected):
    assert Selectors.parse(pattern).matches(table) is expected


def test_escaped_dot_is_any_char_not_a_separator():
    sel = Selectors.parse(r"kafka_test.a\.c")
    assert sel.matches(TableId("kafka_test", "abc"))
    assert sel.selectors[0].database == "kafka_test"
    assert sel.selectors[0].table == "a.c"


def test_split_unescaped_keeps_other_escapes():
    assert split_unescaped(r"a\.b.c\d", ".") == ["a.b", r"c\d"]
    assert split_unescaped(r" x\,y , z ,,", ",") == ["x,y", "z"]


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("", "Invalid table inclusion pattern cannot be null or empty"),
        ("a.b.c.d", "Invalid table inclusion pattern: a.b.c.d"),
        ("db.(unclosed", "Invalid regular expression '(unclosed' in table pattern 'db.(unclosed'"),
        ("db.t\\", "Unterminated escape sequence"),
    ],
)
def test_selector_errors(pattern, message):
    with pytest.raises(SelectorError) as info:
        Selectors.parse(pattern)
    assert message in str(info.value)


def test_three_part_selector_matches_two_part_table_ids_on_its_last_parts():
    # As Flink CDC's Selector.isMatch: without a namespace only schema and table are compared.
    sel = Selectors.parse("ns.db.t")
    assert sel.matches(TableId("db", "t"))
    assert not sel.matches(TableId("ns", "db"))
