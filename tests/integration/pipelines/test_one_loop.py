"""Any registered source with any registered sink runs through the one runner loop: a source the
runner has never heard of, registered the way a new connector package registers (one module with
``FACTORY``, one registry line), feeds a real lake (Iceberg, then Paimon) and real Kafka, and each
restart resumes at the position the sink stored with the data."""

from __future__ import annotations

import json
import sys
import types
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from changelake.changelog import DataChangeEvent, Op, Schema, TableId
from changelake.changelog.rowkind import RETRACT
from changelake.changelog.types import parse_data_type
from changelake.connectors.registry import FACTORY_MODULES, ConnectorFactory, Endpoint
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.runner import run_pipeline
from changelake.pipeline.verify import read_lake_table

pytestmark = pytest.mark.integration

TABLE = TableId("shop", "items")
SCHEMA = Schema.of([("id", parse_data_type("INT NOT NULL")), ("name", parse_data_type("STRING")),
                    ("qty", parse_data_type("BIGINT"))], ["id"])
#: feed name -> the change events a ``list`` source replays (appended to by the tests)
FEEDS: dict[str, list[tuple[Op, dict | None, dict | None]]] = {}


class ListSource:
    """A positioned source over ``FEEDS[feed]``; its position is the index of the next change."""

    changelog_mode = RETRACT

    def __init__(self, feed: str, start: dict | None) -> None:
        self.feed = feed
        self.next = int(start["index"]) if start else 0
        self.opened = False

    def open(self) -> None:
        self.opened = True

    def poll(self, max_events: int = 100, timeout_s: float = 0.5) -> list[DataChangeEvent]:
        assert self.opened
        changes = FEEDS[self.feed][self.next:self.next + min(max_events, 2)]  # small batches: several commits
        out = []
        for op, before, after in changes:
            self.next += 1
            out.append(DataChangeEvent(TABLE, op, before, after, SCHEMA, 0, {"index": self.next}))
        return out

    @property
    def position(self) -> dict:
        return {"index": self.next}

    def caught_up(self) -> bool:
        return self.next >= len(FEEDS[self.feed])

    def close(self) -> None:
        self.opened = False


@pytest.fixture
def list_connector(monkeypatch):
    """Registers identifier ``list`` (a module with ``FACTORY`` plus one registry line)."""
    module = types.ModuleType("changelake_test_list_source")
    module.FACTORY = ConnectorFactory(
        "list",
        source=Endpoint(required=("feed",), optional=(), validate=lambda raw, ctx: dict(raw),
                        build=lambda opts, ctx: ListSource(opts["feed"], ctx.start_position)),
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(FACTORY_MODULES, "list", module.__name__)
    feed = f"feed-{uuid.uuid4().hex[:8]}"
    FEEDS[feed] = [
        (Op.CREATE, None, {"id": 1, "name": "apple", "qty": 3}),
        (Op.CREATE, None, {"id": 2, "name": "pear", "qty": 5}),
        (Op.UPDATE, {"id": 1, "name": "apple", "qty": 3}, {"id": 1, "name": "apple", "qty": 4}),
        (Op.CREATE, None, {"id": 3, "name": "plum", "qty": None}),
        (Op.DELETE, {"id": 2, "name": "pear", "qty": 5}, None),
    ]
    yield feed
    FEEDS.pop(feed, None)


def _lake_block(lake: str, tmp_path) -> dict:
    if lake == "paimon":
        return {"type": "paimon", "catalog.properties.warehouse": str(tmp_path / "paimon")}
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    return {"type": "iceberg", "catalog.properties.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "catalog.properties.warehouse": f"file://{tmp_path / 'warehouse'}"}


def _rows(defn) -> list[tuple]:
    table = read_lake_table(defn, TABLE).to_pylist()
    return sorted((r["id"], r["name"], r["qty"]) for r in table)


def test_a_new_source_feeds_a_lake_and_resumes_at_the_stored_position(list_connector, tmp_path, lake):
    defn = parse_pipeline({"pipeline": {"name": f"one-loop-{lake}"}, "source": {"type": "list", "feed": list_connector},
                           "sink": {**_lake_block(lake, tmp_path), "commit.max-rows": 3}}, env={})
    first = run_pipeline(defn, until_caught_up=True)
    assert first.stopped_because == "caught-up" and first.events == 5
    assert first.position == {"index": 5} and first.tables == {"shop.items": 5}
    assert _rows(defn) == [(1, "apple", 4), (3, "plum", None)]

    FEEDS[list_connector] += [
        (Op.UPDATE, {"id": 3, "name": "plum", "qty": None}, {"id": 3, "name": "plum", "qty": 9}),
        (Op.CREATE, None, {"id": 4, "name": "fig", "qty": 1}),
    ]
    second = run_pipeline(defn, until_caught_up=True)
    assert second.events == 2 and second.position == {"index": 7}  # resumed at the stored position
    assert _rows(defn) == [(1, "apple", 4), (3, "plum", 9), (4, "fig", 1)]

    third = run_pipeline(defn, until_caught_up=True)
    assert third.events == 0 and third.metrics["table_commits"] == 0
    assert _rows(defn) == [(1, "apple", 4), (3, "plum", 9), (4, "fig", 1)]


def test_a_new_source_feeds_kafka_exactly_once_and_resumes(list_connector, kafka_bootstrap, topic_factory):
    topic = topic_factory()
    defn = parse_pipeline({
        "pipeline": {"name": f"one-loop-kafka-{topic}"},
        "source": {"type": "list", "feed": list_connector},
        "sink": {"type": "kafka", "properties.bootstrap.servers": kafka_bootstrap, "value.format": "debezium-json",
                 "sink.tableId-to-topic.mapping": f"shop.items:{topic}", "sink.delivery-guarantee": "exactly-once",
                 "partition.strategy": "all-to-zero"},
    }, env={})
    first = run_pipeline(defn, until_caught_up=True)
    assert first.events == 5 and first.position == {"index": 5}
    FEEDS[list_connector].append((Op.CREATE, None, {"id": 4, "name": "fig", "qty": 1}))
    second = run_pipeline(defn, until_caught_up=True)
    assert second.events == 1

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"read-{topic}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        for _ in range(60):
            for msg in consumer.consume(num_messages=100, timeout=1.0):
                if msg.error() is None and msg.value() is not None:
                    values.append(json.loads(msg.value()))
            if len(values) >= 6:
                break
    finally:
        consumer.close()
    assert [(v["op"], (v["after"] or v["before"])["id"]) for v in values] == [
        ("c", 1), ("c", 2), ("u", 1), ("c", 3), ("d", 2), ("c", 4)
    ]
    assert values[2]["before"]["qty"] == 3 and values[2]["after"]["qty"] == 4
