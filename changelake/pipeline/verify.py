"""Prove a lake table's key state equals its MySQL table's (the DuckDB asset check's engine).

The MySQL side is read with the CDC source's own value conversion (the snapshot path's) and typed
with the lake family's Arrow mapping (:func:`changelake.connectors.lake.arrow.rows_to_arrow`), so
MySQL and the lake are compared in one type system; the lake side is a full scan by the lake sink
the registry builds. Both are joined by :func:`changelake.checks.key_state.compare_key_state` in DuckDB.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from changelake.changelog import TableId
from changelake.pipeline.definition import PipelineDefinition

__all__ = ["read_mysql_table", "read_lake_table", "lake_primary_key", "verify_lake_table", "mysql_params_from_env"]


def mysql_params_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """MySQL connection parameters from ``MYSQL_HOST/PORT/USER/PASSWORD``."""
    return {
        "host": env["MYSQL_HOST"],
        "port": int(env.get("MYSQL_PORT", "3306")),
        "user": env["MYSQL_USER"],
        "password": env.get("MYSQL_PASSWORD", ""),
    }


def read_mysql_table(params: Mapping[str, Any], table: TableId) -> tuple[Any, list[dict[str, Any]]]:
    """All rows of ``table`` as changelake Python values, with its Schema (columns and primary key),
    converted exactly as the snapshot path of Pipeline 1 converts them (``mysql_cdc.snapshot.read_table``).

    A table that does not exist now (dropped or renamed: the server's ``ER_NO_SUCH_TABLE``) has an
    empty key state: ``(None, [])``. Every other error is raised (a missing database, a connection
    failure, a missing privilege)."""
    from changelake.connectors.errors import SourceTableNotFoundError
    from changelake.connectors.mysql_cdc.snapshot.reader import read_table

    try:
        table_schema, rows = read_table(dict(params), table)
    except SourceTableNotFoundError:
        return None, []
    return table_schema.schema, rows


def read_lake_table(defn: PipelineDefinition, table: TableId) -> Any:
    """Every current row of lake table ``table`` of ``defn``'s sink as a ``pyarrow.Table``, read
    by the lake sink the registry builds from ``sink.type`` (Iceberg: a pyiceberg scan; Paimon: a
    pypaimon read, merged by row kind)."""
    from changelake.connectors.base import LakeSink
    from changelake.connectors.registry import ConnectorContext, find_factory

    sink: LakeSink = find_factory(defn.sink_type).create_sink(defn.options("sink"), ConnectorContext(defn.name))
    return sink.read_table(table)


def _transform_primary_key(defn: PipelineDefinition, table: TableId) -> list[str]:
    """The ``primary-keys`` of the first ``transform`` rule whose ``source-table`` matches ``table``."""
    from changelake.changelog.selectors import Selectors

    for rule in defn.transform:
        keys = rule.get("primary-keys")
        if keys and Selectors.parse(rule.get("source-table", "")).matches(table):
            return [k.strip() for k in keys.split(",") if k.strip()]
    return []


def lake_primary_key(defn: PipelineDefinition, table: TableId) -> list[str]:
    """The primary key lake table ``table`` of ``defn``'s sink declares (Iceberg: its identifier
    fields; Paimon: its primary keys), else the pipeline's ``transform`` primary keys, else []."""
    from changelake.pipeline.lake_checkpoint import open_lake_sink

    sink = open_lake_sink(defn)
    try:
        return list(sink.primary_key(table)) or _transform_primary_key(defn, table)
    finally:
        sink.close()


class _Result:
    def __init__(self, comparison: Any, table: TableId, attempts: int, mysql_table_exists: bool = True) -> None:
        self.comparison = comparison
        self.table = table
        self.attempts = attempts
        #: False: MySQL has no such table now (dropped or renamed); its key state was taken as empty
        self.mysql_table_exists = mysql_table_exists

    @property
    def passed(self) -> bool:
        return bool(self.comparison.passed)

    def metadata(self) -> dict[str, Any]:
        """The comparison's counts and sample keys, plus ``mismatches`` (all kinds) and ``attempts``."""
        c = self.comparison
        md = dict(c.metadata())
        md.update(
            table=str(self.table),
            mismatches=c.missing_in_lake + c.extra_in_lake + c.value_mismatches,
            attempts=self.attempts,
            mysql_table_exists=self.mysql_table_exists,
        )
        if not self.mysql_table_exists and not self.passed:
            md["reason"] = (f"MySQL table {self.table} no longer exists, but lake table {self.table} still holds "
                            f"{c.extra_in_lake} row(s) (extra_in_lake={c.extra_in_lake})")
        return md


def verify_lake_table(
    defn: PipelineDefinition,
    table: TableId,
    *,
    mysql: Mapping[str, Any] | None = None,
    recheck_after_s: float = 2.0,
) -> _Result:
    """Compare lake table ``table`` (Iceberg or Paimon sink of ``defn``) with the MySQL table of the same id.

    Differing tables are compared once more after ``recheck_after_s`` seconds, so a workload the
    pipelines have not caught up with does not raise a false alarm.

    A MySQL table that no longer exists (``DROP TABLE``, ``RENAME TABLE``) has an empty key state
    (:func:`read_mysql_table`): the check passes when the lake table's current snapshot holds no
    rows, and fails with its rows counted as ``extra_in_lake`` (``mysql_table_exists`` False).

    Raises:
        SourceError: MySQL cannot say the table's rows for another reason (e.g. its database does
            not exist); IcebergSinkError / PaimonSinkError: the lake table does not exist.
    """
    import os

    from changelake.checks.key_state import compare_key_state
    from changelake.connectors.lake.arrow import rows_to_arrow

    params = dict(mysql) if mysql is not None else mysql_params_from_env(os.environ)
    attempts = 0
    while True:
        attempts += 1
        schema, rows = read_mysql_table(params, table)
        lake = read_lake_table(defn, table)
        if schema is None:  # gone from MySQL: no rows, compared on the lake table's own columns and key
            source, key = lake.schema.empty_table(), lake_primary_key(defn, table) or list(lake.column_names)
        else:
            source, key = rows_to_arrow(rows, schema, table=str(table)), list(schema.primary_key)
        comparison = compare_key_state(lake, source, key)
        if comparison.passed or attempts >= 2:
            return _Result(comparison, table, attempts, mysql_table_exists=schema is not None)
        time.sleep(recheck_after_s)
