"""The shared option parsers (durations, specific offsets, delivery guarantee) and their wrappers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from changelake.connectors import options
from changelake.connectors.errors import OptionValidationError


@pytest.mark.parametrize(
    ("text", "expected"),
    [("500", timedelta(milliseconds=500)), ("30s", timedelta(seconds=30)), ("2 min", timedelta(minutes=2)),
     ("1H", timedelta(hours=1)), ("1 d", timedelta(days=1)), ("1500us", timedelta(microseconds=1500))],
)
def test_parse_duration_reads_flink_units(text: str, expected: timedelta) -> None:
    assert options.parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [("soon", "expected a duration such as '500 ms', '1 s', '2 min', '1 h', got 'soon'"),
     ("1 fortnight", "unknown time unit 'fortnight' in '1 fortnight'; use one of ms, s, min, h, d")],
)
def test_parse_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        options.parse_duration(text)


def test_every_connector_parses_durations_alike_with_its_own_message() -> None:
    from changelake.connectors.kafka.sink_options import FLUSH_TIMEOUT
    from changelake.connectors.mysql_cdc.options import duration_option as mysql_duration

    assert FLUSH_TIMEOUT.parse_value("1 min") == mysql_duration("1min", "k") == timedelta(minutes=1)
    with pytest.raises(OptionValidationError, match="for key 'connect.timeout': expected a duration"):
        mysql_duration("soon", "connect.timeout")
    with pytest.raises(OptionValidationError, match="for key 'sink.flush.timeout'. Expected a duration"):
        FLUSH_TIMEOUT.parse_value("soon")


def test_partition_offsets() -> None:
    assert options.parse_partition_offsets("partition:0,offset:42; partition : 1 , offset:300;", "k") == {0: 42, 1: 300}
    for bad in ("", "partition:0", "topic:t,partition:0,offset:1"):
        with pytest.raises(ValueError, match="Invalid properties 'k' should follow the format"):
            options.parse_partition_offsets(bad, "k")


def test_topic_partition_offsets() -> None:
    got = options.parse_topic_partition_offsets("topic:a,partition:0,offset:1;partition:2,offset:3", "k", "b")
    assert got == {("a", 0): 1, ("b", 2): 3}
    assert options.parse_topic_partition_offsets("", "k", None) == {}
    with pytest.raises(OptionValidationError, match="with several topics"):
        options.parse_topic_partition_offsets("partition:0,offset:1", "k", None)


def test_one_delivery_guarantee_for_every_kafka_connector() -> None:
    from changelake.connectors.kafka.sink_options import DeliveryGuarantee as Pipeline
    from changelake.connectors.kafka_table.options import DeliveryGuarantee as Table
    from changelake.connectors.upsert_kafka.options import DeliveryGuarantee as Upsert

    assert Pipeline is Table is Upsert is options.DeliveryGuarantee
    options.validate_delivery_guarantee(options.DeliveryGuarantee.EXACTLY_ONCE, "tx")
    with pytest.raises(OptionValidationError, match="sink.transactional-id-prefix must be specified"):
        options.validate_delivery_guarantee(options.DeliveryGuarantee.EXACTLY_ONCE, None)


# -- MemorySize (Flink's MemorySize.parseBytes) ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("100", 100), ("100 bytes", 100), ("100b", 100), ("1kb", 1024), ("1 k", 1024), ("1 kibibytes", 1024),
     ("64 mb", 64 * 1024**2), ("64m", 64 * 1024**2), ("2 mebibytes", 2 * 1024**2), ("1g", 1024**3),
     ("1 GB", 1024**3), ("3 gibibytes", 3 * 1024**3), ("1t", 1024**4), ("1 tb", 1024**4),
     ("1 tebibytes", 1024**4), ("  7   KB  ", 7 * 1024), ("0", 0)],
)
def test_memory_size_accepts_flink_spellings(text: str, expected: int) -> None:
    assert options.parse_memory_size(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "argument is an empty- or whitespace-only string"),
        ("   ", "argument is an empty- or whitespace-only string"),
        ("mb", "text does not start with a number"),
        ("-1 mb", "text does not start with a number"),
        ("1.5 mb", "Memory size unit '.5 mb' does not match any of the recognized units: "
                   "(b | bytes) / (k | kb | kibibytes) / (m | mb | mebibytes) / (g | gb | gibibytes) / "
                   "(t | tb | tebibytes)"),
        ("64 megabytes", "Memory size unit 'megabytes' does not match any of the recognized units"),
        ("1 kib", "Memory size unit 'kib' does not match"),
        ("9223372036854775808", "The value '9223372036854775808' cannot be re represented as 64bit number "
                                "(numeric overflow)."),
        ("9223372036854775807 kb", "The value '9223372036854775807 kb' cannot be re represented as 64bit number "
                                   "of bytes (numeric overflow)."),
    ],
)
def test_memory_size_refuses_what_flink_refuses_with_its_message(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        options.parse_memory_size(text)
    assert message in str(err.value)


def test_memory_option_names_the_key() -> None:
    opt = options.key("sink.buffer.size").memory_type().default_value(64 * 1024**2).with_description("Buffer.")
    assert opt.get({}) == 64 * 1024**2 and opt.get({"sink.buffer.size": "1 kb"}) == 1024 and opt.type == "MemorySize"
    with pytest.raises(OptionValidationError, match="Could not parse value '1 fortnight' for key 'sink.buffer.size'. "
                       "Expected a memory size such as '64 mb': Memory size unit 'fortnight'") as err:
        opt.get({"sink.buffer.size": "1 fortnight"})
    assert err.value.option == "sink.buffer.size"


# -- value.fields-include ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("ALL", options.ValueFieldsInclude.ALL), ("all", options.ValueFieldsInclude.ALL),
     ("EXCEPT_KEY", options.ValueFieldsInclude.EXCEPT_KEY), ("except_key", options.ValueFieldsInclude.EXCEPT_KEY),
     ("except-key", options.ValueFieldsInclude.EXCEPT_KEY)],
)
def test_value_fields_include(text: str, expected: options.ValueFieldsInclude) -> None:
    assert options.parse_value_fields_include(text) is expected


def test_value_fields_include_refuses_other_values_and_is_one_enum_for_every_kafka_connector() -> None:
    from changelake.connectors.kafka_table.options import ValueFieldsInclude as Table
    from changelake.connectors.upsert_kafka.options import ValueFieldsInclude as Upsert

    with pytest.raises(ValueError, match=r"Expected one of: \[ALL, EXCEPT_KEY\]"):
        options.parse_value_fields_include("KEY_ONLY")
    assert Table is Upsert is options.ValueFieldsInclude


# -- ConfigOption ----------------------------------------------------------------------------------------


def test_config_option_is_declared_as_flink_declares_it() -> None:
    opt = options.key("sink.buffer-flush.max-rows").int_type(minimum=0).default_value(0) \
        .with_description("Max buffered keys; 0 disables.").with_unit("rows").for_scope("sink")
    assert (opt.key, opt.type, opt.default, opt.unit, opt.scope, opt.required) == (
        "sink.buffer-flush.max-rows", "Integer", 0, "rows", "sink", False)
    assert opt.description == "Max buffered keys; 0 disables."
    assert opt.get({}) == 0 and opt.get({"sink.buffer-flush.max-rows": " 12 "}) == 12 and opt.get({opt.key: None}) == 0
    with pytest.raises(OptionValidationError, match=r"^Could not parse value 'ten' for key 'sink.buffer-flush.max-rows'. "
                       r"Expected an integer.$"):
        opt.get({opt.key: "ten"})
    with pytest.raises(OptionValidationError, match=r"^The value of option 'sink.buffer-flush.max-rows' must be >= 0, "
                       r"but is -1$"):
        opt.get({opt.key: "-1"})


@pytest.mark.parametrize(
    ("option", "text", "value"),
    [
        (options.key("b").bool_type().default_value(False), "TRUE", True),
        (options.key("d").duration_type().no_default_value(), "2 min", timedelta(minutes=2)),
        (options.key("s").string_type().no_default_value(), " as is ", " as is "),
        (options.key("g").enum_type(options.DeliveryGuarantee).default_value(options.DeliveryGuarantee.NONE),
         "EXACTLY_ONCE", options.DeliveryGuarantee.EXACTLY_ONCE),
    ],
)
def test_config_option_types(option: options.ConfigOption[object], text: str, value: object) -> None:
    assert option.get({option.key: text}) == value


@pytest.mark.parametrize(
    ("option", "text", "rule"),
    [
        (options.key("b").bool_type().default_value(False), "yes", "Expected a boolean (true or false)."),
        (options.key("d").duration_type().no_default_value(), "soon", "Expected a duration such as '30 s'"),
        (options.key("g").enum_type(options.DeliveryGuarantee).no_default_value(), "twice",
         "Expected one of: [none, at-least-once, exactly-once]"),
    ],
)
def test_config_option_errors_name_key_value_and_rule(option: options.ConfigOption[object], text: str, rule: str) -> None:
    with pytest.raises(OptionValidationError) as err:
        option.get({option.key: text})
    assert str(err.value).startswith(f"Could not parse value '{text}' for key '{option.key}'. {rule}")
    assert err.value.option == option.key


def test_value_of_an_option_without_default_is_a_declaration_bug() -> None:
    with pytest.raises(TypeError, match="option 's' has no default"):
        options.key("s").string_type().no_default_value().value({})


def test_unsupported_options_are_listed_with_the_supported_ones_and_prefixes() -> None:
    declared = [options.key("topic").string_type().no_default_value(), "sink.delivery-guarantee"]
    options.validate_unsupported_options("kafka", {"topic": "t", "properties.acks": "all", "json.x": "1"}, declared,
                                         ["properties.", "json."])
    with pytest.raises(OptionValidationError) as err:
        options.validate_unsupported_options("kafka", {"topic": "t", "zeta": "1", "alpha": "2"}, declared, ["properties."])
    assert str(err.value) == (
        "Unsupported options found for 'kafka'.\n\nUnsupported options:\n\nalpha\nzeta\n\n"
        "Supported options:\n\nsink.delivery-guarantee\ntopic\nproperties.*"
    )
    assert err.value.option == "alpha"


def test_required_options_are_listed_when_missing_or_empty() -> None:
    required = [options.key("properties.bootstrap.servers").string_type().required(), "topic"]
    options.validate_required_options({"properties.bootstrap.servers": "h:1", "topic": "t"}, required)
    with pytest.raises(OptionValidationError) as err:
        options.validate_required_options({"properties.bootstrap.servers": " "}, required)
    assert str(err.value) == (
        "One or more required options are missing.\n\nMissing required options are:\n\n"
        "properties.bootstrap.servers\ntopic"
    )
