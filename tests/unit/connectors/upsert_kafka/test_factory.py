"""upsert-kafka factory: valid declarations and every negative path with its message."""

from __future__ import annotations

from datetime import timedelta

import pytest

from changelake.changelog import Schema, parse_data_type
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.upsert_kafka import factory
from changelake.connectors.upsert_kafka.ddl import parse_create_table
from changelake.connectors.upsert_kafka.layout import RowLayout
from changelake.connectors.upsert_kafka.options import (
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    OPTIONS,
    BoundedMode,
    ChangelogModeOption,
    DeliveryGuarantee,
    NullKeyMode,
    ValueFieldsInclude,
    describe_options,
    parse_duration,
)

SCHEMA = Schema.of(
    [("region", parse_data_type("STRING NOT NULL")), ("pv", parse_data_type("BIGINT")), ("uv", parse_data_type("BIGINT"))],
    ["region"],
)
NO_PK = Schema.of([("region", parse_data_type("STRING")), ("pv", parse_data_type("BIGINT"))])
PREFIXED = Schema.of(
    [("k_region", parse_data_type("STRING NOT NULL")), ("k_id", parse_data_type("INT NOT NULL")), ("pv", parse_data_type("BIGINT"))],
    ["k_id", "k_region"],
)


def base(**extra: str) -> dict[str, str]:
    opts = {
        "connector": "upsert-kafka",
        "topic": "pv",
        "properties.bootstrap.servers": "localhost:9092",
        "key.format": "json",
        "value.format": "json",
    }
    opts.update(extra)
    return opts


def with_(opts: dict[str, str], **kv: str) -> dict[str, str]:
    out = dict(opts)
    out.update(kv)
    return out


def without(opts: dict[str, str], *keys: str) -> dict[str, str]:
    return {k: v for k, v in opts.items() if k not in keys}


def fails(opts, schema=SCHEMA) -> OptionValidationError:
    with pytest.raises(OptionValidationError) as info:
        factory.validate_options(opts, schema)
    return info.value


# ==== positive ========================================================================================


def test_defaults():
    o = factory.validate_options(base(), SCHEMA)
    assert o.topics == ("pv",)
    assert o.single_topic == "pv"
    assert o.key_format == o.value_format == "json"
    assert o.value_fields_include is ValueFieldsInclude.ALL
    assert o.sink_delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE
    assert o.scan_bounded_mode is BoundedMode.UNBOUNDED
    assert o.scan_null_key_mode is NullKeyMode.FAIL
    assert o.scan_changelog_mode is ChangelogModeOption.UPSERT
    assert o.transaction_timeout_ms == DEFAULT_TRANSACTION_TIMEOUT_MS <= 900_000
    assert not o.buffering_enabled
    assert o.properties == {"bootstrap.servers": "localhost:9092"}


def test_full_sink_declaration():
    o = factory.validate_options(
        with_(
            base(),
            **{
                "topic": "a; b",
                "properties.group.id": "g1",
                "properties.transaction.timeout.ms": "60000",
                "value.fields-include": "except_key",  # enums are case-insensitive (Flink)
                "sink.parallelism": "2",
                "sink.buffer-flush.max-rows": "100",
                "sink.buffer-flush.interval": "1 s",
                "sink.delivery-guarantee": "EXACTLY-ONCE",
                "sink.transactional-id-prefix": "job-1",
                "key.json.ignore-parse-errors": "true",
                "value.json.ignore-parse-errors": "true",
            },
        ),
        SCHEMA,
    )
    assert o.topics == ("a", "b") and o.single_topic is None
    assert o.properties == {"bootstrap.servers": "localhost:9092", "group.id": "g1"}
    assert o.transaction_timeout_ms == 60000
    assert o.value_fields_include is ValueFieldsInclude.EXCEPT_KEY
    assert o.sink_parallelism == 2
    assert o.buffering_enabled and o.buffer_flush_interval_ms == 1000
    assert o.sink_delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
    assert o.key_format_options == {"ignore-parse-errors": "true"}
    assert o.value_format_options == {"ignore-parse-errors": "true"}


def test_format_alias_from_the_seed():
    o = factory.validate_options(with_(without(base(), "value.format"), format="csv", **{"csv.ignore-parse-errors": "true"}), SCHEMA)
    assert o.value_format == "csv"
    assert o.value_format_options == {"ignore-parse-errors": "true"}


def test_ddl_declaration_is_accepted():
    decl = parse_create_table(
        "CREATE TABLE pv (region STRING, pv BIGINT, uv BIGINT, PRIMARY KEY (region) NOT ENFORCED) WITH ("
        "'connector' = 'upsert-kafka', 'topic' = 'pv', 'properties.bootstrap.servers' = 'h:1', "
        "'key.format' = 'csv', 'value.format' = 'avro', 'scan.bounded.mode' = 'latest-offset')"
    )
    o = factory.validate_options(decl)
    assert (o.key_format, o.value_format, o.scan_bounded_mode) == ("csv", "avro", BoundedMode.LATEST_OFFSET)


@pytest.mark.parametrize(
    "text,ms",
    [("1 s", 1000), ("500ms", 500), ("500", 500), ("2 min", 120_000), ("1h", 3_600_000), ("3 sec", 3000), ("1 d", 86_400_000)],
)
def test_durations(text, ms):
    assert parse_duration(text) == timedelta(milliseconds=ms)


def test_bounded_modes():
    o = factory.validate_options(base(**{"scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "partition:0,offset:42;partition:1,offset:300"}), SCHEMA)
    assert o.scan_bounded_specific_offsets == {0: 42, 1: 300}
    o = factory.validate_options(base(**{"scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": "1700000000000"}), SCHEMA)
    assert o.scan_bounded_timestamp_millis == 1_700_000_000_000
    o = factory.validate_options(base(**{"scan.bounded.mode": "group-offsets", "properties.group.id": "g"}), SCHEMA)
    assert o.scan_bounded_mode is BoundedMode.GROUP_OFFSETS


def test_key_prefix_is_stripped_in_the_key_layout():
    o = factory.validate_options(base(**{"key.fields-prefix": "k_", "value.fields-include": "EXCEPT_KEY"}), PREFIXED)
    layout = RowLayout(PREFIXED, o)
    assert layout.key_schema.names == ["id", "region"]  # PK order, prefix stripped
    assert layout.value_schema.names == ["pv"]
    row = {"k_region": "eu", "k_id": 1, "pv": 5}
    assert layout.key_values(row) == {"id": 1, "region": "eu"}
    assert layout.table_row({"id": 1, "region": "eu"}, {"pv": 5}) == row


def test_all_layout_value_wins_over_key():
    layout = RowLayout(SCHEMA, factory.validate_options(base(), SCHEMA))
    assert layout.value_schema.names == ["region", "pv", "uv"]
    assert layout.table_row({"region": "from-key"}, {"region": "from-value", "pv": 1, "uv": 2}) == {
        "region": "from-value", "pv": 1, "uv": 2,
    }
    assert layout.table_row({"region": "k"}, None) == {"region": "k", "pv": None, "uv": None}


def test_options_declared_once_and_documented():
    keys = [o.key for o in OPTIONS]
    assert len(keys) == len(set(keys))
    table = describe_options()
    for k in keys:
        assert f"`{k}`" in table
    assert all(o.description for o in OPTIONS)


# ==== Negative tests ==================================================================================


@pytest.mark.parametrize(
    "key,value",
    [
        ("key.fields", "region"),
        ("scan.startup.mode", "earliest-offset"),
        ("scan.startup.timestamp-millis", "1"),
        ("sink.partitioner", "fixed"),
        ("sink.semantic", "exactly-once"),
        ("no.such.option", "x"),
        ("value.csv.field-delimiter", ";"),  # options of a format that is not the value format
    ],
)
def test_unsupported_options(key, value):
    err = fails(with_(base(), **{key: value}))
    msg = str(err)
    assert msg.startswith("Unsupported options found for 'upsert-kafka'.")
    assert f"Unsupported options:\n\n{key}\n" in msg
    assert "Supported options:" in msg and "key.format" in msg and "properties.*" in msg
    assert err.option == key


@pytest.mark.parametrize(
    "key", ["properties.key.deserializer", "properties.value.deserializer", "properties.key.serializer", "properties.value.serializer"]
)
def test_refused_client_properties(key):
    err = fails(with_(base(), **{key: "org.apache.kafka.common.serialization.StringDeserializer"}))
    assert f"Option '{key}' is not allowed for 'upsert-kafka'" in str(err)
    assert err.option == key


@pytest.mark.parametrize("missing", ["connector", "properties.bootstrap.servers", "key.format", "value.format"])
def test_missing_required(missing):
    err = fails(without(base(), missing))
    assert str(err) == f"One or more required options are missing.\n\nMissing required options are:\n\n{missing}"


def test_unknown_checked_before_required():
    err = fails(with_(without(base(), "key.format"), **{"sink.semantic": "x"}))
    assert "Unsupported options found" in str(err)


def test_required_checked_before_values():
    err = fails(with_(without(base(), "key.format"), **{"sink.delivery-guarantee": "bogus"}))
    assert "Missing required options are:\n\nkey.format" in str(err)


def test_values_checked_before_cross_rules():
    # both a bad enum and a half-configured buffer: the value error comes first
    err = fails(with_(base(), **{"sink.delivery-guarantee": "bogus", "sink.buffer-flush.max-rows": "10"}))
    assert err.option == "sink.delivery-guarantee"


def test_wrong_connector():
    err = fails(with_(base(), connector="kafka"))
    assert str(err) == "Option 'connector' must be 'upsert-kafka' for this factory, got 'kafka'."


def test_format_and_value_format_together():
    err = fails(with_(base(), format="json"))
    assert "Options 'format' and 'value.format' shouldn't be set together" in str(err)
    assert "format='json', value.format='json'" in str(err)


@pytest.mark.parametrize(
    "key,value,expected",
    [
        ("value.fields-include", "SOME", "Could not parse value 'SOME' for key 'value.fields-include'. Expected one of: [ALL, EXCEPT_KEY]"),
        ("sink.delivery-guarantee", "twice", "Could not parse value 'twice' for key 'sink.delivery-guarantee'. Expected one of: [none, at-least-once, exactly-once]"),
        ("scan.bounded.mode", "forever", "Expected one of: [unbounded, latest-offset, group-offsets, timestamp, specific-offsets]"),
        ("scan.null-key.mode", "maybe", "Expected one of: [fail, skip]"),
        ("scan.changelog-mode", "x", "Expected one of: [upsert, retract]"),
        ("sink.buffer-flush.max-rows", "ten", "Could not parse value 'ten' for key 'sink.buffer-flush.max-rows'. Expected an integer."),
        ("sink.buffer-flush.interval", "1 fortnight", "Could not parse value '1 fortnight' for key 'sink.buffer-flush.interval'. Expected a duration such as '30 s' or '500ms': unknown time unit 'fortnight'"),
        ("sink.buffer-flush.interval", "soon", "expected a duration such as '500 ms'"),
        ("sink.parallelism", "0", "Option 'sink.parallelism' must be >= 1, got 0."),
        ("scan.bounded.timestamp-millis", "-5", "Option 'scan.bounded.timestamp-millis' must be >= 0 (ms since epoch), got -5."),
        ("topic", " ; ", "Option 'topic' must name at least one topic, got ' ; '."),
        ("sink.transactional-id-prefix", "", "Option 'sink.transactional-id-prefix' must be 1..64000 bytes UTF-8, got 0 bytes."),
    ],
)
def test_bad_values(key, value, expected):
    err = fails(with_(base(), **{key: value}))
    assert expected in str(err)
    assert err.option == key


def test_bad_topic_pattern():
    err = fails(with_(without(base(), "topic"), **{"topic-pattern": "(unclosed"}))
    assert "Option 'topic-pattern' is not a valid regex: '(unclosed'" in str(err)


@pytest.mark.parametrize("value", ["3600000", "900001"])
def test_transaction_timeout_above_broker_max(value):
    err = fails(with_(base(), **{"properties.transaction.timeout.ms": value}))
    assert f"Option 'properties.transaction.timeout.ms' = {value} ms is larger than the broker's default maximum" in str(err)
    assert "Use a value in 1..900000" in str(err)


def test_transaction_timeout_not_an_integer():
    err = fails(with_(base(), **{"properties.transaction.timeout.ms": "1h"}))
    assert "Could not parse value '1h' for key 'properties.transaction.timeout.ms'" in str(err)


def test_bad_specific_offsets():
    err = fails(base(**{"scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "p0:42"}))
    assert str(err) == (
        "Invalid properties 'scan.bounded.specific-offsets' should follow the format "
        "'partition:0,offset:42;partition:1,offset:300', but is 'p0:42'."
    )


def test_specific_offsets_missing():
    err = fails(base(**{"scan.bounded.mode": "specific-offsets"}))
    assert str(err) == "'scan.bounded.specific-offsets' is required in 'specific-offsets' bounded mode but missing."


def test_specific_offsets_single_topic_only():
    err = fails(with_(base(**{"scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "partition:0,offset:1"}), topic="a;b"))
    assert str(err) == "Currently Kafka source only supports specific offset for single topic."


def test_timestamp_mode_needs_millis():
    err = fails(base(**{"scan.bounded.mode": "timestamp"}))
    assert str(err) == "'scan.bounded.timestamp-millis' is required in 'timestamp' bounded mode but missing."


def test_group_offsets_needs_group_id():
    err = fails(base(**{"scan.bounded.mode": "group-offsets"}))
    assert "'properties.group.id' is required in 'group-offsets' bounded mode but missing." == str(err)


def test_topic_and_pattern_together():
    err = fails(with_(base(), **{"topic-pattern": "pv.*"}))
    assert str(err) == "Option 'topic' and 'topic-pattern' shouldn't be set together."


def test_topic_or_pattern_required():
    err = fails(without(base(), "topic"))
    assert str(err) == "Either 'topic' or 'topic-pattern' must be set."


def test_primary_key_required():
    err = fails(base(), NO_PK)
    assert str(err) == factory.PRIMARY_KEY_REQUIRED
    assert str(err).startswith("'upsert-kafka' tables require to define a PRIMARY KEY constraint.")


def test_key_prefix_with_all():
    err = fails(base(**{"key.fields-prefix": "k_"}), PREFIXED)
    assert str(err) == (
        "A key prefix is not allowed when option 'value.fields-include' is set to 'ALL'. "
        "Set it to 'EXCEPT_KEY' instead to avoid field overlaps."
    )


def test_key_column_without_prefix():
    schema = Schema.of([("region", parse_data_type("STRING NOT NULL")), ("pv", parse_data_type("BIGINT"))], ["region"])
    err = fails(base(**{"key.fields-prefix": "k_", "value.fields-include": "EXCEPT_KEY"}), schema)
    assert str(err) == (
        "All fields in 'key.fields' must be prefixed with 'k_' when option 'key.fields-prefix' is set "
        "but field 'region' is not prefixed."
    )


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json", "maxwell-json"])
def test_key_format_not_insert_only(fmt):
    err = fails(with_(base(), **{"key.format": fmt}))
    assert str(err) == (
        f"'upsert-kafka' connector doesn't support '{fmt}' as key format, because '{fmt}' is not in insert-only mode."
    )
    assert err.option == "key.format"


def test_value_format_not_insert_only():
    err = fails(with_(base(), **{"value.format": "debezium-json"}))
    assert str(err) == (
        "'upsert-kafka' connector doesn't support 'debezium-json' as value format, "
        "because 'debezium-json' is not in insert-only mode."
    )


def test_unknown_format():
    err = fails(with_(base(), **{"key.format": "yaml"}))
    assert "Could not find any format factory for identifier 'yaml' (key.format)" in str(err)


def test_unsupported_format_option():
    err = fails(with_(base(), **{"key.json.no-such-thing": "1"}))
    assert "Unsupported options found for format 'json': 'key.json.no-such-thing'" in str(err)
    assert "key.json.ignore-parse-errors" in str(err)


@pytest.mark.parametrize(
    "rows,interval,got",
    [("10", "0", "max-rows=10, interval=0 ms"), ("0", "1 s", "max-rows=0, interval=1000 ms"), ("-1", "500", "max-rows=-1, interval=500 ms")],
)
def test_buffer_flush_needs_both(rows, interval, got):
    err = fails(base(**{"sink.buffer-flush.max-rows": rows, "sink.buffer-flush.interval": interval}))
    assert str(err) == (
        "'sink.buffer-flush.max-rows' and 'sink.buffer-flush.interval' must be set to be greater than zero "
        f"together to enable sink buffer flushing; got {got}."
    )


def test_exactly_once_needs_prefix():
    err = fails(base(**{"sink.delivery-guarantee": "exactly-once"}))
    assert str(err) == "sink.transactional-id-prefix must be specified when using DeliveryGuarantee.EXACTLY_ONCE."


def test_mapping_without_schema():
    with pytest.raises(OptionValidationError, match="a schema is required"):
        factory.validate_options(base())


def test_messages_never_show_passwords():
    secret = "s3cr3t-pw"
    err = fails(with_(base(), **{"properties.sasl.password": secret, "sink.semantic": "x"}))
    assert secret not in str(err)


def test_bad_format_option_value_names_the_full_key():
    err = fails(with_(base(), **{"value.json.ignore-parse-errors": "maybe"}))
    assert err.option == "value.json.ignore-parse-errors"
    assert "Invalid value format options ('value.json.ignore-parse-errors')" in str(err)
    assert "maybe" in str(err)


def test_raw_key_format_needs_a_single_key_column():
    schema = Schema.of([("a", parse_data_type("STRING NOT NULL")), ("b", parse_data_type("STRING NOT NULL")), ("v", parse_data_type("INT"))], ["a", "b"])
    err = fails(with_(base(), **{"key.format": "raw"}), schema)
    assert "'raw' cannot be the key format of this table (columns ['a', 'b'])" in str(err)
    assert err.option == "key.format"
