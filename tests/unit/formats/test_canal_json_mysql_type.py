"""canal-json's ``mysqlType`` types the rows when the format has no schema."""

import datetime as dt
import json
from decimal import Decimal

import pytest

from changelake.changelog.types import DataType, TypeRoot
from changelake.formats import create_format
from changelake.formats.mysql_type_text import data_type_of_mysql

MESSAGE = {
    "id": 7, "database": "shop", "table": "orders", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
    "es": 1709287200000, "ts": 1709287200733, "sql": "", "gtid": "",
    "sqlType": {"id": 4, "customer": 12, "amount": 3, "status": 4, "created_at": 93, "updated_at": 93},
    "mysqlType": {"id": "int unsigned", "customer": "varchar(64)", "amount": "decimal(10,2)",
                  "status": "enum('new','paid','shipped')", "created_at": "datetime(3)", "updated_at": "timestamp(3)"},
    "data": [{"id": "1001", "customer": "Customer A", "amount": "12.34", "status": "1",
              "created_at": "2024-03-01 10:00:00.250", "updated_at": "2024-03-01 10:00:00.250Z"}],
    "old": None,
}


def test_mysql_type_gives_the_event_its_exact_schema_and_values():
    [event] = create_format("canal-json", None, {}).decode_events(json.dumps(MESSAGE).encode())
    schema = event.schema
    assert schema is not None and schema.primary_key == ("id",)
    assert schema.column("amount").type == DataType.decimal(10, 2)
    assert schema.column("id").type == DataType(TypeRoot.BIGINT, False)
    assert schema.column("created_at").type.root is TypeRoot.TIMESTAMP
    assert schema.column("updated_at").type.root is TypeRoot.TIMESTAMP_LTZ
    assert event.after["amount"] == Decimal("12.34") and event.after["id"] == 1001
    assert event.after["created_at"] == dt.datetime(2024, 3, 1, 10, 0, 0, 250_000)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("tinyint(1)", DataType(TypeRoot.BOOLEAN)),
        ("tinyint(4) unsigned", DataType(TypeRoot.SMALLINT)),
        ("bigint(20) unsigned", DataType.decimal(20, 0)),
        ("bigint", DataType(TypeRoot.BIGINT)),
        ("decimal(12,2)", DataType.decimal(12, 2)),
        ("binary(4)", DataType(TypeRoot.BINARY, length=4)),
        ("longblob", DataType(TypeRoot.BYTES)),
        ("json", DataType(TypeRoot.STRING)),
        ("set('a','b')", DataType(TypeRoot.STRING)),
        ("time(3)", DataType(TypeRoot.TIME, precision=3)),
        ("date", DataType(TypeRoot.DATE)),
        ("double", DataType(TypeRoot.DOUBLE)),
    ],
)
def test_mysql_type_text(text, expected):
    assert data_type_of_mysql(text) == expected
