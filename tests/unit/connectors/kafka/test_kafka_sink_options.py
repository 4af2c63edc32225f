"""Kafka pipeline sink options: Flink CDC keys, defaults and exact validation messages."""

from datetime import timedelta

import pytest

from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.kafka.sink_options import (
    DeliveryGuarantee,
    KafkaSinkOptions,
    KeyFormat,
    PartitionStrategy,
    ValueFormat,
    parse_custom_headers,
    parse_topic_mapping,
)

BS = {"properties.bootstrap.servers": "127.0.0.1:9092"}


def build(**extra):
    return KafkaSinkOptions.from_options({**BS, **extra}, pipeline_name="mysql to kafka")


def test_defaults_are_flink_cdc_defaults():
    o = build()
    assert o.value_format is ValueFormat.DEBEZIUM_JSON
    assert o.key_format is KeyFormat.JSON
    assert o.partition_strategy is PartitionStrategy.ALL_TO_ZERO
    assert o.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE
    assert o.topic is None and o.topic_mapping == ()
    assert o.add_table_id_to_header is False and o.custom_headers == ()
    assert o.transactional_id_prefix == "changelake-mysql-to-kafka"
    assert o.offsets_topic == "changelake-offsets"
    assert o.properties == {"bootstrap.servers": "127.0.0.1:9092"}


def test_seed_full_configuration_parses():
    o = KafkaSinkOptions.from_options(
        {
            "type": "kafka",
            "name": "Kafka Sink",
            **BS,
            "properties.enable.idempotence": "false",
            "sink.tableId-to-topic.mapping": "kafka_test.customers:customers;kafka_test.products:products",
            "partition.strategy": "hash-by-key",
            "value.format": "canal-json",
            "canal-json.encode.decimal-as-plain-number": "true",
            "sink.flush.timeout": "5s",
        },
        pipeline_name="p",
    )
    assert o.properties == {"bootstrap.servers": "127.0.0.1:9092", "enable.idempotence": "false"}
    assert [t for _, t in o.topic_mapping] == ["customers", "products"]
    assert o.partition_strategy is PartitionStrategy.HASH_BY_KEY
    assert o.value_format_options == {"encode.decimal-as-plain-number": "true"}
    assert o.flush_timeout == timedelta(seconds=5)


def test_format_options_of_the_chosen_formats_pass_and_others_fail():
    o = build(**{"debezium-json.include-schema.enabled": "true", "json.ignore-parse-errors": "true"})
    assert o.value_format_options == {"include-schema.enabled": "true"}
    assert o.key_format_options == {"ignore-parse-errors": "true"}
    with pytest.raises(OptionValidationError) as info:
        build(**{"canal-json.include-schema.enabled": "true"})
    assert "canal-json.include-schema.enabled" in str(info.value)


def test_unknown_option_lists_unsupported_and_supported_keys():
    with pytest.raises(OptionValidationError) as info:
        build(**{"sink.buffer-flush.max-rows": "10", "topicc": "x"})
    msg = str(info.value)
    assert msg.startswith(
        "Unsupported options found for 'kafka'.\n\nUnsupported options:\n\nsink.buffer-flush.max-rows\ntopicc\n\n"
        "Supported options:\n\n"
    )
    supported = msg.split("Supported options:\n\n")[1].split("\n")
    for key in ("key.format", "value.format", "partition.strategy", "topic", "sink.tableId-to-topic.mapping",
                "sink.add-tableId-to-header-enabled", "sink.custom-header", "sink.delivery-guarantee",
                "sink.transactional-id-prefix"):
        assert key in supported
    assert info.value.option == "sink.buffer-flush.max-rows"


def test_missing_bootstrap_servers():
    with pytest.raises(OptionValidationError) as info:
        KafkaSinkOptions.from_options({"topic": "x"}, pipeline_name="p")
    assert str(info.value) == (
        "One or more required options are missing.\n\nMissing required options are:\n\nproperties.bootstrap.servers"
    )


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("partition.strategy", "round-robin",
         "Could not parse value 'round-robin' for key 'partition.strategy'. Expected one of: [all-to-zero, hash-by-key]"),
        ("value.format", "avro",
         "Could not parse value 'avro' for key 'value.format'. Expected one of: [debezium-json, canal-json, json]"),
        ("key.format", "avro", "Could not parse value 'avro' for key 'key.format'. Expected one of: [json, csv]"),
        ("sink.delivery-guarantee", "twice",
         "Could not parse value 'twice' for key 'sink.delivery-guarantee'. Expected one of: "
         "[none, at-least-once, exactly-once]"),
        ("sink.add-tableId-to-header-enabled", "yes",
         "Could not parse value 'yes' for key 'sink.add-tableId-to-header-enabled'. Expected a boolean (true or false)."),
        ("sink.tableId-to-topic.mapping", "kafka_test.customers=customers",
         "Please check your configuration of sink.tableId-to-topic.mapping"),
        ("sink.tableId-to-topic.mapping", "a.b:c:d", "Please check your configuration of sink.tableId-to-topic.mapping"),
        ("sink.custom-header", "k1:v1,k2:v2", "sink.custom-header is malformed, please refer to the documents"),
        ("sink.topic.partitions", "0", "The value of option 'sink.topic.partitions' must be >= 1, but is 0"),
        ("type", "upsert-kafka", "Option 'type' must be 'kafka', got 'upsert-kafka'"),
        ("properties.transactional.id", "x",
         "'properties.transactional.id' is not supported; set 'sink.transactional-id-prefix' instead"),
    ],
)
def test_negative_values(key, value, message):
    with pytest.raises(OptionValidationError) as info:
        build(**{key: value})
    assert str(info.value) == message


def test_exactly_once_refuses_disabled_idempotence():
    with pytest.raises(OptionValidationError) as info:
        build(**{"sink.delivery-guarantee": "exactly-once", "properties.enable.idempotence": "false"})
    assert str(info.value) == (
        "'sink.delivery-guarantee' = 'exactly-once' needs a transactional, idempotent producer, but "
        "'properties.enable.idempotence' = 'false'; use 'at-least-once' or 'none' instead"
    )


def test_enum_values_are_case_insensitive_and_accept_flink_enum_names():
    assert build(**{"sink.delivery-guarantee": "EXACTLY_ONCE"}).delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
    assert build(**{"partition.strategy": "HASH-BY-KEY"}).partition_strategy is PartitionStrategy.HASH_BY_KEY


def test_mapping_keeps_declaration_order_and_selector_syntax():
    mapping = parse_topic_mapping(r"kafka_test.cust\.*:a;kafka_test.\.*:b")
    (s1, t1), (s2, t2) = mapping
    assert (t1, t2) == ("a", "b")
    assert s1.matches(TableId("kafka_test", "customers")) and not s1.matches(TableId("kafka_test", "products"))
    assert s2.matches(TableId("kafka_test", "products"))


def test_custom_headers_split_on_semicolon():
    assert parse_custom_headers("k1:v1; k2 : v2") == (("k1", "v1"), ("k2", "v2"))


def test_secrets_stay_out_of_repr():
    o = build(**{"properties.sasl.password": "hunter2"})
    assert "hunter2" not in repr(o)
