"""Names shared by jobs, assets, checks and sensors: job names, asset keys, pools, tags."""

from __future__ import annotations

import re

import dagster as dg

from changelake.pipeline.definition import PipelineDefinition

__all__ = ["job_name", "pool_name", "PIPELINE_TAG", "lake_asset_key", "topic_asset_key", "mysql_asset_key"]

#: run tag naming the pipeline a run drives; the instance config allows one run per value
PIPELINE_TAG = "changelake/pipeline"


def job_name(defn: PipelineDefinition) -> str:
    """``pipeline.name`` as a Dagster name (``mysql-to-kafka`` -> ``mysql_to_kafka``)."""
    return re.sub(r"\W", "_", defn.name)


def pool_name(defn: PipelineDefinition) -> str:
    """The concurrency pool of every op or asset that drives pipeline ``defn`` (limit 1)."""
    return f"pipeline_{job_name(defn)}"


def _split(name: str) -> list[str]:
    return [re.sub(r"[^A-Za-z0-9_-]", "_", p) for p in str(name).split(".") if p]


def lake_asset_key(table: str) -> dg.AssetKey:
    """Asset key of a lake table: ``lake/<db>/<table>``."""
    return dg.AssetKey(["lake", *_split(table)])


def topic_asset_key(topic: str) -> dg.AssetKey:
    """Asset key of a Kafka topic ``db.table``: ``kafka/<db>/<table>``."""
    return dg.AssetKey(["kafka", *_split(topic)])


def mysql_asset_key(table: str) -> dg.AssetKey:
    """Asset key of a captured MySQL table: ``mysql/<db>/<table>``."""
    return dg.AssetKey(["mysql", *_split(table)])
