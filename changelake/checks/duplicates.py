"""Primary-key uniqueness of a lake table, in DuckDB (engine; no Dagster import).

A lake table written by the Iceberg sink holds one row per primary key; two rows with the same key
mean a broken upsert (or a table written by something else). :func:`find_duplicate_keys` counts
the keys that occur more than once and lists a sample of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import duckdb
import pyarrow as pa

from changelake.checks.errors import CheckError

__all__ = ["DuplicateKeys", "find_duplicate_keys"]


@dataclass(frozen=True)
class DuplicateKeys:
    """Result of :func:`find_duplicate_keys`.

    Attributes:
        rows: rows in the table.
        duplicate_keys: keys that occur more than once.
        extra_rows: rows beyond the first of each duplicated key.
        sample: up to ``sample_size`` duplicated keys, each a dict of key columns plus ``count``.
    """

    rows: int
    duplicate_keys: int
    extra_rows: int
    sample: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.duplicate_keys == 0

    def metadata(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "duplicate_keys": self.duplicate_keys,
            "extra_rows": self.extra_rows,
            "sample_duplicate_keys": json.dumps(self.sample, default=str),
        }


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def find_duplicate_keys(table: pa.Table, key: Sequence[str], sample_size: int = 10) -> DuplicateKeys:
    """Count the keys of ``table`` (columns ``key``) that occur more than once.

    Raises:
        CheckError: ``key`` is empty or names a column the table lacks.
    """
    if not key:
        raise CheckError("no primary key to check uniqueness on")
    missing = [c for c in key if c not in table.column_names]
    if missing:
        raise CheckError(f"primary-key column(s) {missing} not in the table; it has {table.column_names}")
    cols = ", ".join(_quote(c) for c in key)
    con = duckdb.connect()
    try:
        con.register("lake", table)
        dup = f"SELECT {cols}, count(*) AS n FROM lake GROUP BY {cols} HAVING count(*) > 1"
        keys, extra = con.execute(f"SELECT count(*), coalesce(sum(n - 1), 0) FROM ({dup})").fetchone()  # type: ignore[misc]
        sample_rows = con.execute(f"{dup} ORDER BY n DESC LIMIT {int(sample_size)}").fetchall()
    finally:
        con.close()
    sample = [dict(zip([*key, "count"], row)) for row in sample_rows]
    return DuplicateKeys(rows=table.num_rows, duplicate_keys=int(keys), extra_rows=int(extra), sample=sample)
