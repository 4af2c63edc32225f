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
    from changelake.connectors.mysql_cdc.options import parse_duration as mysql_duration

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
