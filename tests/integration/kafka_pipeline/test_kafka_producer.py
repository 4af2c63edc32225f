"""The shared Kafka producer wrapper (connectors/kafka/sink.py) against the real broker."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from changelake.connectors.errors import ConnectorError, SinkFlushError
from changelake.connectors.kafka.sink import KafkaProducer, admin_config
from changelake.connectors.metrics import SinkMetrics


def read_all(bootstrap: str, topic: str, isolation: str, timeout_s: float = 20.0) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of partition 0 of ``topic`` visible at ``isolation``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": isolation})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(m.error())
            out.append((m.key(), m.value()))
    finally:
        c.close()
    raise AssertionError(f"did not reach the end of {topic}")


def test_a_delivery_error_surfaces_at_flush_naming_topic_and_partition(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=1, config={"max.message.bytes": "2000"})
    metrics = SinkMetrics()
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap}, metrics=metrics)
    producer.open()
    try:
        producer.produce(topic, b"small", b"ok")
        producer.flush(30)
        producer.produce(topic, b"big", b"x" * 50_000)
        producer.produce(topic, b"big2", b"y" * 50_000)
        with pytest.raises(SinkFlushError) as err:
            producer.flush(30)
        assert f"delivery to topic '{topic}' partition 0 failed" in str(err.value)
        assert "(and 1 more failed records)" in str(err.value)
        assert (err.value.topic, err.value.partition, err.value.failed) == (topic, 0, 2)
        assert metrics.snapshot()["numRecordsOutErrors"] == 2
        producer.flush(30)  # the errors were raised once and then forgotten
    finally:
        producer.close()
    assert read_all(kafka_bootstrap, topic, "read_uncommitted") == [(b"small", b"ok")]


def test_an_aborted_transaction_leaves_nothing_visible_to_read_committed(kafka_bootstrap, topic_factory):
    topic = topic_factory(partitions=1)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.open(30)
    try:
        producer.begin()
        producer.produce(topic, b"k1", b"aborted-1")
        producer.produce(topic, b"k2", None)
        producer.flush(30)  # on the broker, but in the open transaction
        producer.abort(30)
        assert not producer.in_transaction
        producer.begin()
        producer.produce(topic, b"k3", b"committed")
        producer.commit(30)
    finally:
        producer.close()
    assert read_all(kafka_bootstrap, topic, "read_committed") == [(b"k3", b"committed")]
    assert len(read_all(kafka_bootstrap, topic, "read_uncommitted")) == 3  # the aborted ones did reach the log


def test_a_fenced_producer_fails_its_commit_with_the_transactional_id_and_its_records_stay_invisible(
    kafka_bootstrap, topic_factory
):
    topic, tid = topic_factory(partitions=1), f"tx-{uuid.uuid4().hex[:8]}"
    zombie = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "transactional.id": tid})
    zombie.open(30)
    zombie.begin()
    zombie.produce(topic, b"z", b"zombie")
    zombie.client.flush(10)
    successor = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "transactional.id": tid})
    successor.open(30)  # init_transactions fences the zombie and aborts its open transaction
    try:
        with pytest.raises(SinkFlushError, match=rf"commit of the transaction of '{tid}' failed"):
            zombie.commit(10)
        assert not zombie.in_transaction
        successor.begin()
        successor.produce(topic, b"s", b"successor")
        successor.commit(30)
    finally:
        successor.close()
        zombie.close(1)
    assert read_all(kafka_bootstrap, topic, "read_committed") == [(b"s", b"successor")]


def test_transactions_need_a_transactional_id_and_an_open_producer(kafka_bootstrap):
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
    with pytest.raises(ConnectorError, match="not open"):
        producer.produce("t", b"k", b"v")
    producer.open()
    try:
        with pytest.raises(ConnectorError, match="needs a transactional producer"):
            producer.begin()
    finally:
        assert producer.close() == 0
        assert producer.close() == 0  # idempotent


def test_admin_config_drops_producer_only_keys():
    conf = {"bootstrap.servers": "h:1", "acks": "all", "enable.idempotence": "true", "linger.ms": "5",
            "transactional.id": "x", "security.protocol": "SASL_SSL"}
    assert admin_config(conf) == {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"}


def test_a_record_over_the_size_limit_names_both_settings_to_raise(kafka_bootstrap, topic_factory):
    """A 4 MB BLOB row (Pipeline 1 with default limits) is refused by librdkafka's message.max.bytes:
    the error names the record's size and both limits, the producer's and the topic's."""
    topic = topic_factory(partitions=1)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap}, metrics=SinkMetrics())
    producer.open()
    try:
        with pytest.raises(SinkFlushError) as err:
            producer.produce(topic, b"big", b"x" * 2_000_000)
            producer.flush(30)
        message = str(err.value)
        assert "2000000 bytes" in message
        assert "'properties.message.max.bytes'" in message and "'max.message.bytes'" in message
    finally:
        producer.close()


def test_produce_many_names_both_settings_for_a_record_over_the_size_limit(kafka_bootstrap, topic_factory):
    """The Kafka pipeline sink's batch path (produce_many) gives the same error for a too-large
    record, and the records before it are queued."""
    topic = topic_factory(partitions=1)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap}, metrics=SinkMetrics())
    producer.open()
    try:
        with pytest.raises(SinkFlushError) as err:
            producer.produce_many([(topic, b"k", b"v", None, None), (topic, b"big", b"x" * 2_000_000, 0, [("h", b"1")])])
        message = str(err.value)
        assert "2000000 bytes" in message
        assert "'properties.message.max.bytes'" in message and "'max.message.bytes'" in message
        assert len(producer.client) == 1  # the first record is queued
    finally:
        producer.close()
