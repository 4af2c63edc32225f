"""Flink CDC route rules (TableIdRouter): ALL_MATCH / FIRST_MATCH, replace-symbol, $n groups."""

import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.route import RouteError, RouteMode, RouteRule, Router, parse_route_rules
from changelake.changelog.schema import TableId


def test_merge_shards_into_one_table():
    router = Router([RouteRule(r"app_db.order_\.*", "ods_db.ods_orders")])
    assert router.route(TableId("app_db", "order_01")) == [TableId("ods_db", "ods_orders")]
    assert router.route(TableId("app_db", "order_02")) == [TableId("ods_db", "ods_orders")]


def test_unmatched_table_keeps_its_id():
    router = Router([RouteRule("a.b", "c.d")])
    assert router.route(TableId("x", "y")) == [TableId("x", "y")]


def test_replace_symbol_uses_source_table_name():
    router = Router([RouteRule(r"source_db.\.*", "sink_db.<>", replace_symbol="<>")])
    assert router.route(TableId("source_db", "orders")) == [TableId("sink_db", "orders")]


def test_regex_groups_in_sink_table():
    router = Router([RouteRule(r"db_(\d+).tbl_(\.*)", "ods.t_$2_$1")])
    assert router.route(TableId("db_7", "tbl_users")) == [TableId("ods", "t_users_7")]


def test_unknown_group_reference_fails():
    router = Router([RouteRule(r"db_(\d+).t", "ods.x_$2")])
    with pytest.raises(RouteError, match=r"refers to \$2 but source-table"):
        router.route(TableId("db_1", "t"))


def test_all_match_fans_out_first_match_does_not():
    rules = [RouteRule(r"db.\.*", "a.all"), RouteRule("db.t1", "b.one")]
    assert Router(rules).route(TableId("db", "t1")) == [TableId("a", "all"), TableId("b", "one")]
    assert Router(rules, RouteMode.FIRST_MATCH).route(TableId("db", "t1")) == [TableId("a", "all")]
    assert Router(rules, "first_match").route(TableId("db", "t2")) == [TableId("a", "all")]


def test_route_event_readdresses_the_event():
    ev = DataChangeEvent(TableId("db", "t1"), Op.CREATE, None, {"id": 1})
    out = Router([RouteRule("db.t1", "x.y")]).route_event(ev)
    assert [e.table for e in out] == [TableId("x", "y")]
    assert out[0].after == {"id": 1}


def test_parse_route_rules_from_yaml_mapping():
    rules = parse_route_rules([{"source-table": "db.t", "sink-table": "x.y", "description": "d"}])
    assert rules[0].sink_table == "x.y"
    with pytest.raises(RouteError, match=r"Unsupported keys \['sink'\] in route rule"):
        parse_route_rules([{"source-table": "db.t", "sink": "x.y"}])
    with pytest.raises(RouteError, match="needs 'sink-table'"):
        parse_route_rules([{"source-table": "db.t"}])


def test_bad_regex_names_the_rule():
    with pytest.raises(RouteError, match="Failed to parse regular expression in routing rule"):
        RouteRule("db.(x", "a.b")


# -- which sink tables merge several source tables (a routed truncate must not wipe the others) ----
def test_a_pattern_or_two_rules_into_one_fixed_sink_table_merge():
    ods = TableId("ods", "orders")
    shards = Router([RouteRule(r"app.order_\.*", "ods.orders")])
    assert shards.merged_into(TableId("app", "order_01"), ods) is not None
    listed = Router([RouteRule("app.a, app.b", "ods.orders")])
    assert listed.merged_into(TableId("app", "a"), ods) is not None
    two = Router([RouteRule("app.a", "ods.orders"), RouteRule("app.b", "ods.orders")])
    assert two.merged_into(TableId("app", "a"), ods).source_table == "app.b"


def test_one_table_per_sink_table_is_no_merge():
    assert Router([RouteRule("app.a", "ods.a")]).merged_into(TableId("app", "a"), TableId("ods", "a")) is None
    assert Router([RouteRule("APP.A", "ods.a")]).merged_into(TableId("app", "a"), TableId("ods", "a")) is None
    per_table = Router([RouteRule(r"app.\.*", "ods.<>", replace_symbol="<>")])
    assert per_table.merged_into(TableId("app", "a"), TableId("ods", "a")) is None
    groups = Router([RouteRule(r"app.t_(\.*)", "ods.$1")])
    assert groups.merged_into(TableId("app", "t_x"), TableId("ods", "x")) is None
    # an escaped dot is the regex token (any character, as Flink CDC's selectors): a pattern
    assert Router([RouteRule(r"app.a\.b", "ods.ab")]).merged_into(TableId("app", "a.b"), TableId("ods", "ab")) is not None
