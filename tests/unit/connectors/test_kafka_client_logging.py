"""kafka_common's client logging (with_logger, RepeatedMessageFilter) and unavailable_error (no broker)."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException

from changelake.connectors.errors import KafkaUnavailableError
from changelake.connectors.kafka_common import (
    CLIENT_LOGGER_NAME,
    RepeatedMessageFilter,
    client_logger,
    unavailable_error,
    with_logger,
)

FAIL = ("FAIL [rdkafka#producer-%d] [thrd:127.0.0.1:29999/bootstrap]: 127.0.0.1:29999/bootstrap: Connect to "
        "ipv4#127.0.0.1:29999 failed: Connection refused (after %dms in state CONNECT)")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(CLIENT_LOGGER_NAME, logging.ERROR, __file__, 1, msg, args, None)


def test_first_line_passes_repeats_are_dropped_until_the_interval_then_one_with_a_count() -> None:
    clock = FakeClock()
    f = RepeatedMessageFilter(interval_s=30, clock=clock)
    assert f.filter(record(FAIL, 1, 0))
    # the same failure from another client instance and with another duration is the same text
    assert not f.filter(record(FAIL, 2, 3))
    clock.now += 29.9
    assert not f.filter(record(FAIL, 1, 0))
    clock.now += 0.2
    again = record(FAIL, 3, 1)
    assert f.filter(again)
    assert again.getMessage().endswith("(2 similar suppressed in the last 30 s)")
    assert "Connection refused" in again.getMessage()
    clock.now += 1
    assert not f.filter(record(FAIL, 1, 0))


def test_other_texts_pass_independently_and_memory_is_bounded() -> None:
    clock = FakeClock()
    f = RepeatedMessageFilter(interval_s=30, clock=clock, max_keys=2)
    assert f.filter(record("a"))
    assert f.filter(record("b"))
    assert not f.filter(record("a"))
    assert f.filter(record("c"))  # forgets the oldest text ('a')
    assert f.filter(record("a"))


def test_with_logger_adds_the_filtered_client_logger_and_keeps_a_given_one() -> None:
    conf = {"bootstrap.servers": "h:1"}
    out = with_logger(conf)
    assert out["logger"] is logging.getLogger(CLIENT_LOGGER_NAME) and "logger" not in conf
    assert sum(isinstance(f, RepeatedMessageFilter) for f in client_logger().filters) == 1
    mine = logging.getLogger("mine")
    assert with_logger({"logger": mine})["logger"] is mine


def test_unavailable_error_names_servers_and_timeout_never_the_password() -> None:
    conf = {"bootstrap.servers": "10.0.0.1:9092,10.0.0.2:9092", "sasl.username": "u", "sasl.password": "S3CRET"}
    exc = KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata: Local: Broker transport failure"))
    err = unavailable_error(exc, conf, 7.5)
    assert isinstance(err, KafkaUnavailableError)
    assert str(err).startswith("cannot reach Kafka at 10.0.0.1:9092,10.0.0.2:9092 within 7.5 s (Failed to get metadata")
    assert "S3CRET" not in str(err) and err.bootstrap_servers == "10.0.0.1:9092,10.0.0.2:9092" and err.timeout_s == 7.5
    assert err.kafka_error is exc.args[0]


def test_a_broker_that_answers_with_an_error_is_not_unavailable() -> None:
    exc = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not authorized"))
    assert unavailable_error(exc, {"bootstrap.servers": "h:1"}, 5) is None
