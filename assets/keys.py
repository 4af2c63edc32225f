"""The names the platform gives a pipeline's Dagster objects: job names, concurrency pools, the run
tag, asset keys and the lake checks' names. They are Dagster vocabulary, so they live here and not
in the engine (which needs none of them). They are shared by assets/, sensors/, platform_defs/ and
the CLI, so this module imports only Dagster and the engine; it is the one module of assets/ that
sensors/ may import (``tests/unit/test_layers.py``).

* job ``mysql_to_kafka`` for ``pipeline.name: mysql-to-kafka`` (non-word characters -> ``_``);
* pool ``pipeline_<job>`` (limit 1: one run per pipeline) and run tag ``changelake/pipeline``;
* asset keys ``lake/<pipeline>/<db>/<table>``, ``kafka/<db>/<table>``, ``mysql/<db>/<table>``.
  A lake asset belongs to the pipeline that writes it: the Iceberg and the Paimon pipeline (and a
  MySQL -> lake pipeline beside a Kafka -> lake one) each get their own assets, so no asset's
  history mixes two lakes and ``changelake check --pipeline X`` records results on X's assets only;
* lake checks ``key_state_matches_mysql``, ``no_duplicate_primary_keys``, ``lake_is_fresh`` (the
  last one measures the lag behind Kafka, so a MySQL -> lake pipeline has only the first two).
"""

from __future__ import annotations

import re

import dagster as dg

from changelake.connectors.registry import is_partitioned_source
from changelake.pipeline.definition import PipelineDefinition

__all__ = [
    "PIPELINE_TAG", "job_name", "pool_name", "key_path", "lake_key_path", "table_of_lake_key_path",
    "lake_asset_key", "table_of_lake_key", "topic_asset_key", "mysql_asset_key",
    "KEY_STATE_CHECK", "UNIQUE_KEYS_CHECK", "FRESHNESS_CHECK", "LAKE_CHECKS", "lake_checks_of",
]

#: run tag naming the pipeline a run drives; the instance config allows one run per value
PIPELINE_TAG = "changelake/pipeline"

KEY_STATE_CHECK = "key_state_matches_mysql"
UNIQUE_KEYS_CHECK = "no_duplicate_primary_keys"
FRESHNESS_CHECK = "lake_is_fresh"
LAKE_CHECKS = (KEY_STATE_CHECK, UNIQUE_KEYS_CHECK, FRESHNESS_CHECK)


def job_name(defn: PipelineDefinition) -> str:
    """``pipeline.name`` as a job name (``mysql-to-kafka`` -> ``mysql_to_kafka``)."""
    return re.sub(r"\W", "_", defn.name)


def pool_name(defn: PipelineDefinition) -> str:
    """The concurrency pool of every op or asset that drives pipeline ``defn`` (limit 1)."""
    return f"pipeline_{job_name(defn)}"


def key_path(kind: str, name: str) -> list[str]:
    """Asset key path of a ``db.table`` name: ``[kind, db, table]`` (characters outside
    ``[A-Za-z0-9_-]`` in a part replaced by ``_``)."""
    return [kind, *(re.sub(r"[^A-Za-z0-9_-]", "_", p) for p in str(name).split(".") if p)]


def lake_key_path(defn: PipelineDefinition, table: object) -> list[str]:
    """Asset key path of lake table ``table`` (``db.table``) written by pipeline ``defn``:
    ``["lake", <job name>, db, table]``, e.g. ``lake/kafka_to_iceberg/kafka_test/customers``.
    Keyed by pipeline, so two pipelines (two lakes, or MySQL -> lake beside Kafka -> lake) never
    record materializations or check results on one asset."""
    return ["lake", job_name(defn), *key_path("lake", str(table))[1:]]


def table_of_lake_key_path(path: list[str] | tuple[str, ...]) -> str:
    """``db.table`` of a lake asset key path (:func:`lake_key_path`)."""
    return ".".join(path[2:])


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


def lake_checks_of(defn: PipelineDefinition) -> tuple[str, ...]:
    """The checks of a lake pipeline's tables: all three when it reads a partitioned source
    (``kafka``: its lag is measurable in offsets); without ``lake_is_fresh`` when it reads a
    positioned source (``mysql``) directly (no Kafka lag to measure)."""
    return LAKE_CHECKS if is_partitioned_source(defn.source_type) else (KEY_STATE_CHECK, UNIQUE_KEYS_CHECK)
