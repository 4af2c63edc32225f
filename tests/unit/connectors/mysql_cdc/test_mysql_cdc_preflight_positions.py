"""Preflight checks, positions, the transaction tracker, TRUNCATE parsing and table-map schemas (no server)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from changelake.changelog.schema import TableId
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.binlog.reader import parse_truncate
from changelake.connectors.mysql_cdc.errors import BinlogPurgedError, BinlogSettingsError, ServerIdClashError
from changelake.connectors.mysql_cdc.options import ServerIdRange
from changelake.connectors.mysql_cdc.positions import (
    BinlogPosition,
    SnapshotProgress,
    SourcePosition,
    TransactionTracker,
    binlog_file_index,
)
from changelake.connectors.mysql_cdc.preflight import check_binlog_settings, choose_server_id
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker

GOOD = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL",
        "version": "10.11.6-MariaDB-log"}


def test_good_settings_pass():
    check_binlog_settings(GOOD)
    check_binlog_settings({**GOOD, "version": "8.0.36", "binlog_row_metadata": "FULL"})


@pytest.mark.parametrize(
    ("change", "variable", "required"),
    [
        ({"log_bin": "OFF"}, "log_bin", "ON"),
        ({"binlog_format": "STATEMENT"}, "binlog_format", "ROW"),
        ({"binlog_format": "MIXED"}, "binlog_format", "ROW"),
        ({"binlog_row_image": "MINIMAL"}, "binlog_row_image", "FULL"),
        ({"binlog_row_metadata": "MINIMAL"}, "binlog_row_metadata", "FULL"),
        ({"binlog_row_metadata": "NO_LOG", "version": "8.0.36"}, "binlog_row_metadata", "FULL"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(change, variable, required):
    with pytest.raises(BinlogSettingsError) as err:
        check_binlog_settings({**GOOD, **change})
    assert isinstance(err.value, SourceError)
    assert [p[0] for p in err.value.problems] == [variable]
    assert f"{variable}={required}" in str(err.value)


def test_row_metadata_not_required_on_older_servers():
    check_binlog_settings({**GOOD, "version": "10.4.30-MariaDB", "binlog_row_metadata": ""})
    check_binlog_settings({**GOOD, "version": "5.7.44-log", "binlog_row_metadata": ""})


def test_server_id_choice_and_clash():
    assert choose_server_id(ServerIdRange(5400, 5402), [5400, 7]) == 5401
    assert choose_server_id(ServerIdRange(1, 2), [], own_server_id=1) == 2
    with pytest.raises(ServerIdClashError) as err:
        choose_server_id(ServerIdRange(5400, 5400), [5400])
    assert "server id 5400 is already used" in str(err.value) and "'server-id' = 5400" in str(err.value)


def test_positions_round_trip_through_json():
    pos = SourcePosition(BinlogPosition("mysql-bin.000003", 4711, 2), SnapshotProgress(("db.t", "db.u"), ("5", b"\x00\xff")))
    data = json.loads(json.dumps(pos.to_dict()))
    assert data == {"phase": "snapshot", "file": "mysql-bin.000003", "pos": 4711, "row": 2,
                    "snapshot": {"tables": ["db.t", "db.u"], "after_key": ["5", {"hex": "00ff"}]}}
    assert SourcePosition.from_dict(data) == pos
    assert SourcePosition.from_dict({"file": "f.000001", "pos": 4}).phase == "binlog"
    with pytest.raises(SourceError, match="not valid"):
        SourcePosition.from_dict({"pos": 4})
    assert binlog_file_index("mysql-bin.000010") > binlog_file_index("mysql-bin.000009")


def test_transaction_tracker_skips_rows_already_emitted():
    tx = TransactionTracker("f.000001", 100, skip=2)
    tx.end(50)  # an artificial/earlier event never moves the position back
    tx.begin(100)  # the stored transaction starts again
    emitted = [tx.emit() for _ in range(4)]
    assert emitted == [False, False, True, True]
    assert tx.position() == BinlogPosition("f.000001", 100, 4)
    tx.end(300)
    assert tx.position() == BinlogPosition("f.000001", 300, 0)
    tx.begin(300)
    assert tx.emit() is True  # skip applies to the first transaction only


def test_transaction_tracker_drops_skip_when_another_transaction_starts():
    tx = TransactionTracker("f.000001", 100, skip=5)
    tx.begin(400)
    assert tx.emit() is True


def test_purged_error_message():
    err = BinlogPurgedError("mysql-bin.000001", 4711, ["mysql-bin.000004"])
    assert "mysql-bin.000001:4711 is no longer on the server" in str(err)
    assert "re-snapshot" in str(err) and "mysql-bin.000004" in str(err)


@pytest.mark.parametrize(
    ("query", "db", "expected"),
    [
        ("TRUNCATE TABLE t", "c", TableId("c", "t")),
        ("truncate t", "c", TableId("c", "t")),
        ("TRUNCATE TABLE `my db`.`odd``name`;", None, TableId("my db", "odd`name")),
        ("/* comment */ TRUNCATE TABLE x.y", None, TableId("x", "y")),
        ("TRUNCATE TABLE t", None, None),
        ("DROP TABLE t", "c", None),
        ("INSERT INTO truncate_log VALUES (1)", "c", None),
    ],
)
def test_parse_truncate(query, db, expected):
    assert parse_truncate(query, db) == expected


def _col(type_code, name, **kw):
    data = {"type": type_code, "name": name, "unsigned": False, "character_set_name": None, "collation_name": None, **kw}
    return SimpleNamespace(data=data, **data)


def test_table_map_schema_uses_binlog_metadata_and_integer_width_hint():
    from changelake.connectors.mysql_cdc.schema.columns import MySqlColumn
    from changelake.connectors.mysql_cdc.schema.tracker import TableSchema

    hint = TableSchema(TableId("c", "t"), (MySqlColumn("id", "int", nullable=False), MySqlColumn("flag", "tinyint", width=1)), ("id",))
    tracker = SchemaTracker(lambda table_id: hint)
    event = SimpleNamespace(
        schema="c", table="t", table_id=42, null_bitmask=b"\x0e",
        optional_metadata=SimpleNamespace(simple_primary_key_list=[0]),
        columns=[_col(3, "id"), _col(1, "flag"), _col(1, "gone"), _col(254, "bn", character_set_name="binary", collation_name="binary", max_length=4)],
    )
    schema = tracker.on_table_map(event)
    assert [(c.name, c.type.to_sql()) for c in schema.schema.columns] == [
        ("id", "INT NOT NULL"), ("flag", "BOOLEAN"), ("gone", "TINYINT"), ("bn", "BYTES")
    ]
    assert schema.primary_key == ("id",) and schema.column("bn").length == 4
    assert tracker.for_rows_event(SimpleNamespace(table_id=42)) is schema
    tracker.clear_table_ids()
    assert tracker.for_rows_event(SimpleNamespace(table_id=42)) is None
