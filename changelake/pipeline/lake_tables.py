"""Which lake tables a pipeline writes, known without touching the network (for loading an
orchestrator's definitions with the services down).

From Kafka: one table per topic of the ``topic`` list (topics are named ``db.table``). From MySQL
directly: each table the ``tables`` option names literally (``db.table`` without regular-expression
characters), after the ``route`` rules. Plus, for both, the tables the pipeline has found at run
time (:mod:`changelake.pipeline.discovery`, a local file).
"""

from __future__ import annotations

import re

from changelake.changelog import TableId
from changelake.changelog.route import Router, parse_route_rules
from changelake.changelog.selectors import Selectors
from changelake.connectors.registry import is_partitioned_source, lake_sink_types
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.discovery import discovered_tables

__all__ = ["is_lake", "from_mysql", "captured_tables", "lake_tables", "mysql_table_of", "captures"]

_NAME = re.compile(r"[A-Za-z0-9_$]+")


def is_lake(defn: PipelineDefinition) -> bool:
    """True when the pipeline's sink is a lake (``iceberg``, ``paimon``)."""
    return defn.sink_type in lake_sink_types()


def from_mysql(defn: PipelineDefinition) -> bool:
    """True for a pipeline that runs a positioned source (``mysql``) straight into the lake (no
    Kafka between: one source position for all tables, no per-partition offsets)."""
    return is_lake(defn) and not is_partitioned_source(defn.source_type)


def captured_tables(defn: PipelineDefinition) -> list[TableId]:
    """The MySQL tables a ``mysql`` source names literally in ``tables``; patterns such as
    ``db.\\.*`` are known only at run time."""
    out = []
    for entry in defn.source.get("tables", "").split(","):
        parts = entry.strip().split(".")
        if len(parts) == 2 and all(_NAME.fullmatch(p) for p in parts):
            out.append(TableId(parts[0], parts[1]))
    return out


def _routed(defn: PipelineDefinition, table: TableId) -> list[TableId]:
    return Router(parse_route_rules(defn.route), defn.pipeline.get("route-mode", "ALL_MATCH")).route(table)


def lake_tables(defn: PipelineDefinition) -> list[TableId]:
    """The lake tables of a lake pipeline, listed ones first, then discovered ones (no network)."""
    if from_mysql(defn):
        listed = list(dict.fromkeys(t for s in captured_tables(defn) for t in _routed(defn, s)))
    else:
        listed = [TableId.parse(t.strip()) for t in defn.source.get("topic", "").split(";") if t.strip()]
    return listed + [t for t in discovered_tables(defn.name) if t not in listed]


def captures(defn: PipelineDefinition, table: TableId) -> bool:
    """True when the ``mysql`` source's ``tables`` pattern matches ``table`` (False when malformed:
    that is reported when the pipeline runs)."""
    try:
        return Selectors.parse(defn.source.get("tables", "")).matches(table)
    except Exception:  # noqa: BLE001 - reported by the source's own validation at run time
        return False


def mysql_table_of(defn: PipelineDefinition, table: TableId) -> TableId | None:
    """The MySQL table a MySQL -> lake pipeline writes into lake table ``table`` (None if unknown)."""
    for source in captured_tables(defn):
        if table in _routed(defn, source):
            return source
    return table if captures(defn, table) else None
