"""Debezium's provide.transaction.metadata (TransactionMonitor), heartbeat.interval.ms records, their
options, the Kafka side records and the debezium-json ``transaction`` block (no server needed)."""

import json

import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import TableId
from changelake.changelog.side_records import HeartbeatRecord, TransactionRecord
from changelake.connectors.errors import SourceError
from changelake.connectors.kafka.side_topics import side_record, side_record_kind
from changelake.connectors.kafka.sink_options import KafkaSinkOptions
from changelake.connectors.mysql_cdc.factory import validate_options
from changelake.connectors.mysql_cdc.binlog.heartbeat import HeartbeatRecords
from changelake.connectors.mysql_cdc.binlog.transactions import TransactionMonitor, transaction_id
from changelake.formats import create_format

BASE = {"hostname": "h", "username": "u", "password": "p", "tables": "db.t"}
A, B = TableId("db", "a"), TableId("db", "b")


def ev(table, pos, row, gtid=None, ts=1000, op=Op.CREATE):
    position = {"phase": "binlog", "file": "bin.000001", "pos": pos, "row": row}
    if gtid:
        position["gtid"] = gtid
    return DataChangeEvent(table, op, None, {"id": row}, None, ts, position)


def test_begin_end_counts_and_blocks_per_transaction():
    m = TransactionMonitor()
    out = [m.on_event(e) for e in (ev(A, 100, 1, "0-1-7"), ev(B, 100, 2, "0-1-7"), ev(A, 100, 3, "0-1-7"))]
    assert [e.transaction for e in out] == [
        {"id": "0-1-7", "total_order": 1, "data_collection_order": 1},
        {"id": "0-1-7", "total_order": 2, "data_collection_order": 1},
        {"id": "0-1-7", "total_order": 3, "data_collection_order": 2},
    ]
    assert m.take() == [TransactionRecord("BEGIN", "0-1-7", 1000)]
    m.on_progress("bin.000001", 100)  # the transaction's own start: not its end
    assert m.take() == [] and m.in_transaction
    # the next transaction without GTID: the previous one ends first
    nxt = m.on_event(ev(B, 500, 1, ts=2000))
    assert nxt.transaction == {"id": "file=bin.000001,pos=500", "total_order": 1, "data_collection_order": 1}
    m.on_progress("bin.000001", 700)
    assert m.take() == [
        TransactionRecord("END", "0-1-7", 1000, 3, (("db.a", 2), ("db.b", 1))),
        TransactionRecord("BEGIN", "file=bin.000001,pos=500", 2000),
        TransactionRecord("END", "file=bin.000001,pos=500", 2000, 1, (("db.b", 1),)),
    ]
    assert m.state() is None


def test_snapshot_rows_carry_no_transaction():
    m = TransactionMonitor()
    row = DataChangeEvent(A, Op.READ, None, {"id": 1}, None, 0, {"phase": "snapshot", "file": "f", "pos": 4})
    assert m.on_event(row) is row and m.take() == []


def test_restore_continues_counts_without_a_second_begin():
    m = TransactionMonitor()
    m.on_event(ev(A, 100, 1, "0-1-9"))
    m.on_event(ev(B, 100, 2, "0-1-9"))
    state = json.loads(json.dumps(m.state()))  # as stored in the offsets topic
    again = TransactionMonitor()
    again.restore(state, "bin.000001", 100, 2)
    third = again.on_event(ev(A, 100, 3, "0-1-9"))
    assert third.transaction == {"id": "0-1-9", "total_order": 3, "data_collection_order": 2}
    again.on_progress("bin.000002", 4)
    assert again.take() == [TransactionRecord("END", "0-1-9", 1000, 3, (("db.a", 2), ("db.b", 1)))]
    # a stored position of another transaction (or row 0) restores nothing
    other = TransactionMonitor()
    other.restore(state, "bin.000001", 900, 1)
    assert not other.in_transaction
    with pytest.raises(SourceError, match="stored transaction state"):
        TransactionMonitor().restore({"file": "bin.000001", "pos": 100, "id": "x"}, "bin.000001", 100, 1)


def test_transaction_id_prefers_the_gtid():
    assert transaction_id({"file": "f.1", "pos": 4, "gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"}) == \
        "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"
    assert transaction_id({"file": "f.1", "pos": 4}) == "file=f.1,pos=4"


def test_heartbeat_records_once_per_interval():
    now = [10.0]
    beats = HeartbeatRecords(2.0, clock=lambda: now[0], wall=lambda: 1700000000.5)
    assert beats.maybe_emit() == HeartbeatRecord(1700000000500)
    now[0] += 1.9
    assert beats.maybe_emit() is None
    now[0] += 0.1
    assert beats.maybe_emit() is not None


def test_options():
    opts = validate_options({**BASE, "provide.transaction.metadata": "true", "heartbeat.interval.ms": "1500"})
    assert opts.provide_transaction_metadata and opts.heartbeat_interval_ms == 1500
    assert opts.heartbeat_interval.total_seconds() == 1.5  # also the binlog heartbeat, without heartbeat.interval
    both = validate_options({**BASE, "heartbeat.interval.ms": "1500", "heartbeat.interval": "10s"})
    assert both.heartbeat_interval.total_seconds() == 10
    defaults = validate_options(BASE)
    assert not defaults.provide_transaction_metadata and defaults.heartbeat_interval_ms == 0


def test_sink_topic_names_as_debezium():
    opts = KafkaSinkOptions.from_options({"properties.bootstrap.servers": "k:9092"}, "orders")
    assert (opts.transaction_topic, opts.heartbeat_topic) == ("orders.transaction", "__debezium-heartbeat.orders")
    custom = KafkaSinkOptions.from_options({"properties.bootstrap.servers": "k:9092", "topic.prefix": "shop",
                                            "topic.transaction": "tx", "topic.heartbeat.prefix": "hb"}, "orders")
    assert (custom.transaction_topic, custom.heartbeat_topic) == ("shop.tx", "hb.shop")


def test_side_records_as_debezium_writes_them():
    topic, key, value, headers = side_record(TransactionRecord("END", "0-1-7", 5, 3, (("db.a", 2), ("db.b", 1))),
                                             "p.transaction", "__debezium-heartbeat.p", "p")
    assert topic == "p.transaction" and json.loads(key) == {"id": "0-1-7"}
    assert json.loads(value) == {"status": "END", "id": "0-1-7", "ts_ms": 5, "event_count": 3, "data_collections": [
        {"data_collection": "db.a", "event_count": 2}, {"data_collection": "db.b", "event_count": 1}]}
    assert side_record_kind(headers) == "transaction"
    _, _, begin, _ = side_record(TransactionRecord("BEGIN", "0-1-7", 5), "p.transaction", "h", "p")
    assert json.loads(begin) == {"status": "BEGIN", "id": "0-1-7", "ts_ms": 5, "event_count": None,
                                 "data_collections": None}
    topic, key, value, headers = side_record(HeartbeatRecord(42), "p.transaction", "__debezium-heartbeat.p", "p")
    assert (topic, json.loads(key), json.loads(value)) == ("__debezium-heartbeat.p", {"serverName": "p"}, {"ts_ms": 42})
    assert side_record_kind(headers) == "heartbeat" and side_record_kind([("x", b"y")]) is None


@pytest.mark.parametrize("wrapped", [False, True])
def test_debezium_json_transaction_block_round_trips(wrapped):
    from changelake.changelog.schema import Column, Schema
    from changelake.changelog.types import parse_data_type

    schema = Schema((Column("id", parse_data_type("INT NOT NULL")),), ("id",))
    fmt = create_format("debezium-json", schema, {"include-schema.enabled": str(wrapped).lower()})
    block = {"id": "0-1-7", "total_order": 2, "data_collection_order": 1}
    data = fmt.encode_event(DataChangeEvent(A, Op.CREATE, None, {"id": 5}, schema, 1000, {}, block))
    doc = json.loads(data)
    payload = doc["payload"] if wrapped else doc
    assert payload["transaction"] == block
    if wrapped:
        assert doc["schema"]["fields"][-1]["field"] == "transaction"
    (back,) = fmt.decode_events(data)
    assert (back.table, back.op, dict(back.after)) == (A, Op.CREATE, {"id": 5})
    # without metadata, no block at all (the payload stays as before)
    plain = json.loads(fmt.encode_event(DataChangeEvent(A, Op.CREATE, None, {"id": 5}, schema, 1000)))
    assert "transaction" not in (plain["payload"] if wrapped else plain)
