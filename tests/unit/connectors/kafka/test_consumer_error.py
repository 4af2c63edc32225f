"""One message text for a consumed Kafka error (``kafka_common.consumer_error``), in each record
reader: a partition's error names topic, partition and offset; an error of the consumer itself
(librdkafka gives it without a topic) names what the consumer reads, not "topic 'None'"."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from changelake.changelog import DataType, Schema
from changelake.connectors import kafka_table, upsert_kafka
from changelake.connectors.errors import SourceError
from changelake.connectors.kafka.source import KafkaPipelineSource
from changelake.connectors.kafka_common import consumer_error

SCHEMA = Schema.of([("id", DataType.of("BIGINT")), ("name", DataType.of("STRING"))], primary_key=["id"])


class _Message:
    """A consumed message that carries an error, as librdkafka hands it over."""

    def __init__(self, err: KafkaError, topic: str | None, partition: int | None, offset: int | None) -> None:
        self._err, self._topic, self._partition, self._offset = err, topic, partition, offset

    def error(self) -> KafkaError:
        return self._err

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes | None:
        return None

    def value(self) -> bytes | None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (0, 0)


FATAL = KafkaError(KafkaError._FATAL, "Fatal consumer error: GroupMaxSizeReached", fatal=True)
PARTITION = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed")


def test_a_partition_error_names_topic_partition_and_offset() -> None:
    err = consumer_error(PARTITION, "shop.orders", 3, 17, "topics ['shop.orders']")
    assert isinstance(err, SourceError)
    assert str(err) == "Kafka error on topic 'shop.orders' partition 3 at offset 17: Topic authorization failed"
    # librdkafka's invalid offset (-1001) is left out
    assert " at offset" not in str(consumer_error(PARTITION, "t", 0, -1001, "topics ['t']"))


def test_an_error_of_the_consumer_names_what_it_reads() -> None:
    text = str(consumer_error(FATAL, None, None, -1001, "topics ['a', 'b']"))
    assert text == "Kafka consumer error (reading topics ['a', 'b']): Fatal consumer error: GroupMaxSizeReached (fatal)"
    assert "None" not in text


def test_kafka_pipeline_source_names_its_topics_for_an_error_of_the_consumer() -> None:
    source = KafkaPipelineSource({"properties.bootstrap.servers": "x:1", "topic": "shop.orders;shop.items",
                                  "value.format": "debezium-json"}, "g")
    msg = _Message(FATAL, None, None, -1001)
    with pytest.raises(SourceError, match=r"^Kafka consumer error \(reading topic\(s\) \['shop.orders', 'shop.items'\]\)"):
        source._not_a_record(None, msg, FATAL, (str(msg.topic()), 0), -1001)  # type: ignore[arg-type]
    msg = _Message(PARTITION, "shop.orders", 2, 40)
    with pytest.raises(SourceError, match=r"^Kafka error on topic 'shop.orders' partition 2 at offset 40: "):
        source._not_a_record(None, msg, PARTITION, ("shop.orders", 2), 40)  # type: ignore[arg-type]


class _Consumer:
    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        out, self.messages = self.messages, []
        return out


def test_upsert_kafka_source_names_its_topic_for_an_error_of_the_consumer() -> None:
    source = upsert_kafka.create_source({"connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": "h:9092",
                                         "key.format": "json", "value.format": "json"}, SCHEMA)
    with pytest.raises(SourceError, match=r"^Kafka consumer error \(reading topics \['t'\]\): .*\(fatal\)$"):
        source._poll_messages(_Consumer([]), [_Message(FATAL, None, None, -1001)])  # type: ignore[arg-type]


def test_kafka_table_source_names_its_topic_for_an_error_of_the_consumer() -> None:
    schema = Schema.of([("id", DataType.of("BIGINT")), ("name", DataType.of("STRING"))])
    source = kafka_table.create_source({"connector": "kafka", "topic": "t", "properties.bootstrap.servers": "h:9092",
                                        "format": "json"}, schema)
    source._consumer = _Consumer([_Message(FATAL, None, None, -1001)])  # type: ignore[assignment]
    with pytest.raises(SourceError, match=r"^Kafka consumer error \(reading topic\(s\) \['t'\]\): .*\(fatal\)$"):
        source.poll(1.0)
