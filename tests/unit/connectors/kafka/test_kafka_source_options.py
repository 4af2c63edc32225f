"""Kafka pipeline source options (Alibaba Kafka YAML source + Flink Kafka scan options)."""

import pytest

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.kafka.sink_options import ValueFormat
from changelake.connectors.kafka.source_options import BoundedMode, KafkaSourceOptions, StartupMode

BS = {"properties.bootstrap.servers": "127.0.0.1:9092"}


def build(**extra):
    return KafkaSourceOptions.from_options({**BS, **extra})


def test_seed_pipeline_2_source():
    o = KafkaSourceOptions.from_options({
        "type": "kafka", "name": "Kafka Source", **BS, "topic": "inventory",
        "scan.startup.mode": "earliest-offset", "value.format": "debezium-json",
        "debezium-json.distributed-tables": "true",
    })
    assert o.topics == ("inventory",)
    assert o.startup_mode is StartupMode.EARLIEST_OFFSET
    assert o.value_format is ValueFormat.DEBEZIUM_JSON
    assert o.distributed_tables is True
    assert o.format_options == {}
    assert o.bounded_mode is BoundedMode.UNBOUNDED


def test_topic_list_pattern_and_format_options():
    o = build(topic="a; b", **{"value.format": "canal-json", "canal-json.ignore-parse-errors": "true",
                               "canal-json.timestamp-format.standard": "ISO-8601"})
    assert o.topics == ("a", "b")
    assert o.ignore_parse_errors is True
    assert o.format_options == {"timestamp-format.standard": "ISO-8601"}
    p = build(**{"topic-pattern": r"kafka_test\..*"})
    assert p.topics == () and p.topic_pattern.fullmatch("kafka_test.customers")


def test_specific_offsets_and_timestamp():
    o = build(topic="t", **{"scan.startup.mode": "specific-offsets",
                            "scan.startup.specific-offsets": "partition:0,offset:42;partition:1,offset:300"})
    assert o.specific_offsets == {("t", 0): 42, ("t", 1): 300}
    o = build(topic="a;b", **{"scan.startup.mode": "specific-offsets",
                              "scan.startup.specific-offsets": "topic:b,partition:0,offset:7"})
    assert o.specific_offsets == {("b", 0): 7}
    o = build(topic="t", **{"scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": "1700000000000"})
    assert o.startup_timestamp_ms == 1700000000000


@pytest.mark.parametrize(
    "extra, message",
    [
        ({}, "Either 'topic' or 'topic-pattern' must be set."),
        ({"topic": "a", "topic-pattern": "b"}, "Option 'topic' and 'topic-pattern' shouldn't be set together."),
        ({"topic": "a", "scan.startup.mode": "specific-offsets"},
         "'scan.startup.specific-offsets' is required in 'specific-offsets' startup mode but missing."),
        ({"topic": "a", "scan.startup.mode": "timestamp"},
         "'scan.startup.timestamp-millis' is required in 'timestamp' startup mode but missing."),
        ({"topic": "a", "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "p0:42"},
         "Invalid properties 'scan.startup.specific-offsets' should follow the format "
         "'partition:0,offset:42;partition:1,offset:300' (or 'topic:t,partition:0,offset:42' with several topics), "
         "but is 'p0:42'."),
        ({"topic": "a", "scan.startup.mode": "initial"},
         "Could not parse value 'initial' for key 'scan.startup.mode'. Expected one of: "
         "[earliest-offset, latest-offset, group-offsets, specific-offsets, timestamp]"),
        ({"topic": "a", "debezium-json.distributed-tables": "yes"},
         "Could not parse value 'yes' for key 'debezium-json.distributed-tables'. Expected a boolean (true or false)."),
        ({"topic-pattern": "("}, "Invalid regular expression '(' for option 'topic-pattern': missing ), unterminated "
         "subpattern at position 0"),
    ],
)
def test_negative_paths(extra, message):
    with pytest.raises(OptionValidationError) as info:
        build(**extra)
    assert str(info.value) == message


def test_unknown_keys_and_other_format_prefixes_are_rejected():
    with pytest.raises(OptionValidationError) as info:
        build(topic="a", **{"canal-json.distributed-tables": "true"})
    assert str(info.value).startswith(
        "Unsupported options found for 'kafka'.\n\nUnsupported options:\n\ncanal-json.distributed-tables\n\n"
    )


def test_missing_bootstrap():
    with pytest.raises(OptionValidationError, match="Missing required options are:\n\nproperties.bootstrap.servers"):
        KafkaSourceOptions.from_options({"topic": "a"})
