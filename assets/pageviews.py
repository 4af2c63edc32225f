"""The seed's page-views example: raw events -> PV and UV per region in an upsert-kafka table.

``INSERT INTO pageviews_per_region SELECT user_region, COUNT(*), COUNT(DISTINCT user_id) FROM
pageviews GROUP BY user_region``: the grouped aggregation emits a retract changelog (-U/+U) that
lands in the upsert-kafka sink (-U dropped, +U upserted), exactly-once (output records and the
consumed offsets in one Kafka transaction). The check recomputes PV/UV with DuckDB from the raw
topic and compares it with the table read back through the upsert-kafka source.
"""

import dagster as dg
from pydantic import Field

from assets import metadata as M
from resources.kafka import KafkaResource
from resources.pageviews import PageviewsTopics

__all__ = ["PAGEVIEWS_GROUP", "assets", "checks"]

PAGEVIEWS_GROUP = "pageviews"


class PageviewsGeneratorConfig(dg.Config):
    events: int = Field(default=5000, description="Page-view events to generate and produce (rows).")
    seed: int = Field(default=0, description="Random seed of the generator (same seed, same events).")


@dg.asset(group_name=PAGEVIEWS_GROUP, kinds={"kafka"})
def pageviews(config: PageviewsGeneratorConfig, kafka: KafkaResource, pageviews_topics: PageviewsTopics) -> dg.MaterializeResult:
    """Kafka topic `pageviews`: page-view events (user_id, page_id, viewtime, user_region) as JSON."""
    from changelake.pageviews import generate_pageviews, produce_pageviews

    produced = produce_pageviews(
        kafka.bootstrap_servers, pageviews_topics.source_topic, generate_pageviews(config.events, seed=config.seed)
    )
    return dg.MaterializeResult(metadata={M.EVENTS_PRODUCED: produced, M.TOPIC: pageviews_topics.source_topic})


@dg.asset(group_name=PAGEVIEWS_GROUP, kinds={"kafka"}, deps=[pageviews])
def pageviews_per_region(
    context: dg.AssetExecutionContext, kafka: KafkaResource, pageviews_topics: PageviewsTopics
) -> dg.MaterializeResult:
    """Upsert-kafka table `pageviews_per_region (user_region, pv, uv)`, keyed by region, from topic `pageviews`."""
    from changelake.pageviews import pageviews_sink_options, run_pageviews_aggregation

    bootstrap = kafka.bootstrap_servers
    options = pageviews_sink_options(
        bootstrap, pageviews_topics.sink_topic, fmt=pageviews_topics.key_value_format,
        delivery_guarantee="exactly-once", transactional_id_prefix=f"changelake-{pageviews_topics.sink_topic}",
    )
    stats = run_pageviews_aggregation(
        bootstrap, pageviews_topics.source_topic, options, delivery_guarantee="exactly-once",
        state_dir=pageviews_topics.state_dir, until_caught_up=True,
    )
    context.log.info(f"page-views aggregation: {stats}")
    return dg.MaterializeResult(
        metadata={
            M.EVENTS_READ: stats.events_read,
            M.EVENTS_REPLAYED: stats.events_replayed,
            M.CHANGELOG_ROWS_OUT: dg.MetadataValue.json(stats.rows_out),
            M.RECORDS_WRITTEN: stats.records_written,
            M.TRANSACTIONS: stats.batches,
            M.REGIONS: stats.groups,
            M.EVENTS_PER_S: round(stats.events_per_s, 1),
            M.INPUT_OFFSETS: dg.MetadataValue.json(stats.offsets),
            **{f"{M.SINK_METRIC_PREFIX}{k}": v for k, v in stats.sink_metrics.items()},
        }
    )


@dg.asset_check(asset=pageviews_per_region, name="pv_uv_match_duckdb_recomputation")
def pv_uv_match_duckdb_recomputation(kafka: KafkaResource, pageviews_topics: PageviewsTopics) -> dg.AssetCheckResult:
    """PV/UV per region read back through the upsert-kafka source equal DuckDB's GROUP BY over the raw topic."""
    from changelake.pageviews import read_pageviews_table, read_upsert_topic_final_state, recompute_pv_uv

    from changelake.connectors.metrics import SourceMetrics

    truth = recompute_pv_uv(read_pageviews_table(kafka.bootstrap_servers, pageviews_topics.source_topic))
    source_metrics = SourceMetrics()
    table = read_upsert_topic_final_state(
        kafka.bootstrap_servers, pageviews_topics.sink_topic, fmt=pageviews_topics.key_value_format,
        metrics=source_metrics,
    )
    differing = sorted(str(r) for r in set(truth) | set(table) if truth.get(r) != table.get(r))
    return dg.AssetCheckResult(
        passed=not differing,
        metadata={
            M.REGIONS: len(truth),
            M.EVENTS: sum(pv for pv, _ in truth.values()),
            M.DIFFERING_REGIONS: dg.MetadataValue.json(differing),
            M.PV_UV: dg.MetadataValue.json({str(r): list(v) for r, v in sorted(table.items(), key=lambda kv: str(kv[0]))}),
            **{f"{M.SOURCE_METRIC_PREFIX}{k}": v for k, v in source_metrics.snapshot().items()},
        },
    )


def assets() -> list:
    return [pageviews, pageviews_per_region]


def checks() -> list:
    return [pv_uv_match_duckdb_recomputation]
