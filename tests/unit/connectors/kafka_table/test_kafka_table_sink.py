"""KafkaTableSink without a broker: changelog-mode refusal, record layout, update merging, partitioners.

The producer is a recording stand-in (these are unit tests; the integration tests in
tests/integration/pageviews use a real broker).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from changelake.changelog import RETRACT, ChangelogRow, DataType, RowKind, Schema, UnsupportedChangelogError
from changelake.changelog.aggregate import AggSpec, GroupAggregate
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.kafka_table import create_sink

SCHEMA = Schema.of([("user_region", DataType.of("STRING")), ("pv", DataType.of("BIGINT")), ("uv", DataType.of("BIGINT"))])
BASE = {"connector": "kafka", "topic": "out", "properties.bootstrap.servers": "h:9092"}


class RecordingProducer:
    def __init__(self, partitions: int = 3) -> None:
        self.records: list[dict[str, Any]] = []
        self.partitions = partitions

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, **kw: Any) -> None:
        self.records.append({"topic": topic, "key": key, "value": value, "partition": kw.get("partition")})

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0

    def list_topics(self, topic: str, timeout: float = 0) -> Any:
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={i: None for i in range(self.partitions)})})


def row(kind: RowKind, region: str, pv: int, uv: int) -> ChangelogRow:
    return ChangelogRow(kind, {"user_region": region, "pv": pv, "uv": uv})


def agg() -> GroupAggregate:
    return GroupAggregate(["user_region"], [AggSpec.count_star("pv"), AggSpec.count("uv", "user_id", distinct=True)])


@pytest.mark.parametrize("fmt", ["json", "csv", "avro", "raw"])
def test_insert_only_format_refuses_updating_input_before_writing(fmt: str) -> None:
    schema = Schema.of([("v", DataType.of("STRING"))]) if fmt == "raw" else SCHEMA
    producer = RecordingProducer()
    sink = create_sink({**BASE, "format": fmt}, schema, table_name="pageviews_sink", producer=producer)
    a = agg()
    with pytest.raises(UnsupportedChangelogError) as ei:
        sink.check_input_mode(a.changelog_mode, node_description=a.describe())
    assert str(ei.value).startswith(
        "Table sink 'default_catalog.default_database.pageviews_sink' doesn't support consuming update and delete "
        "changes which is produced by node GroupAggregate(groupBy=[user_region], select=[user_region, COUNT(*) AS pv, "
        "COUNT(DISTINCT user_id) AS uv])."
    )
    assert producer.records == []


def test_insert_only_sink_refuses_update_rows_and_writes_nothing() -> None:
    producer = RecordingProducer()
    sink = create_sink({**BASE, "format": "json"}, SCHEMA, producer=producer).open()
    sink.write(row(RowKind.INSERT, "EU", 1, 1))
    with pytest.raises(UnsupportedChangelogError, match=r"doesn't support consuming -U rows: its format 'json' accepts \[I\]"):
        sink.write(row(RowKind.UPDATE_BEFORE, "EU", 1, 1))
    assert [json.loads(r["value"]) for r in producer.records] == [{"user_region": "EU", "pv": 1, "uv": 1}]


@pytest.mark.parametrize("fmt", ["debezium-json", "canal-json", "maxwell-json"])
def test_changelog_format_accepts_retract_stream(fmt: str) -> None:
    sink = create_sink({**BASE, "format": fmt}, SCHEMA, producer=RecordingProducer())
    assert sink.changelog_mode == RETRACT
    sink.check_input_mode(agg().changelog_mode)  # no error


def test_debezium_update_pair_becomes_one_u_message_and_reads_back_as_retract_pair() -> None:
    producer = RecordingProducer()
    sink = create_sink({**BASE, "format": "debezium-json"}, SCHEMA, producer=producer).open()
    for r in [row(RowKind.INSERT, "EU", 1, 1), row(RowKind.UPDATE_BEFORE, "EU", 1, 1), row(RowKind.UPDATE_AFTER, "EU", 2, 1),
              row(RowKind.DELETE, "EU", 2, 1)]:
        sink.write(r)
    sink.flush()
    msgs = [json.loads(r["value"]) for r in producer.records]
    assert [m["op"] for m in msgs] == ["c", "u", "d"]
    assert msgs[1]["before"] == {"user_region": "EU", "pv": 1, "uv": 1}
    assert msgs[1]["after"] == {"user_region": "EU", "pv": 2, "uv": 1}
    decoded = [str(x) for r in producer.records for x in sink.value_format.decode(r["value"])]
    assert decoded == ["+I[EU, 1, 1]", "-U[EU, 1, 1]", "+U[EU, 2, 1]", "-D[EU, 2, 1]"]


def test_unpaired_update_before_is_written_row_level_at_flush() -> None:
    producer = RecordingProducer()
    sink = create_sink({**BASE, "format": "debezium-json"}, SCHEMA, producer=producer).open()
    sink.write(row(RowKind.UPDATE_BEFORE, "EU", 1, 1))
    assert producer.records == []
    sink.flush()
    assert json.loads(producer.records[0]["value"])["op"] == "d"


def test_key_fields_and_except_key_layout() -> None:
    producer = RecordingProducer()
    sink = create_sink(
        {**BASE, "format": "json", "key.format": "json", "key.fields": "user_region", "value.fields-include": "EXCEPT_KEY"},
        SCHEMA,
        producer=producer,
    ).open()
    sink.write(row(RowKind.INSERT, "EU", 3, 2))
    rec = producer.records[0]
    assert json.loads(rec["key"]) == {"user_region": "EU"}
    assert json.loads(rec["value"]) == {"pv": 3, "uv": 2}
    assert rec["partition"] is None  # default partitioner: murmur2 of the key in the producer


def test_fixed_and_round_robin_partitioners() -> None:
    p1 = RecordingProducer()
    fixed = create_sink({**BASE, "format": "json", "sink.partitioner": "fixed"}, SCHEMA, producer=p1).open()
    p2 = RecordingProducer(partitions=3)
    rr = create_sink({**BASE, "format": "json", "sink.partitioner": "round-robin"}, SCHEMA, producer=p2).open()
    for i in range(5):
        fixed.write(row(RowKind.INSERT, "EU", i, i))
        rr.write(row(RowKind.INSERT, "EU", i, i))
    assert [r["partition"] for r in p1.records] == [0] * 5
    assert [r["partition"] for r in p2.records] == [0, 1, 2, 0, 1]


def test_factory_rules_that_need_formats() -> None:
    with pytest.raises(OptionValidationError, match="A key format should only deal with INSERT-only records"):
        create_sink({**BASE, "format": "json", "key.format": "debezium-json", "key.fields": "user_region"}, SCHEMA)
    with pytest.raises(OptionValidationError, match="The Kafka table 'default_catalog.default_database.t' with 'json' format doesn't support defining PRIMARY KEY"):
        create_sink({**BASE, "format": "json"}, SCHEMA.with_primary_key(["user_region"]), table_name="t")
    # a changelog format may declare a primary key
    create_sink({**BASE, "format": "debezium-json"}, SCHEMA.with_primary_key(["user_region"]))


def test_exactly_once_producer_config_and_secret_free_repr() -> None:
    sink = create_sink(
        {**BASE, "format": "json", "sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": "pv",
         "properties.sasl.password": "hunter2"},
        SCHEMA,
    )
    conf = sink.producer_config()
    assert conf["transactional.id"] == "pv-0"
    assert conf["partitioner"] == "murmur2_random"
    assert "hunter2" not in repr(sink.options)


def test_ddl_is_accepted() -> None:
    from changelake.connectors.kafka_table import create_sink_from_ddl

    sink = create_sink_from_ddl(
        """CREATE TABLE pageviews_changelog (user_region STRING, pv BIGINT, uv BIGINT)
           WITH ('connector' = 'kafka', 'topic' = 'pv_changelog', 'properties.bootstrap.servers' = 'h:9092',
                 'format' = 'debezium-json')""",
        producer=RecordingProducer(),
    )
    assert sink.topic == "pv_changelog"
    assert sink.table_name == "default_catalog.default_database.pageviews_changelog"
    assert sink.changelog_mode == RETRACT
