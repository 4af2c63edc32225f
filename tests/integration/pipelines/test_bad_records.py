"""Bad records are never lost: located errors, or a dead-letter copy with headers and a count."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from changelake.changelog import TableId
from changelake.connectors.errors import RecordError
from changelake.connectors.iceberg import parse_sink_options, read_table
from changelake.formats.errors import DecodeError
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline

pytestmark = pytest.mark.integration


def _p2(kafka_bootstrap, tmp_path, topic: str, **source_extra):
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    return parse_pipeline(
        {
            "pipeline": {"name": f"bad-{topic}"},
            "source": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap, "topic": topic,
                       "value.format": "debezium-json", "debezium-json.distributed-tables": True, **source_extra},
            "transform": [{"source-table": "\\.*.\\.*", "projection": "\\*", "primary-keys": "id"}],
            "sink": {"type": "iceberg", "catalog.properties.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
                     "catalog.properties.warehouse": f"file://{tmp_path / 'warehouse'}"},
        },
        env={},
    )


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        producer.produce(topic, key=b'{"id":1}', value=v, partition=0, headers=[("origin", b"test")])
    assert producer.flush(30) == 0


def _event(op: str, before, after) -> bytes:
    return json.dumps({"before": before, "after": after, "op": op,
                       "source": {"db": "shop", "table": "t", "ts_ms": 1}}).encode()


GOOD = _event("c", None, {"id": 1, "v": "a"})
CORRUPT = b'{"before":null,"after":{"id":2'
NO_KEY = _event("u", {"id": 1, "v": "a"}, {"v": "b"})
GOOD2 = _event("c", None, {"id": 3, "v": "c"})


def test_a_row_without_its_primary_key_stops_the_run_naming_where(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory()
    _produce(kafka_bootstrap, topic, [GOOD, NO_KEY])
    with pytest.raises(RecordError) as info:
        run_pipeline(_p2(kafka_bootstrap, tmp_path, topic), until_caught_up=True)
    err = info.value
    assert (err.topic, err.partition, err.offset, err.table) == (topic, 0, 1, "shop.t")
    assert f"topic {topic!r} partition 0 offset 1 (table shop.t)" in str(err) and "['id']" in str(err)
    assert err.__cause__ is not None


def test_a_corrupt_record_stops_the_run_naming_where(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory()
    _produce(kafka_bootstrap, topic, [GOOD, CORRUPT])
    with pytest.raises(DecodeError) as info:
        run_pipeline(_p2(kafka_bootstrap, tmp_path, topic), until_caught_up=True)
    assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 1)


def test_bad_records_go_to_the_dead_letter_topic_with_their_location_and_are_counted(
    kafka_bootstrap, topic_factory, tmp_path
):
    topic = topic_factory()
    dlq = f"{topic}-dlq"
    _produce(kafka_bootstrap, topic, [GOOD, CORRUPT, NO_KEY, GOOD2])
    p2 = _p2(kafka_bootstrap, tmp_path, topic, **{"debezium-json.ignore-parse-errors": True,
                                                  "dead-letter.topic": dlq})
    stats = run_pipeline(p2, until_caught_up=True)
    assert stats.bad_records == 2 and stats.dead_letters == 2
    assert stats.inferred_schema_tables == ["shop.t"]  # a foreign topic: no schema header, said once
    assert stats.metadata()["dead_letters"] == 2 and stats.metadata()["bad_records"] == 2
    rows = read_table(parse_sink_options(p2.options("sink")), TableId("shop", "t")).to_pylist()
    assert sorted(r["id"] for r in rows) == [1, 3]

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "dlq-test", "enable.auto.commit": False})
    consumer.assign([TopicPartition(dlq, 0, 0)])
    copies = []
    for _ in range(60):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            copies.append(msg)
        if len(copies) == 2:
            break
    consumer.close()
    assert [m.value() for m in copies] == [CORRUPT, NO_KEY]
    first, second = (dict(m.headers()) for m in copies)
    assert first["__connect.errors.topic"] == topic.encode()
    assert (first["__connect.errors.partition"], first["__connect.errors.offset"]) == (b"0", b"1")
    assert first["__connect.errors.exception.class.name"] == b"DecodeError" and first["origin"] == b"test"
    assert second["__connect.errors.offset"] == b"2" and second["changelake.errors.table"] == b"shop.t"
    assert b"id" in second["__connect.errors.exception.message"]

    # A rerun reads nothing new and copies nothing again.
    again = run_pipeline(p2, until_caught_up=True)
    assert again.events == 0 and again.dead_letters == 0


def test_catalog_uri_with_a_missing_folder_or_a_misspelt_scheme_is_refused(kafka_bootstrap, topic_factory, tmp_path):
    from changelake.connectors.errors import OptionValidationError

    topic = topic_factory()
    for uri, expected in [("sqlite:////no/such/dir/catalog.db", "'/no/such/dir' does not exist"),
                          (f"sqlit:///{tmp_path}/c.db", "unknown database scheme 'sqlit'")]:
        p2 = _p2(kafka_bootstrap, tmp_path, topic)
        p2.sink["catalog.properties.uri"] = uri
        with pytest.raises(OptionValidationError) as info:
            run_pipeline(p2, until_caught_up=True)
        assert "'catalog.properties.uri'" in str(info.value) and uri in str(info.value) and expected in str(info.value)
    import os
    assert not os.path.exists("/no/such/dir")


def test_a_record_naming_an_unknown_schema_is_a_located_decode_error(kafka_bootstrap, topic_factory):
    from changelake.connectors.kafka.source import KafkaPipelineSource

    topic = topic_factory()
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, value=GOOD, partition=0,
                     headers=[("changelake.schema.id", b"0" * 32), ("changelake.schema.topic", b"no-such-schemas")])
    assert producer.flush(30) == 0
    opts = {"properties.bootstrap.servers": kafka_bootstrap, "topic": topic}
    with KafkaPipelineSource(opts, group_id="unknown-schema", timeout_s=2) as source:
        source.open()
        with pytest.raises(DecodeError) as info:
            while not source.caught_up():
                source.poll(timeout_s=1)
    assert (info.value.topic, info.value.offset) == (topic, 0)
    assert "0" * 32 in str(info.value) and "no-such-schemas" in str(info.value)


def test_a_corrupt_record_in_the_middle_of_a_poll_is_named_by_its_own_offset(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory()
    good = [_event("c", None, {"id": i, "v": "a"}) for i in range(1, 101)]
    _produce(kafka_bootstrap, topic, good[:60] + [CORRUPT] + good[60:])
    with pytest.raises(DecodeError) as info:
        run_pipeline(_p2(kafka_bootstrap, tmp_path, topic), until_caught_up=True)
    assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 60)
