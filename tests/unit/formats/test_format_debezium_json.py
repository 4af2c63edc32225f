"""The ``debezium-json`` format: the seed's layout, every op, the schema wrapper, negative paths."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from format_samples import ALL_TYPES, ROW_A, ROW_A_JSON, ROW_B, assert_same_values, parse

from changelake.changelog import ChangelogRow, Column, DataChangeEvent, DataType, Op, RowKind, Schema, TableId
from changelake.formats import create_format
from changelake.formats.debezium_json import DebeziumJsonFormat, connect_schema_for, schema_from_connect
from changelake.formats.errors import DecodeError, EncodeError

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

# the seed's expected Debezium JSON output (001_21a13dfd18456be2.txt, Pipeline 1), verbatim
SEED_UPDATE = """
{
  "before": {
    "id": 4,
    "name": "John",
    "address": "New York",
    "phone_number": "2222",
    "age": 12
  },
  "after": {
    "id": 4,
    "name": "John",
    "address": "New York",
    "phone_number": "1234",
    "age": 12
  },
  "op": "u",
  "source": {
    "db": "kafka_test",
    "table": "customers",
    "ts_ms": 1728528674000
  }
}
"""


def compact(text: str) -> bytes:
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def test_seed_update_byte_for_byte():
    fmt = DebeziumJsonFormat(CUSTOMERS, {})
    data = fmt.encode_event(DataChangeEvent(TABLE, Op.UPDATE, BEFORE, AFTER, CUSTOMERS, ts_ms=1728528674000))
    assert data == compact(SEED_UPDATE)
    [event] = fmt.decode_events(compact(SEED_UPDATE))
    assert event == DataChangeEvent(TABLE, Op.UPDATE, BEFORE, AFTER, CUSTOMERS, ts_ms=1728528674000)
    assert [str(r) for r in fmt.decode(data)] == ["-U[4, John, New York, 2222, 12]", "+U[4, John, New York, 1234, 12]"]


@pytest.mark.parametrize(
    "op, before, after, ts_ms",
    [
        (Op.READ, None, ROW_A, 0),
        (Op.CREATE, None, ROW_A, 1704074400000),
        (Op.UPDATE, ROW_A, ROW_B, 1704074400001),
        (Op.DELETE, ROW_B, None, 1704074400002),
        (Op.TRUNCATE, None, None, 1704074400003),
    ],
)
@pytest.mark.parametrize("wrapped", [False, True], ids=["payload", "schema+payload"])
def test_events_round_trip(op, before, after, ts_ms, wrapped):
    options = {"include-schema.enabled": "true"} if wrapped else {}
    fmt = DebeziumJsonFormat(ALL_TYPES, options)
    table = TableId("c", "t")
    data = fmt.encode_event(DataChangeEvent(table, op, before, after, ALL_TYPES, ts_ms=ts_ms))
    payload = parse(data)["payload"] if wrapped else parse(data)
    assert list(payload) == ["before", "after", "op", "source"]
    assert payload["op"] == op.value and payload["source"] == {"db": "c", "table": "t", "ts_ms": ts_ms}
    [event] = fmt.decode_events(data)
    assert (event.table, event.op, event.ts_ms, event.schema) == (table, op, ts_ms, ALL_TYPES)
    for got, want in ((event.before, before), (event.after, after)):
        if want is None:
            assert got is None
        else:
            assert_same_values(ALL_TYPES, got, want)


def test_golden_values_in_after():
    data = DebeziumJsonFormat(ALL_TYPES, {}).encode_event(DataChangeEvent(TableId("c", "t"), Op.CREATE, None, ROW_A, ALL_TYPES, ts_ms=5))
    assert parse(data)["after"] == ROW_A_JSON and parse(data)["before"] is None
    assert b'"z":0.00001,' in data and b'"f":5.15,' in data and b'"price":-12.34,' in data


def test_snapshot_rows_are_r_with_ts_0_and_deletes_are_messages():
    fmt = DebeziumJsonFormat(CUSTOMERS, {})
    snap = parse(fmt.encode_event(DataChangeEvent(TABLE, Op.READ, None, BEFORE, CUSTOMERS)))
    assert snap["op"] == "r" and snap["source"]["ts_ms"] == 0
    delete = fmt.encode_event(DataChangeEvent(TABLE, Op.DELETE, AFTER, None, CUSTOMERS, ts_ms=9))
    assert delete is not None and parse(delete)["before"] == AFTER and parse(delete)["after"] is None


@pytest.mark.parametrize(
    "kind, op, image",
    [(RowKind.INSERT, "c", "after"), (RowKind.UPDATE_AFTER, "c", "after"), (RowKind.UPDATE_BEFORE, "d", "before"), (RowKind.DELETE, "d", "before")],
)
def test_row_level_encode_as_flink(kind, op, image):
    fmt = DebeziumJsonFormat(CUSTOMERS, {})
    msg = parse(fmt.encode(ChangelogRow(kind, AFTER, TABLE, {"ts_ms": 3})))
    assert msg["op"] == op and msg[image] == AFTER
    assert msg["source"] == {"db": "kafka_test", "table": "customers", "ts_ms": 3}
    # Flink's deserializer: c -> +I, d -> -D
    [row] = fmt.decode(fmt.encode(ChangelogRow(kind, AFTER)))
    assert row.kind is (RowKind.INSERT if op == "c" else RowKind.DELETE) and row.values == AFTER


def test_row_level_decode_of_every_op():
    fmt = DebeziumJsonFormat(CUSTOMERS, {})
    b, a = json.dumps(BEFORE), json.dumps(AFTER)
    assert [r.kind for r in fmt.decode(f'{{"before":null,"after":{a},"op":"r"}}'.encode())] == [RowKind.INSERT]
    assert [r.kind for r in fmt.decode(f'{{"before":null,"after":{a},"op":"c"}}'.encode())] == [RowKind.INSERT]
    assert [r.kind for r in fmt.decode(f'{{"before":{b},"after":{a},"op":"u"}}'.encode())] == [RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER]
    [row] = fmt.decode(f'{{"before":{b},"after":null,"op":"d"}}'.encode())
    assert row.kind is RowKind.DELETE and row.values == BEFORE
    assert fmt.decode(b'{"before":null,"after":null,"op":"t","source":{"db":"kafka_test","table":"customers"}}') == []
    [event] = fmt.decode_events(b'{"before":null,"after":null,"op":"t","source":{"db":"kafka_test","table":"customers"}}')
    assert event.op is Op.TRUNCATE and event.table == TABLE and event.ts_ms == 0


def test_schema_wrapper_matches_payload_and_rebuilds_schema():
    schema = Schema(
        (*ALL_TYPES.columns, Column("c3", DataType.of("CHAR", length=3), "a comment")), ALL_TYPES.primary_key
    )
    row = {**ROW_A, "c3": "abc"}
    data = DebeziumJsonFormat(schema, {"include-schema.enabled": "true"}).encode_event(
        DataChangeEvent(TableId("c", "t"), Op.CREATE, None, row, schema, ts_ms=1)
    )
    doc = parse(data)
    assert schema_from_connect(doc["schema"]) == schema
    entries = {e["field"]: e for e in doc["schema"]["fields"][1]["fields"]}
    assert entries["price"] == {"type": "double", "optional": True, "name": "decimal", "parameters": {"precision": "10", "scale": "2"}, "field": "price"}
    assert entries["c3"]["doc"] == "a comment"
    assert entries["ltz"]["name"] == "timestamp_ltz" and entries["ts3"]["name"] == "timestamp"
    # every payload value has the JSON type its Connect type says
    json_types = {"boolean": bool, "int8": int, "int16": int, "int32": int, "int64": int, "float": Decimal, "double": (Decimal, int), "string": str, "bytes": str}
    for name, value in doc["payload"]["after"].items():
        if value is not None:
            assert isinstance(value, json_types[entries[name]["type"]]), name
    # a reader without a declared schema rebuilds it from the wrapper (Flink's schema-include)
    [event] = create_format("debezium-json", None, {"schema-include": "true"}).decode_events(data)
    assert event.schema == schema
    assert_same_values(schema, event.after, row)


def test_connect_schema_is_stable_json():
    envelope = connect_schema_for(CUSTOMERS, TABLE)
    assert envelope["name"] == "kafka_test.customers.Envelope"
    assert [f["field"] for f in envelope["fields"]] == ["before", "after", "op", "source"]
    assert envelope["fields"][1]["parameters"] == {"primary.key": '["id"]'}


def test_schema_less_decoding_and_flink_cdc_messages_without_ts():
    [event] = create_format("debezium-json", None, {}).decode_events(
        b'{"before":null,"after":{"id":1,"price":12.5,"s":"x"},"op":"c","source":{"db":"d","table":"t"}}'
    )
    assert event.after == {"id": 1, "price": 12.5, "s": "x"} and event.schema is None and event.ts_ms == 0


def test_tombstones_and_null_payloads_are_skipped():
    fmt = DebeziumJsonFormat(CUSTOMERS, {})
    assert fmt.decode_events(None) == [] and fmt.decode_events(b"") == []
    assert fmt.decode_events(b'{"schema":null,"payload":null}') == []


# -- negative paths -------------------------------------------------------------------------------
def test_unknown_op():
    fmt = DebeziumJsonFormat(CUSTOMERS, {})
    with pytest.raises(DecodeError) as err:
        fmt.decode(b'{"before":null,"after":null,"op":"m"}')
    assert "Unknown op 'm'" in str(err.value)
    assert err.value.format == "debezium-json" and err.value.field == "op"
    assert err.value.excerpt == b'{"before":null,"after":null,"op":"m"}'
    assert DebeziumJsonFormat(CUSTOMERS, {"ignore-parse-errors": "true"}).decode(b'{"op":"m"}') == []


def test_bad_decimal_names_the_field_path():
    fmt = DebeziumJsonFormat(Schema.of([("id", DataType.of("INT")), ("price", DataType.decimal(10, 2))]), {})
    with pytest.raises(DecodeError) as err:
        fmt.decode(b'{"before":null,"after":{"id":1,"price":"BNI="},"op":"c"}')
    assert err.value.field == "after.price"
    assert str(err.value).startswith("Corrupt debezium-json message at field 'after.price': Failed to deserialize JSON value 'BNI='")
    assert "message starts b'{\"before\"" in str(err.value)


def test_update_without_before_image():
    with pytest.raises(DecodeError, match='The "before" field of UPDATE message is null'):
        DebeziumJsonFormat(CUSTOMERS, {}).decode(b'{"before":null,"after":{"id":1},"op":"u"}')


def test_malformed_json_and_non_objects():
    fmt = DebeziumJsonFormat(CUSTOMERS, {})
    with pytest.raises(DecodeError, match="malformed JSON"):
        fmt.decode(b'{"op":')
    with pytest.raises(DecodeError, match="expected a JSON object, got list"):
        fmt.decode(b"[]")
    with pytest.raises(DecodeError, match="unreadable schema"):
        fmt.decode(b'{"schema":{"type":"struct"},"payload":{"op":"c","after":{}}}')


def test_wrapper_needs_a_schema():
    fmt = DebeziumJsonFormat(None, {"include-schema.enabled": "true"})
    with pytest.raises(EncodeError, match="include-schema.enabled needs the table schema"):
        fmt.encode_event(DataChangeEvent(TABLE, Op.CREATE, None, AFTER, None))


def test_include_schema_refuses_a_drop_without_schema_naming_the_table():
    from changelake.changelog.event import DROP_TABLE

    fmt = DebeziumJsonFormat(None, {"include-schema.enabled": "true"})
    drop = DataChangeEvent(TABLE, Op.TRUNCATE, None, None, None, 0, {}, schema_change=DROP_TABLE)
    with pytest.raises(EncodeError, match=r"of table kafka_test\.customers.*DROP TABLE \(or TRUNCATE\) of a table whose definition"):
        fmt.encode_event(drop)
    assert json.loads(DebeziumJsonFormat(None, {}).encode_event(drop))["op"] == "t"  # without the wrapper: fine
