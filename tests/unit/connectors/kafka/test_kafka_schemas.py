"""Schema fingerprints, schema-topic records and the headers that name them (no broker needed)."""

import pytest

from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.kafka.schemas import (
    DEFAULT_SCHEMA_TOPIC,
    SCHEMA_ID_HEADER,
    SCHEMA_TOPIC_HEADER,
    decode_schema_record,
    encode_schema_record,
    schema_fingerprint,
    schema_header,
)
from changelake.connectors.kafka.sink_options import KafkaSinkOptions
from changelake.connectors.kafka.source_options import InferenceStrategy, KafkaSourceOptions

BS = {"properties.bootstrap.servers": "127.0.0.1:9092"}

ORDERS = Schema.of(
    [
        ("order_id", DataType(TypeRoot.BIGINT, False)),
        ("amount", DataType.decimal(12, 2)),
        ("updated_at", DataType(TypeRoot.TIMESTAMP, precision=3)),
        ("paid_at", DataType(TypeRoot.TIMESTAMP_LTZ, precision=3)),
        ("tag", DataType(TypeRoot.BINARY, length=4)),
        ("flag", DataType(TypeRoot.BOOLEAN)),
        ("customer", DataType(TypeRoot.VARCHAR, length=64)),
    ],
    ["order_id"],
)


def test_schema_record_round_trips_exact_types_and_key():
    key, value = encode_schema_record(TableId("shop", "orders"), ORDERS)
    assert key.decode() == schema_fingerprint(ORDERS)
    table, schema = decode_schema_record(value)
    assert table == "shop.orders"
    assert schema == ORDERS


def test_fingerprint_changes_with_a_type_but_not_with_the_table():
    wider = Schema.of([(c.name, DataType.decimal(14, 2) if c.name == "amount" else c.type) for c in ORDERS.columns],
                      ORDERS.primary_key)
    assert len(schema_fingerprint(ORDERS)) == 32
    assert schema_fingerprint(wider) != schema_fingerprint(ORDERS)
    assert encode_schema_record(TableId("a", "t"), ORDERS)[0] == encode_schema_record(TableId("b", "u"), ORDERS)[0]


def test_schema_header():
    assert schema_header([("x", b"1")]) is None
    assert schema_header([(SCHEMA_ID_HEADER, b"ab" * 16)]) == (DEFAULT_SCHEMA_TOPIC, "ab" * 16)
    assert schema_header([(SCHEMA_TOPIC_HEADER, b"s"), (SCHEMA_ID_HEADER, b"cd")]) == ("s", "cd")


def test_decode_schema_record_refuses_garbage():
    with pytest.raises(ValueError):
        decode_schema_record(b'{"table":"t"}')


def test_sink_schema_topic_option():
    assert KafkaSinkOptions.from_options(BS, "p").schema_topic == "changelake-schemas"
    assert KafkaSinkOptions.from_options({**BS, "sink.schema-topic": "s"}, "p").schema_topic == "s"
    assert KafkaSinkOptions.from_options({**BS, "sink.schema-topic": ""}, "p").schema_topic is None


def test_dead_letter_topic_needs_ignore_parse_errors():
    with pytest.raises(OptionValidationError) as info:
        KafkaSourceOptions.from_options({**BS, "topic": "t", "dead-letter.topic": "dlq"})
    assert info.value.option == "dead-letter.topic"
    assert "'dead-letter.topic' = 'dlq' needs 'debezium-json.ignore-parse-errors' = 'true'" in str(info.value)
    ok = KafkaSourceOptions.from_options({**BS, "topic": "t", "dead-letter.topic": "dlq",
                                          "debezium-json.ignore-parse-errors": "true"})
    assert ok.dead_letter_topic == "dlq" and ok.ignore_parse_errors


def test_schema_inference_strategy():
    assert KafkaSourceOptions.from_options({**BS, "topic": "t"}).inference_strategy is InferenceStrategy.CONTINUOUS
    opts = KafkaSourceOptions.from_options({**BS, "topic": "t", "schema.inference.strategy": "static"})
    assert opts.inference_strategy is InferenceStrategy.STATIC
    with pytest.raises(OptionValidationError) as info:
        KafkaSourceOptions.from_options({**BS, "topic": "t", "schema.inference.strategy": "sometimes"})
    assert "schema.inference.strategy" in str(info.value)
