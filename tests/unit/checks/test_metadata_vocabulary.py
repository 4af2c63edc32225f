"""One vocabulary of asset metadata: what the engine reports per lake table is named in
assets.metadata, and the lake asset key belongs to its pipeline."""

from __future__ import annotations

from assets.metadata import LAKE_MATERIALIZATION
from changelake.pipeline.definition import parse_pipeline
from assets.keys import lake_key_path, table_of_lake_key_path
from changelake.pipeline.progress import TableProgress


def test_lake_progress_metadata_uses_the_vocabulary():
    step = TableProgress("db.t", rows_inserted=1, commits=1, truncated=True)
    assert set(step.metadata(lag=3)) <= set(LAKE_MATERIALIZATION)


def test_two_pipelines_over_one_table_get_two_asset_keys():
    def pipeline(name: str, sink: str):
        return parse_pipeline({"pipeline": {"name": name}, "source": {"type": "kafka", "topic": "db.t"},
                               "sink": {"type": sink}}, resolve=False)

    iceberg, paimon = pipeline("kafka-to-iceberg", "iceberg"), pipeline("kafka-to-paimon", "paimon")
    assert lake_key_path(iceberg, "db.t") == ["lake", "kafka_to_iceberg", "db", "t"]
    assert lake_key_path(paimon, "db.t") == ["lake", "kafka_to_paimon", "db", "t"]
    assert table_of_lake_key_path(lake_key_path(paimon, "db.t")) == "db.t"
