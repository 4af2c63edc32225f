"""A user-written Dagster asset reads and writes an upsert-kafka table through UpsertKafkaResource
(real Kafka; the README shows the same five lines)."""

from __future__ import annotations

import uuid

import dagster as dg
import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from resources import UpsertKafkaResource

pytestmark = pytest.mark.integration


def ddl(topic: str) -> str:
    return (
        "CREATE TABLE pageviews_per_region (region STRING, pv BIGINT, PRIMARY KEY (region) NOT ENFORCED) "
        f"WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}', 'key.format' = 'json', "
        "'value.format' = 'json', 'scan.bounded.mode' = 'latest-offset')"
    )


def test_user_assets_write_and_read_an_upsert_kafka_table(kafka_bootstrap):
    table = ddl(f"pv-{uuid.uuid4().hex[:8]}")

    @dg.asset
    def regions_out(upsert_kafka: UpsertKafkaResource) -> None:
        with upsert_kafka.sink(table) as sink:
            sink.write_all([ChangelogRow(RowKind.INSERT, {"region": "eu", "pv": 1}),
                            ChangelogRow(RowKind.INSERT, {"region": "us", "pv": 2}),
                            ChangelogRow(RowKind.UPDATE_AFTER, {"region": "eu", "pv": 3}),
                            ChangelogRow(RowKind.DELETE, {"region": "us"})])

    @dg.asset(deps=[regions_out])
    def regions(upsert_kafka: UpsertKafkaResource) -> dg.MaterializeResult:
        with upsert_kafka.source(table) as source:
            rows = source.read_all()
        return dg.MaterializeResult(metadata={"changelog": [str(r) for r in rows]})

    result = dg.materialize([regions_out, regions],
                            resources={"upsert_kafka": UpsertKafkaResource(bootstrap_servers=kafka_bootstrap)})
    assert result.success
    mat = result.asset_materializations_for_node("regions")[0]
    changelog = mat.metadata["changelog"].value
    assert changelog == ["+I[eu, 1]", "+I[us, 2]", "+U[eu, 3]", "-D[us, 2]"]  # -D carries the last row
