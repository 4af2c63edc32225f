"""upsert-kafka ingestion sink without a broker: records per change event, headers, and every
negative option path with its message (as Flink's KafkaDataSinkFactoryTest)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from decimal import Decimal

import pytest

from changelake.changelog import ChangelogRow, DataChangeEvent, Op, RowKind, Schema, TableId, parse_data_type
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.kafka.sink_options import DeliveryGuarantee, PartitionStrategy
from changelake.connectors.upsert_kafka import create_sink
from changelake.connectors.upsert_kafka.ingestion import (
    TOPIC_CONFIG,
    MissingPrimaryKeyError,
    UpsertKafkaIngestionSink,
    encode_upsert_key,
)
from changelake.connectors.upsert_kafka.ingestion_options import UpsertKafkaIngestionOptions
from changelake.connectors.upsert_kafka.partitioner import partition_for
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline

# column order (id, region, ...) differs from primary-key order (region, id) on purpose
SCHEMA = Schema.of(
    [
        ("id", parse_data_type("INT NOT NULL")),
        ("region", parse_data_type("STRING NOT NULL")),
        ("amount", parse_data_type("DECIMAL(10, 2)")),
        ("placed", parse_data_type("TIMESTAMP(3)")),
    ],
    ["region", "id"],
)
NO_PK = Schema.of([("id", parse_data_type("INT")), ("note", parse_data_type("STRING"))])
T = TableId("shop", "orders")
BOOTSTRAP = "127.0.0.1:1"


def row(i: int = 1, region: str = "eu", amount: str | None = "12.30", placed: dt.datetime | None = None) -> dict:
    return {"id": i, "region": region, "amount": None if amount is None else Decimal(amount), "placed": placed}


def make_sink(**extra: str) -> UpsertKafkaIngestionSink:
    return UpsertKafkaIngestionSink({"properties.bootstrap.servers": BOOTSTRAP, **extra}, pipeline_name="p")


def event(op: Op, before: dict | None, after: dict | None, schema: Schema | None = SCHEMA, table: TableId = T):
    return DataChangeEvent(table, op, before, after, schema)


# -- records --------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", [Op.READ, Op.CREATE])
def test_insert_and_snapshot_write_pk_key_and_full_row_value(op):
    placed = dt.datetime(2024, 1, 2, 3, 4, 5, 120000)
    (rec,) = make_sink().records(event(op, None, row(placed=placed)))
    assert rec.topic == "shop.orders"
    assert rec.key == b'{"region":"eu","id":1}'  # primary-key order, compact, no TableId
    assert json.loads(rec.value) == {"id": 1, "region": "eu", "amount": 12.3, "placed": "2024-01-02 03:04:05.12"}
    assert b'"amount":12.30' in rec.value  # DECIMAL keeps its scale, a plain number
    assert rec.headers == []


def test_update_in_place_is_one_record_with_the_after_row():
    recs = make_sink().records(event(Op.UPDATE, row(amount="1.00"), row(amount="2.50")))
    assert [(r.key, json.loads(r.value)["amount"]) for r in recs] == [(b'{"region":"eu","id":1}', 2.5)]


def test_update_that_changes_the_key_tombstones_the_old_key_first():
    recs = make_sink().records(event(Op.UPDATE, row(1, "eu"), row(1, "us")))
    assert [(r.key, r.value is None) for r in recs] == [
        (b'{"region":"eu","id":1}', True),
        (b'{"region":"us","id":1}', False),
    ]
    assert json.loads(recs[1].value)["region"] == "us"


def test_delete_is_a_tombstone_keyed_by_the_before_image():
    (rec,) = make_sink().records(event(Op.DELETE, row(4, "apac"), None))
    assert rec.key == b'{"region":"apac","id":4}' and rec.value is None


def test_truncate_writes_nothing():
    sink = make_sink()
    assert sink.records(event(Op.TRUNCATE, None, None, schema=None)) == []
    assert sink._records(event(Op.TRUNCATE, None, None, schema=None)) == []
    assert sink.metrics["skipped"] == 1


def test_routed_table_names_the_topic():
    routed = TableId.parse("orders_upsert")  # a route's sink-table without a database
    (rec,) = make_sink(**{"sink.add-tableId-to-header-enabled": "true"}).records(
        event(Op.CREATE, None, row(), table=routed)
    )
    assert rec.topic == "orders_upsert"
    assert rec.headers == [("namespace", b""), ("schemaName", b""), ("tableName", b"orders_upsert")]


def test_headers_when_enabled():
    (rec,) = make_sink(**{"sink.add-tableId-to-header-enabled": "true"}).records(event(Op.CREATE, None, row()))
    assert rec.headers == [("namespace", b""), ("schemaName", b"shop"), ("tableName", b"orders")]
    (tomb,) = make_sink(**{"sink.add-tableId-to-header-enabled": "true"}).records(event(Op.DELETE, row(), None))
    assert dict(tomb.headers)["tableName"] == b"orders"


def test_key_bytes_equal_the_sql_upsert_kafka_sink_and_place_partitions_as_murmur2():
    sql_schema = Schema.of(
        [("id", parse_data_type("INT NOT NULL")), ("region", parse_data_type("STRING NOT NULL")),
         ("amount", parse_data_type("DECIMAL(10, 2)")), ("placed", parse_data_type("TIMESTAMP(3)"))],
        ["region", "id"],
    )
    sql = create_sink({"connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": BOOTSTRAP,
                       "key.format": "json", "value.format": "json"}, sql_schema)
    sql.build_formats()
    values = row(7, "sa-east", placed=dt.datetime(2024, 5, 6, 7, 8, 9))
    (rec,) = make_sink().records(event(Op.CREATE, None, values))
    sql_rec = sql.to_record(ChangelogRow(RowKind.INSERT, values))
    assert rec.key == sql_rec.key == encode_upsert_key(SCHEMA, values)
    assert json.loads(rec.value) == json.loads(sql_rec.value)
    # the producer is told to hash keys as Kafka's Java client (murmur2), not librdkafka's CRC32 default
    assert make_sink().options.partition_strategy is PartitionStrategy.HASH_BY_KEY
    assert partition_for(rec.key, 6) == partition_for(sql_rec.key, 6)


def test_topics_are_created_compacted():
    assert TOPIC_CONFIG == {"cleanup.policy": "compact"}


# -- primary key ------------------------------------------------------------------------------------


def test_table_without_primary_key_is_refused_naming_table_and_transform():
    sink = make_sink()
    e = event(Op.CREATE, None, {"id": 1, "note": "x"}, schema=NO_PK, table=TableId("shop", "notes"))
    with pytest.raises(MissingPrimaryKeyError) as err:
        sink.records(e)
    msg = str(err.value)
    assert "shop.notes" in msg and "no primary key" in msg and "'primary-keys'" in msg and "'transform'" in msg
    assert err.value.table == TableId("shop", "notes") and err.value.option == "transform.primary-keys"
    assert isinstance(err.value, OptionValidationError)


def test_write_refuses_a_batch_with_a_table_without_primary_key_before_producing():
    sink = make_sink()  # not open: a batch that got past the check would fail with "not open"
    good = event(Op.CREATE, None, row())
    bad = event(Op.CREATE, None, {"id": 1, "note": "x"}, schema=NO_PK, table=TableId("shop", "notes"))
    with pytest.raises(MissingPrimaryKeyError, match="shop.notes"):
        sink.write([good, bad])
    assert sink.metrics["records"] == 0


def test_event_without_schema_is_refused():
    with pytest.raises(MissingPrimaryKeyError, match="has no schema"):
        make_sink().records(event(Op.CREATE, None, row(), schema=None))


# -- options ---------------------------------------------------------------------------------------------


def test_defaults():
    opts = UpsertKafkaIngestionOptions.from_options({"properties.bootstrap.servers": BOOTSTRAP}, "my pipe")
    k = opts.kafka
    assert k.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE
    assert k.partition_strategy is PartitionStrategy.HASH_BY_KEY
    assert k.add_table_id_to_header is False and k.topic is None and k.topic_mapping == ()
    assert k.transactional_id_prefix == "changelake-my-pipe" and k.offsets_topic == "changelake-offsets"
    assert k.properties == {"bootstrap.servers": BOOTSTRAP} and opts.ignored == ()


def test_seed_configuration_with_type_name_and_aliyun_keys_is_accepted():
    raw = {
        "type": "upsert-kafka", "name": "upsert-kafka Sink", "properties.bootstrap.servers": BOOTSTRAP,
        "aliyun.kafka.accessKeyId": "AK", "aliyun.kafka.accessKeySecret": "SECRET-SK",
        "aliyun.kafka.instanceId": "i", "aliyun.kafka.endpoint": "e", "aliyun.kafka.regionId": "r",
        "sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": "tx-1",
        "sink.add-tableId-to-header-enabled": "true", "sink.topic.partitions": "4", "properties.acks": "all",
    }
    opts = UpsertKafkaIngestionOptions.from_options(raw, "p")
    assert opts.ignored == tuple(sorted(k for k in raw if k.startswith("aliyun.")))
    assert opts.kafka.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
    assert opts.kafka.transactional_id_prefix == "tx-1" and opts.kafka.topic_partitions == 4
    assert opts.kafka.add_table_id_to_header is True
    assert opts.kafka.properties == {"bootstrap.servers": BOOTSTRAP, "acks": "all"}  # aliyun keys not passed on


def test_ignored_aliyun_keys_are_logged_by_name_never_by_value(caplog):
    # no auto-create and at-least-once: open() builds the clients without waiting for a broker
    sink = make_sink(**{"aliyun.kafka.accessKeySecret": "SECRET-SK", "sink.topic.auto-create": "false"})
    with caplog.at_level(logging.WARNING, logger="changelake.connectors.upsert_kafka.ingestion"):
        sink.open()
        sink.close()
    text = caplog.text
    assert "aliyun.kafka.accessKeySecret" in text and "properties.*" in text
    assert "SECRET-SK" not in text
    assert "SECRET-SK" not in repr(sink.ingestion_options) and "SECRET-SK" not in repr(sink.options)


def test_unknown_option_lists_unsupported_and_supported_keys():
    with pytest.raises(OptionValidationError) as err:
        UpsertKafkaIngestionOptions.from_options(
            {"properties.bootstrap.servers": BOOTSTRAP, "value.format": "debezium-json", "topic": "x"}, "p"
        )
    msg = str(err.value)
    assert msg.startswith("Unsupported options found for 'upsert-kafka'.")
    unsupported, supported = msg.split("Supported options:")
    assert "topic" in unsupported and "value.format" in unsupported
    for key in ("sink.delivery-guarantee", "sink.transactional-id-prefix", "sink.add-tableId-to-header-enabled",
                "sink.topic.partitions", "name", "type"):
        assert key in supported
    assert err.value.option == "topic"


def test_missing_bootstrap_servers():
    with pytest.raises(OptionValidationError, match="Missing required options are:\n\nproperties.bootstrap.servers"):
        UpsertKafkaIngestionOptions.from_options({"sink.delivery-guarantee": "none"}, "p")


def test_wrong_type():
    with pytest.raises(OptionValidationError, match="Option 'type' must be 'upsert-kafka', got 'kafka'"):
        UpsertKafkaIngestionOptions.from_options({"type": "kafka", "properties.bootstrap.servers": BOOTSTRAP}, "p")


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("sink.delivery-guarantee", "twice", "Could not parse value 'twice' for key 'sink.delivery-guarantee'. "
                                             "Expected one of: [none, at-least-once, exactly-once]"),
        ("sink.add-tableId-to-header-enabled", "yes", "Expected a boolean"),
        ("sink.topic.partitions", "0", "'sink.topic.partitions' must be >= 1, but is 0"),
        ("sink.flush.timeout", "soon", "Expected a duration"),
        ("properties.partitioner", "consistent_random", "'properties.partitioner' = 'consistent_random' is not supported"),
        ("properties.value.serializer", "x", "'properties.value.serializer' is not supported for 'upsert-kafka'"),
        ("properties.transactional.id", "x", "set 'sink.transactional-id-prefix' instead"),
    ],
)
def test_negative_values(key, value, message):
    with pytest.raises(OptionValidationError) as err:
        UpsertKafkaIngestionOptions.from_options({"properties.bootstrap.servers": BOOTSTRAP, key: value}, "p")
    assert message in str(err.value)
    assert err.value.option == key


def test_exactly_once_refuses_disabled_idempotence():
    with pytest.raises(OptionValidationError, match="needs a transactional, idempotent producer"):
        UpsertKafkaIngestionOptions.from_options(
            {"properties.bootstrap.servers": BOOTSTRAP, "sink.delivery-guarantee": "exactly-once",
             "properties.enable.idempotence": "false"}, "p"
        )


def test_murmur2_partitioner_may_be_given_explicitly():
    opts = UpsertKafkaIngestionOptions.from_options(
        {"properties.bootstrap.servers": BOOTSTRAP, "properties.partitioner": "murmur2_random"}, "p"
    )
    assert opts.kafka.properties["partitioner"] == "murmur2_random"


def test_secrets_never_appear_in_errors():
    with pytest.raises(OptionValidationError) as err:
        UpsertKafkaIngestionOptions.from_options(
            {"properties.bootstrap.servers": BOOTSTRAP, "properties.sasl.password": "hunter2", "bogus": "1"}, "p"
        )
    assert "hunter2" not in str(err.value)


# -- runner dispatch -----------------------------------------------------------------------------------


def test_runner_refuses_an_unsupported_pair_and_lists_upsert_kafka():
    defn = parse_pipeline({"source": {"type": "kafka"}, "sink": {"type": "upsert-kafka"}}, env={})
    with pytest.raises(OptionValidationError, match="mysql -> upsert-kafka"):
        run_pipeline(defn)


def test_runner_validates_upsert_kafka_options_before_connecting():
    defn = parse_pipeline(
        {"source": {"type": "mysql"}, "sink": {"type": "upsert-kafka", "properties.bootstrap.servers": BOOTSTRAP,
                                                "value.format": "json"}},
        env={},
    )
    with pytest.raises(OptionValidationError, match="Unsupported options found for 'upsert-kafka'"):
        run_pipeline(defn)


def test_example_pipeline_parses_and_its_sink_options_validate():
    from pathlib import Path

    from changelake.pipeline.definition import load_pipeline

    path = Path(__file__).resolve().parents[4] / "pipelines" / "examples" / "mysql-to-upsert-kafka.yaml"
    env = {"MYSQL_HOST": "h", "MYSQL_PORT": "3306", "MYSQL_USER": "u", "MYSQL_PASSWORD": "pw",
           "KAFKA_BOOTSTRAP_SERVERS": BOOTSTRAP}
    defn = load_pipeline(path, env=env)
    assert (defn.source_type, defn.sink_type) == ("mysql", "upsert-kafka")
    opts = UpsertKafkaIngestionOptions.from_options(defn.options("sink"), defn.name)
    assert opts.kafka.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE
    assert opts.kafka.add_table_id_to_header and opts.kafka.topic_partitions == 3
    assert defn.route == [{"source-table": "kafka_test.customers", "sink-table": "customers_upsert"}]
