"""UpsertKafkaSink.to_record: the Kafka record per row kind, without a broker (Flink's
DynamicKafkaRecordSerializationSchema rules for upsert-kafka)."""

from __future__ import annotations

import json

import pytest

from changelake.changelog import ChangelogRow, RowKind, Schema, parse_data_type
from changelake.connectors.errors import ConnectorError
from changelake.connectors.upsert_kafka import create_sink

SCHEMA = Schema.of(
    [("id", parse_data_type("INT NOT NULL")), ("region", parse_data_type("STRING NOT NULL")), ("pv", parse_data_type("BIGINT"))],
    ["region", "id"],
)


def sink(**extra):
    o = {
        "connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": "127.0.0.1:1",
        "key.format": "json", "value.format": "json",
    }
    o.update(extra)
    s = create_sink(o, SCHEMA)
    s.build_formats()
    return s


def test_insert_and_update_after_write_key_and_value():
    s = sink()
    for kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
        rec = s.to_record(ChangelogRow(kind, {"id": 1, "region": "eu", "pv": 7}))
        assert rec.topic == "t"
        assert rec.key == b'{"region":"eu","id":1}'  # PK order, not column order
        assert json.loads(rec.value) == {"id": 1, "region": "eu", "pv": 7}


def test_delete_writes_a_tombstone_and_update_before_is_dropped():
    s = sink()
    rec = s.to_record(ChangelogRow.delete({"id": 1, "region": "eu", "pv": None}))
    assert rec.key == b'{"region":"eu","id":1}' and rec.value is None
    assert s.to_record(ChangelogRow.update_before({"id": 1, "region": "eu", "pv": 7})) is None


def test_except_key_value_has_no_key_columns():
    s = sink(**{"value.fields-include": "EXCEPT_KEY"})
    rec = s.to_record(ChangelogRow.insert({"id": 1, "region": "eu", "pv": 7}))
    assert json.loads(rec.value) == {"pv": 7}


def test_metadata_timestamp_becomes_the_record_timestamp():
    s = sink()
    rec = s.to_record(ChangelogRow(RowKind.INSERT, {"id": 1, "region": "eu", "pv": 7}, None, {"timestamp": 1700000000000}))
    assert rec.timestamp_ms == 1700000000000


def test_topic_from_metadata_with_several_topics_or_a_pattern():
    s = sink(topic="a;b")
    assert s.topic_for(ChangelogRow(RowKind.INSERT, {}, None, {"topic": "b"})) == "b"
    with pytest.raises(ConnectorError, match=r"The topic of the sink record is not valid. Expected topic to be in: \['a', 'b'\] but was: 'c'"):
        s.topic_for(ChangelogRow(RowKind.INSERT, {}, None, {"topic": "c"}))
    p = create_sink(
        {"connector": "upsert-kafka", "properties.bootstrap.servers": "h:1", "key.format": "json", "value.format": "json", "topic-pattern": "pv-.*"},
        SCHEMA,
    )
    assert p.topic_for(ChangelogRow(RowKind.INSERT, {}, None, {"topic": "pv-eu"})) == "pv-eu"
    with pytest.raises(ConnectorError, match="Expected topic to match the pattern 'pv-.*' but was: None"):
        p.topic_for(ChangelogRow.insert({}))


def test_producer_config():
    s = sink(**{"sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": "job", "properties.linger.ms": "5"})
    conf = s.producer_config()
    assert conf["partitioner"] == "murmur2_random"
    assert conf["transactional.id"] == "job-0"
    assert conf["transaction.timeout.ms"] == 600_000
    assert conf["linger.ms"] == "5"
    assert conf["enable.idempotence"] == "true"
    assert "transactional.id" not in sink().producer_config()


def test_transactions_need_exactly_once_and_writes_need_open():
    s = create_sink({"connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": "h:1", "key.format": "json", "value.format": "json"}, SCHEMA)
    with pytest.raises(ConnectorError, match="needs sink.delivery-guarantee = exactly-once"):
        s.begin_transaction()
    with pytest.raises(ConnectorError, match="not open"):
        s.write(ChangelogRow.insert({"id": 1, "region": "eu", "pv": 1}))
    s.close()
    s.close()  # idempotent
