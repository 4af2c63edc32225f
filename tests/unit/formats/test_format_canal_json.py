"""The ``canal-json`` format: the seed's layout, Flink's reading rules, filters, negative paths."""

from __future__ import annotations

import json

import pytest
from format_samples import ALL_TYPES, ROW_A, ROW_A_JSON, ROW_B, assert_same_values, parse

from changelake.changelog import ChangelogRow, DataChangeEvent, DataType, Op, RowKind, Schema, TableId
from changelake.formats import create_format
from changelake.formats.canal_json import CanalJsonFormat
from changelake.formats.errors import DecodeError, FormatOptionError

CUSTOMERS = Schema.of(
    [
        ("id", DataType.of("INT", nullable=False)),
        ("name", DataType.of("VARCHAR", length=255)),
        ("address", DataType.of("VARCHAR", length=1024)),
        ("phone_number", DataType.of("VARCHAR", length=512)),
        ("age", DataType.of("INT")),
    ],
    primary_key=["id"],
)
TABLE = TableId("kafka_test", "customers")
BEFORE = {"id": 4, "name": "John", "address": "New York", "phone_number": "2222", "age": 12}
AFTER = {**BEFORE, "phone_number": "1234"}

# the seed's expected Canal JSON output (001_21a13dfd18456be2.txt, Pipeline 1), verbatim
SEED_UPDATE = """
{
  "old": [
    {
      "id": 4,
      "name": "John",
      "address": "New York",
      "phone_number": "2222",
      "age": 12
    }
  ],
  "data": [
    {
      "id": 4,
      "name": "John",
      "address": "New York",
      "phone_number": "1234",
      "age": 12
    }
  ],
  "type": "UPDATE",
  "database": "kafka_test",
  "table": "customers",
  "pkNames": [
    "id"
  ],
  "ts": 1728528674000,
  "es": 0
}
"""


def compact(text: str) -> bytes:
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def test_seed_update_byte_for_byte_modulo_ts():
    fmt = CanalJsonFormat(CUSTOMERS, {})
    data = fmt.encode_event(DataChangeEvent(TABLE, Op.UPDATE, BEFORE, AFTER, CUSTOMERS, ts_ms=1728528674000))
    # changelake writes the commit time in both ts and es (the seed's es is 0)
    assert data == compact(SEED_UPDATE).replace(b'"es":0}', b'"es":1728528674000}')
    [event] = fmt.decode_events(compact(SEED_UPDATE))
    assert event == DataChangeEvent(TABLE, Op.UPDATE, BEFORE, AFTER, CUSTOMERS, ts_ms=1728528674000)
    assert [str(r) for r in fmt.decode(compact(SEED_UPDATE))] == ["-U[4, John, New York, 2222, 12]", "+U[4, John, New York, 1234, 12]"]


@pytest.mark.parametrize(
    "op, before, after, type_",
    [
        (Op.READ, None, ROW_A, "INSERT"),
        (Op.CREATE, None, ROW_A, "INSERT"),
        (Op.UPDATE, ROW_A, ROW_B, "UPDATE"),
        (Op.DELETE, ROW_B, None, "DELETE"),
    ],
)
def test_events_round_trip(op, before, after, type_):
    fmt = CanalJsonFormat(ALL_TYPES, {})
    data = fmt.encode_event(DataChangeEvent(TableId("c", "t"), op, before, after, ALL_TYPES, ts_ms=1000))
    msg = parse(data)
    assert list(msg) == ["old", "data", "type", "database", "table", "pkNames", "ts", "es"]
    assert msg["type"] == type_ and msg["pkNames"] == ["id"] and msg["ts"] == msg["es"] == 1000
    assert msg["old"] is None if op is not Op.UPDATE else len(msg["old"]) == 1
    [event] = fmt.decode_events(data)
    want_op = Op.CREATE if op is Op.READ else op  # Canal has no snapshot type
    assert (event.table, event.op, event.ts_ms) == (TableId("c", "t"), want_op, 1000)
    for got, want in ((event.before, before), (event.after, after)):
        if want is None:
            assert got is None
        else:
            assert_same_values(ALL_TYPES, got, want)


def test_delete_puts_the_row_in_data_and_golden_values():
    fmt = CanalJsonFormat(ALL_TYPES, {})
    msg = parse(fmt.encode_event(DataChangeEvent(TableId("c", "t"), Op.DELETE, ROW_A, None, ALL_TYPES, ts_ms=1)))
    assert msg["old"] is None and msg["data"] == [ROW_A_JSON]


def test_truncate_round_trip():
    fmt = CanalJsonFormat(CUSTOMERS, {})
    data = fmt.encode_event(DataChangeEvent(TABLE, Op.TRUNCATE, None, None, CUSTOMERS, ts_ms=7))
    msg = parse(data)
    assert msg["type"] == "TRUNCATE" and msg["data"] is None and msg["isDdl"] is True
    [event] = fmt.decode_events(data)
    assert event.op is Op.TRUNCATE and event.table == TABLE and event.ts_ms == 7
    assert fmt.decode(data) == []


@pytest.mark.parametrize(
    "kind, type_", [(RowKind.INSERT, "INSERT"), (RowKind.UPDATE_AFTER, "INSERT"), (RowKind.UPDATE_BEFORE, "DELETE"), (RowKind.DELETE, "DELETE")]
)
def test_row_level_encode_as_flink(kind, type_):
    fmt = CanalJsonFormat(CUSTOMERS, {})
    data = fmt.encode(ChangelogRow(kind, AFTER, TABLE))
    msg = parse(data)
    assert msg["type"] == type_ and msg["data"] == [AFTER] and msg["old"] is None
    [row] = fmt.decode(data)
    assert row.kind is (RowKind.INSERT if type_ == "INSERT" else RowKind.DELETE) and row.values == AFTER


def test_partial_old_and_several_rows_as_flink():
    # real Canal: values as strings, old holds only changed columns; an explicit null is a NULL before value
    message = json.dumps(
        {
            "data": [{"id": "1", "name": "a", "age": "30"}, {"id": "2", "name": "b", "age": "40"}],
            "old": [{"age": "29"}, {"name": None}],
            "type": "UPDATE",
            "database": "shop",
            "table": "people",
            "es": 1709287200000,
            "ts": 1709287200733,
            "isDdl": False,
        }
    ).encode()
    schema = Schema.of([("id", DataType.of("INT")), ("name", DataType.of("STRING")), ("age", DataType.of("INT"))])
    rows = CanalJsonFormat(schema, {}).decode(message)
    assert [(r.kind, dict(r.values)) for r in rows] == [
        (RowKind.UPDATE_BEFORE, {"id": 1, "name": "a", "age": 29}),
        (RowKind.UPDATE_AFTER, {"id": 1, "name": "a", "age": 30}),
        (RowKind.UPDATE_BEFORE, {"id": 2, "name": None, "age": 40}),
        (RowKind.UPDATE_AFTER, {"id": 2, "name": "b", "age": 40}),
    ]
    assert {r.metadata["ts_ms"] for r in rows} == {1709287200000}  # es (commit time) wins over ts


def test_create_is_skipped_and_filters():
    fmt = CanalJsonFormat(CUSTOMERS, {"database.include": "kafka_.*", "table.include": "cust.*"})
    assert fmt.decode(b'{"data":null,"type":"CREATE","database":"kafka_test","table":"customers","isDdl":true}') == []
    row = b'{"data":[{"id":1}],"old":null,"type":"INSERT","database":"%s","table":"%s"}'
    assert len(fmt.decode(row % (b"kafka_test", b"customers"))) == 1
    assert fmt.decode(row % (b"other", b"customers")) == []
    assert fmt.decode(row % (b"kafka_test", b"xcustomers")) == []  # the whole name must match


def test_schema_less_decoding():
    [event] = create_format("canal-json", None, {}).decode_events(
        b'{"data":[{"id":"1","p":"1.50"}],"old":[{"p":"1.00"}],"type":"UPDATE","database":"d","table":"t"}'
    )
    assert event.before == {"id": "1", "p": "1.00"} and event.after == {"id": "1", "p": "1.50"}


# -- negative paths -------------------------------------------------------------------------------
def test_other_ddl_types_fail_unless_ignored():
    ddl = b'{"data":null,"type":"ALTER","database":"d","table":"t","isDdl":true,"sql":"ALTER TABLE t ADD c INT"}'
    with pytest.raises(DecodeError) as err:
        CanalJsonFormat(CUSTOMERS, {}).decode(ddl)
    assert "Unknown \"type\" value 'ALTER'" in str(err.value) and err.value.field == "type"
    assert CanalJsonFormat(CUSTOMERS, {"ignore-parse-errors": "true"}).decode(ddl) == []


def test_bad_value_names_row_and_column():
    with pytest.raises(DecodeError) as err:
        CanalJsonFormat(CUSTOMERS, {}).decode(b'{"data":[{"id":1},{"id":"x"}],"type":"INSERT","database":"d","table":"t"}')
    assert err.value.field == "data[1].id" and "Corrupt canal-json message at field 'data[1].id'" in str(err.value)


def test_update_without_old():
    with pytest.raises(DecodeError, match="an UPDATE needs 'old' with one object per row"):
        CanalJsonFormat(CUSTOMERS, {}).decode(b'{"data":[{"id":1}],"old":null,"type":"UPDATE"}')


def test_bad_regex_option():
    with pytest.raises(FormatOptionError, match="Option 'table.include' is not a valid regular expression"):
        CanalJsonFormat(CUSTOMERS, {"table.include": "("})
