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


# -- the messages a new user sees (issue 20's trial) ------------------------------------------
import logging  # noqa: E402

from confluent_kafka import Message  # noqa: E402

from changelake.connectors.mysql_cdc.snapshot.kafka_signals import KafkaSignalChannel  # noqa: E402
from changelake.connectors.mysql_cdc.snapshot.signals import collections_shape_error, log_signal  # noqa: E402

SIGNALS_LOG = "changelake.connectors.mysql_cdc.snapshot.signals"
KAFKA_SIGNALS_LOG = "changelake.connectors.mysql_cdc.snapshot.kafka_signals"


def test_data_collections_as_a_string_is_named_as_the_wrong_shape(caplog):
    captured = [TableId("shop", "orders")]
    with caplog.at_level(logging.WARNING, logger=SIGNALS_LOG):
        assert snapshot_tables(Signal("s9", "execute-snapshot", {"data-collections": "shop.orders"}), captured) == []
    (message,) = [r.getMessage() for r in caplog.records]
    assert "'s9'" in message and "must be a list of table names or regular expressions" in message, message
    assert '["shop.orders"]' in message and "without" not in message, message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=SIGNALS_LOG):
        assert snapshot_tables(Signal("s10", "execute-snapshot", {"data-collections": {"x": 1}}), captured) == []
        assert snapshot_tables(Signal("s11", "execute-snapshot", {}), captured) == []
    shape, missing = [r.getMessage() for r in caplog.records]
    assert "'s10'" in shape and "must be a list" in shape and "dict" in shape, shape
    assert "'s11'" in missing and "without 'data-collections'" in missing, missing
    # a stop-snapshot with a string is refused (not read as "no tables named", which would stop them all)
    stop = collections_shape_error(Signal("s12", "stop-snapshot", {"data-collections": "shop.orders"}))
    assert stop is not None and "'s12'" in stop and "stop-snapshot" in stop and "must be a list" in stop
    assert collections_shape_error(Signal("s13", "stop-snapshot", {})) is None
    assert collections_shape_error(Signal("s14", "stop-snapshot", {"data-collections": ["shop.orders"]})) is None


def _channel():
    return KafkaSignalChannel("localhost:1", "orders-signal", "kafka-signal", "orders", None)


def test_kafka_signal_tombstone_is_named_as_a_tombstone(caplog):
    with caplog.at_level(logging.INFO, logger=KAFKA_SIGNALS_LOG):
        assert _channel()._parse(Message(topic="orders-signal", partition=0, offset=7, key=b"orders", value=None)) is None
    (message,) = [r.getMessage() for r in caplog.records]
    assert "tombstone" in message and "ignored" in message and "not JSON" not in message, message
    assert "'orders-signal'" in message and "partition 0" in message and "offset 7" in message, message


def test_kafka_signal_with_another_key_is_logged_at_info_with_both_keys(caplog):
    value = b'{"type": "log", "data": {"message": "hi"}}'
    with caplog.at_level(logging.INFO, logger=KAFKA_SIGNALS_LOG):
        assert _channel()._parse(Message(topic="orders-signal", partition=0, offset=3, key=b"other", value=value)) is None
        assert _channel()._parse(Message(topic="orders-signal", partition=0, offset=4, key=None, value=value)) is None
    other, keyless = caplog.records
    assert other.levelno == logging.INFO and keyless.levelno == logging.INFO
    assert "'other'" in other.getMessage() and "'orders'" in other.getMessage(), other.getMessage()
    assert "'orders-signal'" in other.getMessage() and "partition 0 offset 3" in other.getMessage()
    assert "key is missing" in keyless.getMessage() and "offset 4" in keyless.getMessage(), keyless.getMessage()
    # the right key still parses
    assert _channel()._parse(Message(topic="orders-signal", partition=0, offset=5, key=b"orders", value=value)) \
        == Signal("kafka:5", "log", {"message": "hi"})


def test_refused_conditions_entry_names_its_table_or_says_it_has_none():
    with pytest.raises(AdditionalConditionError) as info:
        parse_conditions("s", {"additional-conditions": [{"data-collection": "db.t"}]}, ["db.t"])
    assert "for db.t" in str(info.value) and "no 'filter'" in str(info.value) and "?" not in str(info.value)
    for entry in ({"filter": "id > 1"}, "id > 1", {"data-collection": ["db.t"], "filter": "id > 1"}):
        with pytest.raises(AdditionalConditionError, match="has no 'data-collection'") as info:
            parse_conditions("s", {"additional-conditions": [entry]}, ["db.t"])
        assert " for " not in str(info.value) and "?" not in str(info.value), str(info.value)
    with pytest.raises(AdditionalConditionError) as info:
        parse_conditions("s", {"additional-conditions": "id > 1"}, ["db.t"])
    assert "?" not in str(info.value)
    with pytest.raises(AdditionalConditionError, match="not a column of the table"):
        render_condition("other = 1", COLUMNS)


def test_log_signal_message_is_logged_at_info_with_debeziums_offset_placeholder(caplog):
    at = {"file": "mysql-bin.000003", "pos": 4567}
    with caplog.at_level(logging.INFO, logger=SIGNALS_LOG):
        log_signal(Signal("l1", "log", {"message": "backfill starts at {}"}), at)
        log_signal(Signal("l2", "log", {"message": "no placeholder"}), None)
        log_signal(Signal("l3", "log", {}), at)
    first, second, empty = caplog.records
    assert first.levelno == logging.INFO and first.getMessage() == \
        "signal 'l1': backfill starts at {\"file\": \"mysql-bin.000003\", \"pos\": 4567}"
    assert second.levelno == logging.INFO and second.getMessage() == "signal 'l2': no placeholder"
    assert empty.levelno == logging.WARNING and "'l3'" in empty.getMessage() and "'message'" in empty.getMessage()
