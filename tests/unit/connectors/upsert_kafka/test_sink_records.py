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


PREFIXED = Schema.of(
    [("k_id", parse_data_type("INT NOT NULL")), ("region", parse_data_type("STRING")), ("pv", parse_data_type("BIGINT"))],
    ["k_id"],
)
RAW_KEY = Schema.of(
    [("k_id", parse_data_type("STRING NOT NULL")), ("region", parse_data_type("STRING")), ("pv", parse_data_type("BIGINT"))],
    ["k_id"],
)


@pytest.mark.parametrize(
    "schema, extra",
    [
        (SCHEMA, {}),
        (SCHEMA, {"value.fields-include": "EXCEPT_KEY"}),
        (SCHEMA, {"key.format": "csv", "value.format": "csv"}),
        (SCHEMA, {"value.format": "avro", "value.fields-include": "EXCEPT_KEY"}),
        (SCHEMA, {"value.json.encode.ignore-null-fields": "true"}),
        (PREFIXED, {"key.fields-prefix": "k_", "value.fields-include": "EXCEPT_KEY"}),
        (RAW_KEY, {"key.fields-prefix": "k_", "key.format": "raw", "value.fields-include": "EXCEPT_KEY"}),
    ],
)
def test_record_bytes_are_the_formats_bytes_of_the_projected_rows(schema, extra):
    """The sink's direct key/value encoding equals encoding the key row and the value row."""
    o = {
        "connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": "127.0.0.1:1",
        "key.format": "json", "value.format": "json",
    }
    o.update(extra)
    s = create_sink(o, schema)
    s.build_formats()
    names = schema.names
    key_type = str if schema is RAW_KEY else int
    for values in ([key_type(1), "eu", 7], [key_type(2), None, None], [key_type(3), "é\u2603", -5]):
        row = ChangelogRow.insert(dict(zip(names, values)))
        rec = s.to_record(row)
        key_row = ChangelogRow.insert(s.layout.key_values(row.values))
        value_row = ChangelogRow.insert(s.layout.value_values(row.values))
        assert rec.key == s._key_format.encode(key_row)
        assert rec.value == s._value_format.encode(value_row)
        assert s.to_record(ChangelogRow.delete(dict(row.values))) == type(rec)("t", rec.key, None, None)
