"""Flink CDC record keys of the Kafka pipeline sink (formats/json_values.py, its key section), byte for byte."""

import datetime
import decimal

import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import DataType, TypeRoot
from changelake.formats.json_values import KeyFormat
from changelake.formats.json_values import encode_event_key as encode_key

CUSTOMERS = TableId("kafka_test", "customers")
SCHEMA = Schema.of(
    [
        ("id", DataType(TypeRoot.INT, nullable=False)),
        ("name", DataType(TypeRoot.STRING)),
        ("address", DataType(TypeRoot.STRING)),
        ("phone_number", DataType(TypeRoot.STRING)),
        ("age", DataType(TypeRoot.INT)),
    ],
    primary_key=["id"],
)
BEFORE = {"id": 4, "name": "John", "address": "New York", "phone_number": "2222", "age": 12}
AFTER = {**BEFORE, "phone_number": "1234"}


def test_key_bytes_of_the_seed_update_are_flink_cdc_bytes():
    event = DataChangeEvent(CUSTOMERS, Op.UPDATE, BEFORE, AFTER, SCHEMA)
    assert encode_key(event) == b'{"TableId":"kafka_test.customers","id":4}'
    assert encode_key(event, KeyFormat.CSV) == b"kafka_test.customers,4"


def test_delete_key_uses_before_image():
    event = DataChangeEvent(CUSTOMERS, Op.DELETE, {**BEFORE, "id": 9}, None, SCHEMA)
    assert encode_key(event) == b'{"TableId":"kafka_test.customers","id":9}'


def test_update_key_uses_after_image_when_the_key_changes():
    event = DataChangeEvent(CUSTOMERS, Op.UPDATE, BEFORE, {**AFTER, "id": 5}, SCHEMA)
    assert encode_key(event) == b'{"TableId":"kafka_test.customers","id":5}'


def test_table_without_primary_key_is_keyed_by_table_only():
    schema = Schema.of([("x", DataType(TypeRoot.INT))])
    event = DataChangeEvent(CUSTOMERS, Op.CREATE, None, {"x": 1}, schema)
    assert encode_key(event) == b'{"TableId":"kafka_test.customers"}'
    assert encode_key(DataChangeEvent(CUSTOMERS, Op.CREATE, None, {"x": 1})) == b'{"TableId":"kafka_test.customers"}'


def test_composite_key_in_primary_key_order_with_flink_value_encoding():
    schema = Schema.of(
        [
            ("price", DataType.decimal(10, 2)),
            ("name", DataType(TypeRoot.STRING)),
            ("at", DataType(TypeRoot.TIMESTAMP, precision=3)),
            ("day", DataType(TypeRoot.DATE)),
        ],
        primary_key=["name", "price", "at", "day"],
    )
    row = {"price": decimal.Decimal("7.10"), "name": 'Zoë "Z", Jr', "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 120000),
           "day": datetime.date(2024, 2, 29)}
    event = DataChangeEvent(TableId("shop", "orders"), Op.READ, None, row, schema)
    assert encode_key(event) == (
        '{"TableId":"shop.orders","name":"Zoë \\"Z\\", Jr","price":7.10,"at":"2024-01-02 03:04:05.12",'
        '"day":"2024-02-29"}'
    ).encode("utf-8")
    assert encode_key(event, KeyFormat.CSV) == (
        'shop.orders,"Zoë ""Z"", Jr",7.10,2024-01-02 03:04:05.12,2024-02-29'
    ).encode("utf-8")


def test_routed_table_id_is_the_key_table_id():
    event = DataChangeEvent(TableId("ods", "all_customers"), Op.CREATE, None, AFTER, SCHEMA)
    assert encode_key(event) == b'{"TableId":"ods.all_customers","id":4}'


@pytest.mark.parametrize("fmt", [KeyFormat.JSON, KeyFormat.CSV])
def test_key_bytes_are_stable_across_calls(fmt):
    event = DataChangeEvent(CUSTOMERS, Op.CREATE, None, AFTER, SCHEMA)
    assert encode_key(event, fmt) == encode_key(DataChangeEvent(CUSTOMERS, Op.CREATE, None, dict(AFTER), SCHEMA), fmt)
