"""The page-views query as Flink SQL declares it: the two tables' schemas and WITH options, and
``SELECT user_region, COUNT(*), COUNT(DISTINCT user_id) ... GROUP BY user_region`` as a
:class:`~changelake.changelog.aggregate.GroupAggregate`."""

from __future__ import annotations

from changelake.changelog import DataType, Schema, TypeRoot
from changelake.changelog.aggregate import AggSpec, GroupAggregate

__all__ = [
    "PAGEVIEWS_SCHEMA", "PER_REGION_SCHEMA", "REGIONS", "SOURCE_TABLE", "SINK_TABLE", "RETRACT_TABLE",
    "pageviews_aggregate", "pageviews_source_options", "pageviews_sink_options", "retract_sink_options",
]

PAGEVIEWS_SCHEMA = Schema.of(
    [
        ("user_id", DataType.of("BIGINT")),
        ("page_id", DataType.of("BIGINT")),
        ("viewtime", DataType(TypeRoot.TIMESTAMP, precision=3)),
        ("user_region", DataType.of("STRING")),
    ]
)
PER_REGION_SCHEMA = Schema.of(
    [("user_region", DataType.of("STRING")), ("pv", DataType.of("BIGINT")), ("uv", DataType.of("BIGINT"))]
).with_primary_key(["user_region"])
REGIONS: tuple[str, ...] = ("US", "EU", "APAC", "LATAM", "MEA")

SOURCE_TABLE = "default_catalog.default_database.pageviews"
SINK_TABLE = "default_catalog.default_database.pageviews_per_region"
RETRACT_TABLE = "default_catalog.default_database.pageviews_per_region_changelog"


def pageviews_aggregate() -> GroupAggregate:
    """``SELECT user_region, COUNT(*) AS pv, COUNT(DISTINCT user_id) AS uv ... GROUP BY user_region``."""
    return GroupAggregate(["user_region"], [AggSpec.count_star("pv"), AggSpec.count("uv", "user_id", distinct=True)])


def pageviews_source_options(bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
    """WITH options of the ``pageviews`` source table (``kafka`` connector, json)."""
    return {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, "format": "json", **extra}


def pageviews_sink_options(
    bootstrap: str,
    topic: str,
    *,
    fmt: str = "avro",
    delivery_guarantee: str = "at-least-once",
    transactional_id_prefix: str | None = None,
    **extra: str,
) -> dict[str, str]:
    """WITH options of ``pageviews_per_region`` (``upsert-kafka``, key and value ``fmt``, as the seed: avro)."""
    opts = {
        "connector": "upsert-kafka",
        "topic": topic,
        "properties.bootstrap.servers": bootstrap,
        "key.format": fmt,
        "value.format": fmt,
        "sink.delivery-guarantee": delivery_guarantee,
        **extra,
    }
    if transactional_id_prefix:
        opts["sink.transactional-id-prefix"] = transactional_id_prefix
    return opts


def retract_sink_options(bootstrap: str, topic: str, fmt: str = "debezium-json", **extra: str) -> dict[str, str]:
    """WITH options of the retract-changelog topic of the "two topics" pattern (``kafka``, ``fmt``)."""
    return {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, "format": fmt, **extra}
