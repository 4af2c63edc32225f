"""A transform ``filter`` is refused on an upsert changelog (+U without -U): the stage asks the
source's ``changelog_mode``, whatever the connector; a Kafka topic's mode follows its format."""

from __future__ import annotations

import pytest

from changelake.changelog.transform import TransformError
from changelake.changelog.rowkind import INSERT_ONLY, RETRACT, UPSERT
from changelake.connectors.kafka.source import KafkaPipelineSource, PartitionedSource
from changelake.pipeline.definition import parse_pipeline
from changelake.pipeline.stage import Stage


def _stage(filter_: str | None) -> Stage:
    rule = {"source-table": "shop.orders", "projection": "*"}
    if filter_ is not None:
        rule["filter"] = filter_
    block = {"pipeline": {"name": "p"}, "source": {"type": "kafka", "topic": "shop.orders",
             "properties.bootstrap.servers": "x:1"}, "sink": {"type": "iceberg", "catalog.properties.uri": "sqlite://"},
             "transform": [rule]}
    return Stage(parse_pipeline(block, env={}))


def test_a_filter_on_an_upsert_changelog_is_refused_naming_the_rule_and_the_mode():
    with pytest.raises(TransformError, match=r"source-table 'shop.orders': a filter on an upsert changelog "
                                             r"\[I,UA,D\].*debezium-json, canal-json"):
        _stage("qty > 1").check_source(UPSERT)


@pytest.mark.parametrize("mode", [RETRACT, INSERT_ONLY], ids=["retract", "insert-only"])
def test_a_filter_on_a_changelog_with_before_images_or_inserts_only_is_kept(mode):
    _stage("qty > 1").check_source(mode)


@pytest.mark.parametrize("filter_", [None, "  "], ids=["no-filter", "blank"])
def test_an_upsert_changelog_without_a_filter_is_kept(filter_):
    _stage(filter_).check_source(UPSERT)


@pytest.mark.parametrize("fmt, mode", [("json", UPSERT), ("debezium-json", RETRACT), ("canal-json", RETRACT)])
def test_a_kafka_topics_changelog_mode_follows_its_value_format(fmt, mode):
    source = KafkaPipelineSource({"properties.bootstrap.servers": "x:1", "topic": "t", "value.format": fmt}, "g")
    assert source.changelog_mode == mode
    assert PartitionedSource(source).changelog_mode == mode
