"""topics_of_table: the topics feeding a lake table, from ``topic`` or ``topic-pattern``."""

from __future__ import annotations

from changelake.changelog import TableId
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.lake_checks import topics_of_table


def _p2(**source: str):
    return parse_pipeline({
        "source": {"type": "kafka", "properties.bootstrap.servers": "localhost:9092", **source},
        "sink": {"type": "iceberg", "catalog.properties.type": "sql", "catalog.properties.uri": "sqlite:///:memory:",
                 "catalog.properties.warehouse": "file:///tmp/w"},
    }, env={}, resolve=False)


def test_listed_topics_name_their_table():
    defn = _p2(topic="shop.orders;shop.items")
    assert topics_of_table(defn, TableId("shop", "orders")) == ["shop.orders"]
    assert topics_of_table(defn, TableId("shop", "users")) == []


def test_a_topic_pattern_feeds_the_tables_whose_topic_it_matches_whole():
    defn = _p2(**{"topic-pattern": r"shop\..*"})
    assert topics_of_table(defn, TableId("shop", "users")) == ["shop.users"]
    assert topics_of_table(defn, TableId("other", "users")) == []
    assert topics_of_table(_p2(**{"topic-pattern": "shop"}), TableId("shop", "users")) == []
