"""The ``maxwell-json`` format: layout, changed-columns ``old``, Flink's reading rules, negatives."""

from __future__ import annotations

import pytest
from format_samples import ALL_TYPES, ROW_A, ROW_A_JSON, ROW_B, assert_same_values, parse

from changelake.changelog import ChangelogRow, DataChangeEvent, DataType, Op, RowKind, Schema, TableId
from changelake.formats import create_format
from changelake.formats.errors import DecodeError
from changelake.formats.maxwell_json import MaxwellJsonFormat

SCHEMA = Schema.of(
    [("id", DataType.of("INT", nullable=False)), ("name", DataType.of("STRING")), ("age", DataType.of("INT"))], ["id"]
)
TABLE = TableId("shop", "people")


def test_update_layout_golden():
    fmt = MaxwellJsonFormat(SCHEMA, {})
    data = fmt.encode_event(
        DataChangeEvent(TABLE, Op.UPDATE, {"id": 1, "name": None, "age": 29}, {"id": 1, "name": "a", "age": 29}, SCHEMA, ts_ms=1709287200999)
    )
    # ts in seconds; old = changed columns only, with the explicit NULL before value kept
    assert data == b'{"database":"shop","table":"people","type":"update","ts":1709287200,"data":{"id":1,"name":"a","age":29},"old":{"name":null}}'


@pytest.mark.parametrize(
    "op, before, after, type_",
    [(Op.READ, None, ROW_A, "insert"), (Op.CREATE, None, ROW_A, "insert"), (Op.UPDATE, ROW_A, ROW_B, "update"), (Op.DELETE, ROW_B, None, "delete")],
)
def test_events_round_trip(op, before, after, type_):
    fmt = MaxwellJsonFormat(ALL_TYPES, {})
    data = fmt.encode_event(DataChangeEvent(TableId("c", "t"), op, before, after, ALL_TYPES, ts_ms=5000))
    msg = parse(data)
    assert msg["type"] == type_ and msg["ts"] == 5 and ("old" in msg) == (op is Op.UPDATE)
    [event] = fmt.decode_events(data)
    assert (event.table, event.op, event.ts_ms) == (TableId("c", "t"), Op.CREATE if op is Op.READ else op, 5000)
    for got, want in ((event.before, before), (event.after, after)):
        if want is None:
            assert got is None
        else:
            assert_same_values(ALL_TYPES, got, want)


def test_delete_data_is_the_deleted_row():
    msg = parse(MaxwellJsonFormat(ALL_TYPES, {}).encode_event(DataChangeEvent(TableId("c", "t"), Op.DELETE, ROW_A, None, ALL_TYPES)))
    assert msg["data"] == ROW_A_JSON and "old" not in msg


def test_truncate_has_no_message():
    assert MaxwellJsonFormat(SCHEMA, {}).encode_event(DataChangeEvent(TABLE, Op.TRUNCATE, None, None, SCHEMA)) is None


@pytest.mark.parametrize(
    "kind, type_", [(RowKind.INSERT, "insert"), (RowKind.UPDATE_AFTER, "insert"), (RowKind.UPDATE_BEFORE, "delete"), (RowKind.DELETE, "delete")]
)
def test_row_level_as_flink(kind, type_):
    fmt = MaxwellJsonFormat(SCHEMA, {})
    row = {"id": 1, "name": "a", "age": 2}
    data = fmt.encode(ChangelogRow(kind, row, TABLE))
    assert parse(data)["type"] == type_
    [back] = fmt.decode(data)
    assert back.kind is (RowKind.INSERT if type_ == "insert" else RowKind.DELETE) and back.values == row


def test_real_maxwell_update_merges_old_over_data():
    message = (
        b'{"database":"shop","table":"people","type":"update","ts":1709287200,"xid":8812,"commit":true,'
        b'"data":{"id":1,"name":"a","age":30},"old":{"age":29}}'
    )
    rows = MaxwellJsonFormat(SCHEMA, {}).decode(message)
    assert [(r.kind, dict(r.values)) for r in rows] == [
        (RowKind.UPDATE_BEFORE, {"id": 1, "name": "a", "age": 29}),
        (RowKind.UPDATE_AFTER, {"id": 1, "name": "a", "age": 30}),
    ]
    assert rows[0].metadata["ts_ms"] == 1709287200000


def test_bootstrap_messages():
    fmt = MaxwellJsonFormat(SCHEMA, {})
    assert fmt.decode(b'{"database":"shop","table":"people","type":"bootstrap-start","ts":1,"data":{}}') == []
    [event] = fmt.decode_events(b'{"database":"shop","table":"people","type":"bootstrap-insert","ts":1,"data":{"id":3}}')
    assert event.op is Op.READ and event.after == {"id": 3, "name": None, "age": None}


def test_schema_less():
    [event] = create_format("maxwell-json", None, {}).decode_events(
        b'{"database":"d","table":"t","type":"insert","ts":1,"data":{"id":1,"tags":["a","c"],"amount":12.34}}'
    )
    assert event.after == {"id": 1, "tags": ["a", "c"], "amount": 12.34}


def test_unknown_type_and_bad_values():
    fmt = MaxwellJsonFormat(SCHEMA, {})
    with pytest.raises(DecodeError) as err:
        fmt.decode(b'{"database":"d","table":"t","type":"table-alter","ts":1}')
    assert "Unknown \"type\" value 'table-alter'" in str(err.value) and err.value.format == "maxwell-json"
    assert MaxwellJsonFormat(SCHEMA, {"ignore-parse-errors": "true"}).decode(b'{"type":"table-alter"}') == []
    with pytest.raises(DecodeError) as err2:
        fmt.decode(b'{"database":"d","table":"t","type":"update","ts":1,"data":{"id":1},"old":{"age":"old"}}')
    assert err2.value.field == "old.age"
