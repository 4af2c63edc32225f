"""Asset keys of the pipelines' tables (``lake/<db>/<table>``, ``kafka/<db>/<table>``,
``mysql/<db>/<table>``) as Dagster ``AssetKey``s; the names themselves come from
:mod:`changelake.pipeline.naming` (job names, pools, the run tag)."""

from __future__ import annotations

import dagster as dg

from changelake.pipeline.naming import PIPELINE_TAG, job_name, key_path, pool_name

__all__ = ["job_name", "pool_name", "PIPELINE_TAG", "lake_asset_key", "topic_asset_key", "mysql_asset_key"]


def lake_asset_key(table: str) -> dg.AssetKey:
    """Asset key of a lake table: ``lake/<db>/<table>``."""
    return dg.AssetKey(key_path("lake", table))


def topic_asset_key(topic: str) -> dg.AssetKey:
    """Asset key of a Kafka topic ``db.table``: ``kafka/<db>/<table>``."""
    return dg.AssetKey(key_path("kafka", topic))


def mysql_asset_key(table: str) -> dg.AssetKey:
    """Asset key of a captured MySQL table: ``mysql/<db>/<table>``."""
    return dg.AssetKey(key_path("mysql", table))
