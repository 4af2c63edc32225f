"""Options of the plain 'kafka' connector: typed values and every negative path's message (Flink's)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from changelake.changelog import DataType, Schema
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.kafka_table.options import (
    DeliveryGuarantee,
    ScanBoundedMode,
    ScanStartupMode,
    SinkPartitioner,
    ValueFieldsInclude,
    parse_options,
    parse_specific_offsets,
)

SCHEMA = Schema.of([("user_id", DataType.of("BIGINT")), ("user_region", DataType.of("STRING"))])
BASE = {"connector": "kafka", "topic": "pageviews", "properties.bootstrap.servers": "h:9092", "format": "json"}


def test_defaults_and_typed_values() -> None:
    o = parse_options(BASE, SCHEMA)
    assert o.topics == ("pageviews",) and o.topic == "pageviews"
    assert o.value_format == "json" and o.key_format is None
    assert o.properties == {"bootstrap.servers": "h:9092"}
    assert o.scan_startup_mode is ScanStartupMode.GROUP_OFFSETS  # Flink's default
    assert o.scan_bounded_mode is ScanBoundedMode.UNBOUNDED
    assert o.sink_partitioner is SinkPartitioner.DEFAULT
    assert o.sink_delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE
    assert o.value_fields_include is ValueFieldsInclude.ALL


def test_full_option_set() -> None:
    raw = {
        "connector": "kafka",
        "topic": "a;b",
        "properties.bootstrap.servers": "h:9092",
        "properties.group.id": "g1",
        "properties.sasl.password": "s3cret",
        "value.format": "debezium-json",
        "value.debezium-json.ignore-parse-errors": "true",
        "key.format": "json",
        "key.json.fail-on-missing-field": "true",
        "key.fields": "k_user_id",
        "key.fields-prefix": "k_",
        "value.fields-include": "EXCEPT_KEY",
        "scan.startup.mode": "timestamp",
        "scan.startup.timestamp-millis": "1700000000000",
        "scan.bounded.mode": "latest-offset",
        "sink.partitioner": "round-robin",
        "sink.delivery-guarantee": "EXACTLY_ONCE",
        "sink.transactional-id-prefix": "pv",
        "scan.topic-partition-discovery.interval": "5 min",
    }
    schema = Schema.of([("k_user_id", DataType.of("BIGINT")), ("user_region", DataType.of("STRING"))])
    o = parse_options(raw, schema)
    assert o.topics == ("a", "b") and o.group_id == "g1"
    assert o.value_format_options == {"ignore-parse-errors": "true"}
    assert o.key_format_options == {"fail-on-missing-field": "true"}
    assert o.key_fields == ("k_user_id",) and o.key_names == ("user_id",)
    assert o.scan_startup_timestamp_millis == 1700000000000
    assert o.sink_delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
    assert o.scan_topic_partition_discovery_interval == timedelta(minutes=5)
    assert "s3cret" not in repr(o)


def test_format_prefix_options_with_plain_format_key() -> None:
    o = parse_options({**BASE, "json.ignore-parse-errors": "true"}, SCHEMA)
    assert o.value_format_options == {"ignore-parse-errors": "true"}


def test_specific_offsets_parse() -> None:
    assert parse_specific_offsets("partition:0,offset:42;partition:1,offset:300", "k") == {0: 42, 1: 300}


# -- Negative tests -----------------------------------------------------------------------------
def test_unknown_option_lists_unsupported_and_supported() -> None:
    with pytest.raises(OptionValidationError) as ei:
        parse_options({**BASE, "sink.buffer-flush.max-rows": "10", "key.fields-prefixx": "x"}, SCHEMA)
    msg = str(ei.value)
    assert msg.startswith("Unsupported options found for 'kafka'.\n\nUnsupported options:\n\nkey.fields-prefixx\nsink.buffer-flush.max-rows\n\nSupported options:")
    assert "scan.startup.mode" in msg and "sink.partitioner" in msg
    assert ei.value.option == "key.fields-prefixx"


def test_options_of_another_format_are_unknown() -> None:
    with pytest.raises(OptionValidationError, match="Unsupported options:\n\ncsv.field-delimiter"):
        parse_options({**BASE, "csv.field-delimiter": ";"}, SCHEMA)


def test_missing_required() -> None:
    raw = {"connector": "kafka", "topic": "t"}
    with pytest.raises(OptionValidationError, match="Missing required options are:\n\nproperties.bootstrap.servers\nvalue.format"):
        parse_options(raw, SCHEMA)


def test_format_and_value_format_conflict() -> None:
    with pytest.raises(OptionValidationError, match="Option 'format' and 'value.format' shouldn't be set together"):
        parse_options({**BASE, "value.format": "csv"}, SCHEMA)


def test_topic_rules() -> None:
    raw = {k: v for k, v in BASE.items() if k != "topic"}
    with pytest.raises(OptionValidationError, match="Either 'topic' or 'topic-pattern' must be set."):
        parse_options(raw, SCHEMA)
    with pytest.raises(OptionValidationError, match="Option 'topic' and 'topic-pattern' shouldn't be set together."):
        parse_options({**BASE, "topic-pattern": "page.*"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="The 'kafka' sink writes to exactly one topic; 'topic' is a;b"):
        parse_options({**BASE, "topic": "a;b"}, SCHEMA, for_sink=True)


def test_bad_enum_values() -> None:
    with pytest.raises(OptionValidationError, match=r"Could not parse value 'newest' for key 'scan.startup.mode'. Expected one of: \[earliest-offset, latest-offset, group-offsets, timestamp, specific-offsets\]"):
        parse_options({**BASE, "scan.startup.mode": "newest"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="Could not find and instantiate partitioner class 'com.acme.P'"):
        parse_options({**BASE, "sink.partitioner": "com.acme.P"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="'sink.parallelism' must be >= 1, but is 0"):
        parse_options({**BASE, "sink.parallelism": "0"}, SCHEMA)


def test_key_rules() -> None:
    with pytest.raises(OptionValidationError, match="A key format 'key.format' requires the declaration of one or more of key fields using 'key.fields'."):
        parse_options({**BASE, "key.format": "json"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="The option 'key.fields' can only be declared if a key format is defined using 'key.format'."):
        parse_options({**BASE, "key.fields": "user_id"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="A key prefix is not allowed when option 'value.fields-include' is set to 'ALL'"):
        parse_options({**BASE, "key.format": "json", "key.fields": "user_id", "key.fields-prefix": "k_"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="must be prefixed with 'k_' when option 'key.fields-prefix' is set but field 'user_id' is not prefixed"):
        parse_options(
            {**BASE, "key.format": "json", "key.fields": "user_id", "key.fields-prefix": "k_", "value.fields-include": "EXCEPT_KEY"},
            SCHEMA,
        )
    with pytest.raises(OptionValidationError, match="Could not find the field 'uid' in the table schema for usage in the key format"):
        parse_options({**BASE, "key.format": "json", "key.fields": "uid"}, SCHEMA)


def test_scan_mode_rules() -> None:
    with pytest.raises(OptionValidationError, match="'scan.startup.timestamp-millis' is required in 'timestamp' startup mode but missing."):
        parse_options({**BASE, "scan.startup.mode": "timestamp"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="'scan.bounded.specific-offsets' is required in 'specific-offsets' bounded mode but missing."):
        parse_options({**BASE, "scan.bounded.mode": "specific-offsets"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="Invalid properties 'scan.startup.specific-offsets' should follow the format 'partition:0,offset:42;partition:1,offset:300', but is 'p0:1'."):
        parse_options({**BASE, "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "p0:1"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="Currently Kafka source only supports specific offset for single topic."):
        parse_options(
            {**BASE, "topic": "a;b", "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "partition:0,offset:1"},
            SCHEMA,
        )


def test_exactly_once_needs_prefix() -> None:
    with pytest.raises(OptionValidationError, match="sink.transactional-id-prefix must be specified when using DeliveryGuarantee.EXACTLY_ONCE."):
        parse_options({**BASE, "sink.delivery-guarantee": "exactly-once"}, SCHEMA, for_sink=True)


def test_wrong_connector() -> None:
    with pytest.raises(OptionValidationError, match="Option 'connector' must be 'kafka' for this factory, but is 'upsert-kafka'"):
        parse_options({**BASE, "connector": "upsert-kafka"}, SCHEMA)


def test_secrets_never_in_messages() -> None:
    with pytest.raises(OptionValidationError) as ei:
        parse_options({**BASE, "properties.sasl.password": "hunter2", "bogus": "1"}, SCHEMA)
    assert "hunter2" not in str(ei.value)
