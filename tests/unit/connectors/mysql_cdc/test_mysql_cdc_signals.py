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
