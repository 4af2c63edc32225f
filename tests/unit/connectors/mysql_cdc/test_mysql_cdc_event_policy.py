"""The binlog event-type policy, entry by entry, and the pure helpers of issue 10 (no server).

STOP and IGNORE entries run through the real EventHandler with a minimal stand-in event (only the
header fields the handler reads for them). DELIVER entries need decoded library events; each is
named below with the integration test that feeds it from the real MariaDB, or marked MySQL-only."""

from __future__ import annotations

import json
import zlib
from types import SimpleNamespace

import pytest

from changelake.changelog.event import Op
from changelake.changelog.schema import TableId
from changelake.connectors.mysql_cdc.binlog.compression import CompressedPayloadError, compress, uncompress
from changelake.connectors.mysql_cdc.errors import (
    RowImageError,
    StatementFormatError,
    UnsupportedBinlogEventError,
)
from changelake.connectors.mysql_cdc.binlog.event_handler import EventHandler, missing_columns
from changelake.connectors.mysql_cdc.binlog.event_policy import EVENT_RULES, Action, rule_for
from changelake.connectors.mysql_cdc.positions import BinlogPosition, PreparedXa, SourcePosition
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker
from changelake.connectors.mysql_cdc.schema.statements import (
    StatementKind,
    classify,
    describe,
    dml_target,
    is_account_statement,
    mentioned_tables,
    xa_id,
    xid_key,
)
from changelake.connectors.mysql_cdc.binlog.xa import HeldChange, XaBook

REFUSALS = "tests/integration/mysql_cdc/test_mysql_cdc_refusals.py"
DELIVERED_BY = {  # DELIVER code -> where the real server feeds it through the reader
    0x02: f"{REFUSALS}::test_statement_format_dml_on_a_captured_table... (and every DDL/TRUNCATE test)",
    0x04: "tests/integration/mysql_cdc/test_mysql_cdc_restart.py (new binlog file after a restart)",
    0x0F: "every binlog test (each connection and file starts with one)",
    0x10: "every binlog test (COMMIT of InnoDB transactions)",
    0x13: "every binlog test",
    0x17: "every binlog test (MariaDB writes v1 rows events)",
    0x18: f"{REFUSALS}::test_minimal_row_image_in_one_session...",
    0x19: f"{REFUSALS}::test_compressed_row_and_query_events_are_decoded",
    0x1B: "every binlog test (heartbeat.interval 1s)",
    0x26: f"{REFUSALS}::test_xa_only_committed_work_is_published",
    0xA2: "every binlog test (MariaDB GTID, standalone and XA flags)",
    0xA5: f"{REFUSALS}::test_compressed_row_and_query_events_are_decoded",
    0xA6: f"{REFUSALS}::test_compressed_row_and_query_events_are_decoded",
    0xA7: f"{REFUSALS}::test_compressed_row_and_query_events_are_decoded",
    0xA8: f"{REFUSALS}::test_compressed_row_and_query_events_are_decoded",
}
MYSQL_ONLY = {0x1E, 0x1F, 0x20, 0x21, 0x22, 0x29}  # not written by MariaDB: same library classes / handler paths


def _handler(items: list) -> EventHandler:
    start = SourcePosition(BinlogPosition("mysql-bin.000001", 400))
    return EventHandler(start, lambda t: True, SchemaTracker(lambda t: None), items.append)


def _event(code: int, start: int, size: int = 30, **attrs: object) -> SimpleNamespace:
    return SimpleNamespace(packet=SimpleNamespace(event_type=code, log_pos=start + size, event_size=size), **attrs)


@pytest.mark.parametrize("code", sorted(EVENT_RULES))
def test_every_entry_has_a_name_a_reason_and_a_tested_behaviour(code):
    rule = EVENT_RULES[code]
    assert rule.code == code and rule.name.isupper() and rule.why
    if rule.action is Action.DELIVER:
        assert code in DELIVERED_BY or code in MYSQL_ONLY, f"{rule.name}: no test feeds it"


@pytest.mark.parametrize("code", sorted(c for c, r in EVENT_RULES.items() if r.action is Action.STOP))
def test_stop_entries_stop_the_reader_naming_type_and_position(code):
    items: list = []
    handler = _handler(items)
    with pytest.raises(UnsupportedBinlogEventError) as err:
        handler.handle(_event(code, 500))
    assert err.value.event_type == EVENT_RULES[code].name and (err.value.file, err.value.pos) == ("mysql-bin.000001", 500)
    assert f"mysql-bin.000001:500" in str(err.value)
    assert items == [] and handler.position().binlog == BinlogPosition("mysql-bin.000001", 400)


@pytest.mark.parametrize("code", sorted(c for c, r in EVENT_RULES.items() if r.action is Action.IGNORE))
def test_ignore_entries_move_the_position_only_outside_transactions(code):
    items: list = []
    handler = _handler(items)
    handler.handle(_event(code, 400))
    assert [i[0] for i in items] == ["progress"] and handler.position().binlog == BinlogPosition("mysql-bin.000001", 430)
    items.clear()
    handler.handle(_event(0x21, 430))  # a (MySQL) transaction starts
    handler.handle(_event(code, 460))
    assert items == [] and handler.position().binlog == BinlogPosition("mysql-bin.000001", 430)


@pytest.mark.parametrize("code", [0x2B, 0x9F, 0xAC, 0xFF])
def test_unknown_codes_stop(code):
    assert rule_for(code).action is Action.STOP
    with pytest.raises(UnsupportedBinlogEventError) as err:
        _handler([]).handle(_event(code, 500))
    assert f"0x{code:02X}" in str(err.value)


def test_compression_envelope_round_trip_and_refusals():
    for data in (b"", b"x", b"abc" * 1000, bytes(range(256)) * 300):
        assert uncompress(compress(data)) == data
    assert compress(b"a" * 300)[0] == 0x82 and compress(b"a" * 300)[1:3] == (300).to_bytes(2, "big")
    with pytest.raises(CompressedPayloadError, match="not a MariaDB zlib envelope"):
        uncompress(b"\x01abc")
    with pytest.raises(CompressedPayloadError, match="announces 7"):
        uncompress(b"\x87" + b"\x00" * 8)
    with pytest.raises(CompressedPayloadError, match="zlib"):
        uncompress(b"\x81\x03notzlib")
    with pytest.raises(CompressedPayloadError, match="announces 5"):
        uncompress(b"\x81\x05" + zlib.compress(b"abc"))


def test_missing_columns_of_a_bitmap():
    assert missing_columns(b"\x07", 3) == [] and missing_columns(b"\xff\x01", 9) == []
    assert missing_columns(b"\x01", 3) == [1, 2] and missing_columns(b"\xff", 9) == [8]


@pytest.mark.parametrize(("query", "kind"), [
    ("BEGIN", StatementKind.BEGIN), ("COMMIT", StatementKind.COMMIT), ("ROLLBACK", StatementKind.ROLLBACK),
    ("SAVEPOINT `a`", StatementKind.SAVEPOINT), ("ROLLBACK TO `a`", StatementKind.SAVEPOINT),
    ("XA START X'7831',X'',1", StatementKind.XA_START), ("XA END X'7831',X'',1", StatementKind.XA_END),
    ("XA COMMIT X'7831',X'',1", StatementKind.XA_COMMIT), ("XA ROLLBACK X'7831',X'',1", StatementKind.XA_ROLLBACK),
    ("INSERT INTO t VALUES (1)", StatementKind.DML), ("/* c */ update t set a=1", StatementKind.DML),
    ("REPLACE t VALUES (1)", StatementKind.DML), ("DELETE FROM t", StatementKind.DML),
    ("LOAD DATA INFILE 'f' INTO TABLE t", StatementKind.DML),
    ("CREATE USER 'u'@'%' IDENTIFIED BY 'pw'", StatementKind.ACCOUNT), ("ALTER USER u IDENTIFIED BY 'pw'", StatementKind.ACCOUNT),
    ("GRANT SELECT ON *.* TO u", StatementKind.ACCOUNT), ("SET PASSWORD FOR u = PASSWORD('x')", StatementKind.ACCOUNT),
    ("REVOKE ALL ON *.* FROM u", StatementKind.ACCOUNT), ("CREATE ROLE r", StatementKind.ACCOUNT),
    ("INSERT INTO t VALUES ('IDENTIFIED BY x', PASSWORD('y'))", StatementKind.DML),
    ("CREATE TABLE t (id INT)", StatementKind.OTHER), ("TRUNCATE t", StatementKind.OTHER),
])
def test_statement_kinds(query, kind):
    assert classify(query) is kind


def test_describe_never_returns_account_text_or_values():
    assert describe("CREATE USER 'u'@'%' IDENTIFIED BY 'pw'") == "account management statement (text withheld)"
    assert describe("CREATE TABLE x (a INT) COMMENT 'IDENTIFIED BY secret'") == "account management statement (text withheld)"
    assert describe("INSERT INTO t VALUES ('secret', 2)") == "INSERT INTO t"
    assert is_account_statement("set password = 'x'") and not is_account_statement("INSERT INTO t VALUES ('password')")


def test_statement_tables():
    assert dml_target("INSERT IGNORE INTO `d`.`t` VALUES (1)", "x") == TableId("d", "t")
    assert dml_target("UPDATE LOW_PRIORITY t SET a=1", "x") == TableId("x", "t")
    assert dml_target("DELETE QUICK FROM t WHERE 1", None) is None
    assert dml_target("LOAD DATA INFILE '/f' INTO TABLE d.t", None) == TableId("d", "t")
    assert TableId("x", "t2") in mentioned_tables("UPDATE t1 JOIN t2 ON t1.id=t2.id SET t1.a='t3'", "x")
    assert TableId("x", "t3") not in mentioned_tables("UPDATE t1 SET a='t3'", "x")


def test_xa_ids_of_statements_and_prepare_events_agree():
    key = xid_key(b"x1", b"", 1)
    assert xa_id("XA COMMIT X'7831',X'',1") == key == xa_id("XA ROLLBACK 'x1'")
    assert xa_id("XA COMMIT X'7831',X'6271',7") == xid_key(b"x1", b"bq", 7)
    assert xa_id("XA COMMIT") is None


def test_positions_carry_prepared_xa_through_json():
    pos = SourcePosition(BinlogPosition("b.000002", 900, 1), None,
                         (PreparedXa("b.000001", 400, "7831::1"), PreparedXa("b.000002", 120, "7832::1")))
    back = SourcePosition.from_dict(json.loads(json.dumps(pos.to_dict())))
    assert back == pos and "xa_prepared" not in SourcePosition(BinlogPosition("b.000001", 4)).to_dict()


def test_xa_book_holds_until_the_outcome_and_restarts_from_the_first_prepared_group():
    book = XaBook((PreparedXa("b.000001", 900, "a"),))
    assert book.changes("a") is None and book.is_pending("a")  # prepared before: to be re-read
    change = HeldChange(TableId("d", "t"), Op.CREATE, None, {"id": 1}, None)
    book.hold(PreparedXa("b.000001", 400, "b"), [change])
    assert [x.xid for x in book.pending()] == ["b", "a"] and book.at("b.000001", 400).xid == "b"
    assert book.changes("b") == [change]
    book.forget("b")
    assert book.changes("b") is None and [x.xid for x in book.pending()] == ["a"]
    handler = EventHandler(SourcePosition(BinlogPosition("b.000002", 50), None, book.pending()), lambda t: True,
                           SchemaTracker(lambda t: None), lambda item: None)
    assert handler.physical_start() == BinlogPosition("b.000001", 900)
    assert handler.position() == SourcePosition(BinlogPosition("b.000002", 50), None, book.pending())


def test_error_messages_name_setting_table_and_position():
    e = RowImageError(event_type="UPDATE_ROWS_EVENT_V1", file="b.1", pos=7, table="d.t", missing=["a"], image="before")
    assert "binlog_row_image" in str(e) and "d.t" in str(e) and "b.1:7" in str(e)
    s = StatementFormatError(event_type="QUERY_EVENT", file="b.1", pos=9, table="d.t", statement="INSERT INTO t")
    assert "binlog_format" in str(s) and "d.t" in str(s) and "b.1:9" in str(s)
