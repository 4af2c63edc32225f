"""Pure logic of issue 9's MySQL source additions: GTID sets, chunk key rules, metadata columns,
required privileges, the binlog fast paths and the process reader's batch filter."""

from __future__ import annotations

import datetime as dt
import pickle

import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Column, Schema, TableId
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.mysql_cdc.schema.columns import MySqlColumn
from changelake.connectors.mysql_cdc.errors import MissingPrivilegeError, RowImageError
from changelake.connectors.mysql_cdc.binlog.event_handler import _full_bitmap, missing_columns
from changelake.connectors.mysql_cdc.values import _values
from changelake.connectors.mysql_cdc.binlog.gtid import Gtid, parse_gtid_set
from changelake.connectors.mysql_cdc.metadata import MetadataColumns
from changelake.connectors.mysql_cdc.options import ChunkKeyColumn
from changelake.connectors.mysql_cdc.preflight import required_privileges
from changelake.connectors.mysql_cdc.binlog.reader import _last_progress_only
from changelake.connectors.mysql_cdc.selectors import CapturedTables, TableSelectors


def test_gtid_set_one_domain():
    assert parse_gtid_set(" 0-1-42 ") == {0: Gtid(0, 1, 42)}
    assert str(Gtid(3, 7, 9)) == "3-7-9"
    with pytest.raises(OptionValidationError, match="names domain 0 twice"):
        parse_gtid_set("0-1-4,0-2-5")


def test_chunk_key_column_rules():
    rules = ChunkKeyColumn.parse_all(r"db1.t_[0-9]+:col1;db2.\.*:col2;")
    assert [r.column for r in rules] == ["col1", "col2"]
    assert rules[0].tables.matches(TableId("db1", "t_12")) and not rules[0].tables.matches(TableId("db1", "x"))
    with pytest.raises(OptionValidationError, match="rule 'db1.t:'"):
        ChunkKeyColumn.parse_all("db1.t:")


def test_metadata_columns_per_image():
    schema = Schema((Column("id", DataType(TypeRoot.INT, False)),), ("id",))
    table = TableId("shop", "orders")
    meta = MetadataColumns(["row_kind", "op_ts", "table_name", "database_name"])
    upd = DataChangeEvent(table, Op.UPDATE, {"id": 1}, {"id": 1}, schema, 1500, {})
    (out,) = meta.apply([upd])
    assert out.before == {"id": 1, "row_kind": "-U", "op_ts": dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=dt.timezone.utc),
                          "table_name": "orders", "database_name": "shop"}
    assert out.after["row_kind"] == "+U"
    assert out.schema.names == ["id", "row_kind", "op_ts", "table_name", "database_name"]
    assert meta.apply([upd])[0].schema is out.schema  # one extended schema per source schema
    (dele,) = meta.apply([DataChangeEvent(table, Op.DELETE, {"id": 1}, None, schema, 0, {})])
    assert dele.before["row_kind"] == "-D" and dele.after is None
    trunc = DataChangeEvent(table, Op.TRUNCATE, None, None, schema, 0, {})
    assert meta.apply([trunc]) == [trunc]


@pytest.mark.parametrize("version, monitor", [("10.11.6-MariaDB-log", "BINLOG MONITOR"),
                                              ("5.7.19-10.11.19-MariaDB-log", "REPLICATION CLIENT"),
                                              ("8.0.36", "REPLICATION CLIENT")])
def test_required_privileges(version, monitor):
    assert list(required_privileges(version)) == ["REPLICATION SLAVE", monitor]


def test_connector_errors_pickle_with_their_fields():
    err = MissingPrivilegeError("'cdc'@'%'", {"REPLICATION SLAVE": "to read the binlog"})
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is MissingPrivilegeError and back.missing == err.missing and str(back) == str(err)
    row = RowImageError(event_type="UPDATE_ROWS_EVENT", file="b.000001", pos=4, table="d.t", image="before", missing=["a"])
    back2 = pickle.loads(pickle.dumps(row))
    assert str(back2) == str(row) and back2.__dict__ == row.__dict__


def test_full_bitmap_matches_missing_columns():
    for count in (1, 7, 8, 9, 17):
        assert missing_columns(_full_bitmap(count), count) == []
    assert _full_bitmap(9) == b"\xff\x01"


def test_values_fast_paths_agree_with_convert():
    cols = (MySqlColumn("i", "int"), MySqlColumn("u", "int", unsigned=True), MySqlColumn("b", "tinyint", width=1),
            MySqlColumn("c", "char"), MySqlColumn("v", "varchar"), MySqlColumn("s", "set", labels=("a",)))
    out = _values(cols, {"i": -5, "u": -1, "b": 1, "c": "x  ", "v": "y ", "s": None}, {"s": "empty set"})
    assert out == {"i": -5, "u": 4294967295, "b": True, "c": "x", "v": "y ", "s": ""}


def test_only_the_last_progress_item_crosses_the_pipe():
    items = [("progress", 1), ("event", "a"), ("progress", 2), ("event", "b"), ("progress", 3), ("event", "c")]
    assert _last_progress_only(items) == [("event", "a"), ("event", "b"), ("progress", 3), ("event", "c")]
    assert _last_progress_only([("event", "a")]) == [("event", "a")]


def test_captured_tables_pickles_and_memoizes():
    captured = CapturedTables(TableSelectors.parse(r"shop.\.*"), TableSelectors.parse("shop.secret"))
    back = pickle.loads(pickle.dumps(captured))
    assert back(TableId("shop", "orders")) and not back(TableId("shop", "secret")) and not back(TableId("x", "orders"))
