"""Debezium's signal rows (signal.data.collection): parsing, the tables an execute-snapshot names,
the binlog reader's predicate with the signal table, and the option (no server needed)."""

import pickle

import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.mysql_cdc.factory import validate_options
from changelake.connectors.mysql_cdc.selectors import CapturedTables, TableSelectors
from changelake.connectors.mysql_cdc.snapshot.signals import Signal, SignalCaptured, parse_signal, snapshot_tables

SIG = TableId("ops", "sig")


def row(op=Op.CREATE, **values):
    return DataChangeEvent(SIG, op, None if op is Op.CREATE else values, values if op is not Op.DELETE else None)


def test_parse_signal_inserts_only_and_bad_data_ignored():
    s = parse_signal(row(id="1", type="execute-snapshot", data='{"data-collections": ["shop.a"]}'))
    assert s == Signal("1", "execute-snapshot", {"data-collections": ["shop.a"]})
    assert parse_signal(row(Op.UPDATE, id="1", type="execute-snapshot", data="{}")) is None
    assert parse_signal(row(Op.DELETE, id="1", type="execute-snapshot", data="{}")) is None
    assert parse_signal(row(id="2", type="execute-snapshot", data="not json")) is None
    assert parse_signal(row(id="3", type="execute-snapshot", data="[1]")) is None
    assert parse_signal(row(id="4", type="log", data=None)) == Signal("4", "log", {})
    assert parse_signal(row(id=None, type="log", data=None)) is None


def test_snapshot_tables_names_and_selectors_of_captured_tables_only():
    captured = [TableId("shop", "a"), TableId("shop", "b"), TableId("shop", "order_1")]
    sig = Signal("1", "execute-snapshot", {"data-collections": ["shop.b", "shop.order_.*", "other.x", "(unclosed", "shop.b"]})
    assert snapshot_tables(sig, captured) == ["shop.b", "shop.order_1"]
    assert snapshot_tables(Signal("2", "execute-snapshot", {}), captured) == []
    assert snapshot_tables(Signal("3", "execute-snapshot", {"data-collections": ["nope.x"]}), captured) == []


def test_reader_predicate_adds_the_signal_table_and_pickles():
    captured = CapturedTables(TableSelectors.parse("shop.a", "tables"))
    pred = pickle.loads(pickle.dumps(SignalCaptured(captured, SIG)))
    assert pred(SIG) and pred(TableId("shop", "a")) and not pred(TableId("shop", "b"))


def test_option():
    base = {"hostname": "h", "username": "u", "password": "p", "tables": "db.t"}
    assert validate_options({**base, "signal.data.collection": "ops.sig"}).signal_data_collection == "ops.sig"
    assert validate_options(base).signal_data_collection is None
    with pytest.raises(OptionValidationError, match="signal.data.collection"):
        validate_options({**base, "signal.data.collection": "sig"})


def test_kafka_channel_options():
    base = {"hostname": "h", "username": "u", "password": "p", "tables": "db.t"}
    opts = validate_options(base)
    assert opts.signal_enabled_channels == ("source",) and opts.signal_kafka_group_id == "kafka-signal"
    assert opts.signal_kafka_poll_timeout_ms == 100 and opts.signal_kafka_topic is None
    opts = validate_options({**base, "signal.enabled.channels": "source, kafka", "signal.kafka.topic": "sigs",
                             "signal.kafka.bootstrap.servers": "k:9092", "signal.kafka.groupId": "g"})
    assert opts.signal_enabled_channels == ("source", "kafka")
    assert (opts.signal_kafka_topic, opts.signal_kafka_bootstrap_servers, opts.signal_kafka_group_id) == ("sigs", "k:9092", "g")
    with pytest.raises(OptionValidationError, match="signal.kafka.bootstrap.servers"):
        validate_options({**base, "signal.enabled.channels": "kafka"})
    with pytest.raises(OptionValidationError, match="jmx"):
        validate_options({**base, "signal.enabled.channels": "source,jmx"})


# -- additional-conditions (Debezium's execute-snapshot filter) --------------------------------
from changelake.connectors.mysql_cdc.snapshot.conditions import (  # noqa: E402
    AdditionalConditionError,
    parse_conditions,
    render_condition,
    where_clause,
)

COLUMNS = ["id", "name", "n"]


@pytest.mark.parametrize("text, sql", [
    ("id > 100", "`id` > 100"),
    ("ID > 100 AND name LIKE 'a%'", "`id` > 100 AND `name` LIKE 'a%'"),
    ("NOT (n = 1) OR n <> 2", "NOT (`n` = 1) OR `n` <> 2"),
    ("id IN (1, 2, 3) AND name IS NOT NULL", "`id` IN (1, 2, 3) AND NOT `name` IS NULL"),
    ("id BETWEEN 1 AND 5", "`id` BETWEEN 1 AND 5"),
    ("UPPER(name) = 'A' OR CAST(id AS CHAR) = '7'", "UPPER(`name`) = 'A' OR CAST(`id` AS CHAR) = '7'"),
    ("n % 2 = 0", "`n` % 2 = 0"),
    # a quote inside a string stays inside it: the literal is re-rendered, not the signal's text
    ("name = 'a\\' OR 1=1 -- '", "`name` = 'a'' OR 1=1 -- '"),
])
def test_a_plain_condition_is_re_rendered_with_quoted_identifiers(text, sql):
    assert render_condition(text, COLUMNS, table="db.t") == sql


@pytest.mark.parametrize("text, reason", [
    ("id > 1; DROP TABLE t", "2 statements"),
    ("id IN (SELECT id FROM other)", "subquery"),
    ("id > (SELECT MAX(id) FROM t)", "Subquery"),
    ("EXISTS (SELECT 1)", "not a boolean condition"),
    ("SLEEP(5) = 0", "SLEEP"),
    ("BENCHMARK(1000000, MD5('x')) = 0", "BENCHMARK"),
    ("GET_LOCK('x', 10) = 1", "GET_LOCK"),
    ("@x := 1", "not"),
    ("id = @x", "Parameter"),
    ("id = ?", "Placeholder"),
    ("id = 1 -- hidden", "comment"),
    ("id = 1 /* hidden */", "comment"),
    ("id = 1 UNION SELECT password FROM mysql.user", "Union"),
    ("other = 1", "not a column of db.t"),
    ("t.id = 1", "qualified"),
    ("id", "not a boolean condition"),
    ("", "empty"),
    ("id = 'unclosed", "does not parse"),
])
def test_anything_but_a_plain_condition_is_refused_with_the_reason(text, reason):
    with pytest.raises(AdditionalConditionError, match="additional-conditions filter") as info:
        render_condition(text, COLUMNS, signal_id="s1", table="db.t")
    assert reason.lower() in str(info.value).lower(), str(info.value)
    assert "'s1'" in str(info.value) and "db.t" in str(info.value)


def test_parse_conditions_per_table_and_where_clause():
    data = {"additional-conditions": [{"data-collection": "db.t", "filter": "id > 100"},
                                      {"data-collection": "db.t", "filter": "n = 1 OR n = 2"}]}
    conds = parse_conditions("s", data, ["db.t", "db.u"])
    assert conds == {"db.t": ["id > 100", "n = 1 OR n = 2"]}
    assert where_clause(conds["db.t"], COLUMNS) == "(`id` > 100) AND (`n` = 1 OR `n` = 2)"
    assert parse_conditions("s", {}, ["db.t"]) == {}
    with pytest.raises(AdditionalConditionError, match="not among the tables"):
        parse_conditions("s", {"additional-conditions": [{"data-collection": "db.x", "filter": "id > 1"}]}, ["db.t"])
    with pytest.raises(AdditionalConditionError, match="each entry"):
        parse_conditions("s", {"additional-conditions": ["id > 1"]}, ["db.t"])
    with pytest.raises(AdditionalConditionError, match="deprecated 'additional-condition'"):
        parse_conditions("s", {"additional-condition": "id > 1"}, ["db.t"])
    with pytest.raises(AdditionalConditionError, match="must be a list"):
        parse_conditions("s", {"additional-conditions": "id > 1"}, ["db.t"])


def test_stop_tables_drops_the_running_and_waiting_tables_from_the_progress():
    from changelake.connectors.mysql_cdc.positions import SnapshotProgress
    from changelake.connectors.mysql_cdc.snapshot.reader import SnapshotReader

    reader = SnapshotReader({}, SnapshotProgress(("db.a", "db.b", "db.c"), ("17",)), 10, 10)
    assert reader.stop_tables(["db.b"]) == ["db.b"]
    assert reader.progress == SnapshotProgress(("db.a", "db.c"), ("17",))  # db.a goes on after its last key
    assert reader.stop_tables(["db.x"]) == []
    assert reader.stop_tables(["db.a"]) == ["db.a"]
    assert reader.progress == SnapshotProgress(("db.c",), None)
    assert reader.stop_tables(["db.c"]) == ["db.c"] and reader.done
