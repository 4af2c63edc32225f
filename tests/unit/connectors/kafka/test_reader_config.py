"""The record-reading consumers' librdkafka defaults (``kafka_common.reader_config``): a fetch
queue backoff short enough that a fast reader does not wait in ``consume()`` (librdkafka #2879),
and a user's ``properties.*`` value kept."""

from __future__ import annotations

from changelake.changelog import DataType, Schema
from changelake.connectors import kafka_table, upsert_kafka
from changelake.connectors.kafka_common import READER_FETCH_QUEUE_BACKOFF_MS, reader_config

SCHEMA = Schema.of([("id", DataType.of("BIGINT")), ("name", DataType.of("STRING"))], primary_key=["id"])


def test_reader_config_sets_the_backoff_and_keeps_the_users() -> None:
    assert READER_FETCH_QUEUE_BACKOFF_MS < 1000  # librdkafka's default, which made readers wait
    conf = {"bootstrap.servers": "h:9092"}
    assert reader_config(conf) == {"bootstrap.servers": "h:9092", "fetch.queue.backoff.ms": READER_FETCH_QUEUE_BACKOFF_MS}
    assert conf == {"bootstrap.servers": "h:9092"}  # a copy
    assert reader_config({"fetch.queue.backoff.ms": "500"})["fetch.queue.backoff.ms"] == "500"


def test_upsert_kafka_source_consumer_gets_the_reader_defaults() -> None:
    base = {"connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": "h:9092",
            "key.format": "json", "value.format": "json"}
    conf = upsert_kafka.create_source(base, SCHEMA).consumer_config()
    assert conf["fetch.queue.backoff.ms"] == READER_FETCH_QUEUE_BACKOFF_MS
    conf = upsert_kafka.create_source({**base, "properties.fetch.queue.backoff.ms": "250"}, SCHEMA).consumer_config()
    assert conf["fetch.queue.backoff.ms"] == "250"


def test_kafka_table_source_consumer_gets_the_reader_defaults() -> None:
    base = {"connector": "kafka", "topic": "t", "properties.bootstrap.servers": "h:9092", "format": "json"}
    schema = Schema.of([("id", DataType.of("BIGINT")), ("name", DataType.of("STRING"))])  # no key: a kafka table
    conf = kafka_table.create_source(base, schema).consumer_config()
    assert conf["fetch.queue.backoff.ms"] == READER_FETCH_QUEUE_BACKOFF_MS
    conf = kafka_table.create_source({**base, "properties.fetch.queue.backoff.ms": "250"}, schema).consumer_config()
    assert conf["fetch.queue.backoff.ms"] == "250"
