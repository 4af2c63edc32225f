"""Asset keys of the pipelines' tables (``lake/<pipeline>/<db>/<table>``, ``kafka/<db>/<table>``,
``mysql/<db>/<table>``) as Dagster ``AssetKey``s; the names themselves come from
:mod:`changelake.pipeline.naming` (job names, pools, the run tag).

A lake asset belongs to the pipeline that writes it: the Iceberg and the Paimon pipeline (and a
MySQL -> lake pipeline beside a Kafka -> lake one) each get their own assets, so no asset's
history mixes two lakes and ``changelake check --pipeline X`` records results on X's assets only.
"""

from __future__ import annotations

import dagster as dg

from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.naming import (
    PIPELINE_TAG, job_name, key_path, lake_key_path, pool_name, table_of_lake_key_path,
)

__all__ = ["job_name", "pool_name", "PIPELINE_TAG", "lake_asset_key", "table_of_lake_key", "topic_asset_key",
           "mysql_asset_key"]


def lake_asset_key(defn: PipelineDefinition, table: object) -> dg.AssetKey:
    """Asset key of lake table ``table`` (``db.table``) of pipeline ``defn``:
    ``lake/<job name>/<db>/<table>``."""
    return dg.AssetKey(lake_key_path(defn, table))


def table_of_lake_key(key: dg.AssetKey) -> str:
    """``db.table`` of a lake asset key."""
    return table_of_lake_key_path(key.path)


def topic_asset_key(topic: str) -> dg.AssetKey:
    """Asset key of a Kafka topic ``db.table``: ``kafka/<db>/<table>``."""
    return dg.AssetKey(key_path("kafka", topic))


def mysql_asset_key(table: str) -> dg.AssetKey:
    """Asset key of a captured MySQL table: ``mysql/<db>/<table>``."""
    return dg.AssetKey(key_path("mysql", table))
