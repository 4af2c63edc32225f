"""The page-views assets and their check, materialized through Dagster on a real broker."""

from __future__ import annotations

import uuid

import dagster as dg
import pytest

from resources.kafka import KafkaResource
from resources.pageviews import PageviewsTopics

pytestmark = pytest.mark.integration


def test_pageviews_assets_materialize_and_the_check_compares_with_duckdb(kafka_bootstrap, tmp_path):
    from assets import pageviews

    suffix = uuid.uuid4().hex[:8]
    resources = {
        "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap),
        "pageviews_topics": PageviewsTopics(
            source_topic=f"pageviews-{suffix}", sink_topic=f"pageviews_per_region-{suffix}", state_dir=str(tmp_path)
        ),
    }
    instance = dg.DagsterInstance.ephemeral()
    for run in range(2):  # the second run aggregates only the new events on top of the recovered state
        result = dg.materialize(
            [*pageviews.assets(), *pageviews.checks()],
            resources=resources,
            instance=instance,
            run_config={"ops": {"pageviews": {"config": {"events": 1500, "seed": run}}}},
        )
        assert result.success
        (evaluation,) = result.get_asset_check_evaluations()
        assert evaluation.passed, evaluation.metadata
        assert evaluation.metadata["events"].value == 1500 * (run + 1)
        (mat,) = result.asset_materializations_for_node("pageviews_per_region")
        assert mat.metadata["events_read"].value == 1500
        assert mat.metadata["sink.numRecordsOut"].value == mat.metadata["records_written"].value > 0
        assert evaluation.metadata["source.numRecordsIn"].value > 0
