"""Table-level changes a lake sink applies besides rows: truncates that cover a share of a table.

A truncate read from one partition of a ``hash-by-key`` topic deletes only the rows that
partition carried (:mod:`changelake.connectors.kafka.truncate_scope` says why). The lake sink
turns such a marker into ``-D`` rows of the covered keys (the lake's current keys and the keys
earlier in the batch) before compacting, so a worker deletes the keys of its own partitions and
nothing else; a marker without a scope deletes every row, as before.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.connectors.lake.compaction import BatchItem, TruncateMarker
from changelake.errors import PipelineDataError

__all__ = ["scoped", "has_scoped_truncate", "expand_scoped_truncates"]


def scoped(scope: Any, schema: Schema) -> Any:
    """``scope`` with ``schema`` filled in when the record named none (None stays None)."""
    if scope is not None and getattr(scope, "schema", True) is None:
        return replace(scope, schema=schema)
    return scope


def has_scoped_truncate(items: Sequence[BatchItem]) -> bool:
    return any(isinstance(i, TruncateMarker) and i.scope is not None for i in items)


def expand_scoped_truncates(
    items: Sequence[BatchItem],
    schema: Schema,
    table_id: TableId,
    table_name: str,
    read_rows: Callable[[list[str]], list[dict[str, Any]]],
) -> list[BatchItem]:
    """Replace each scoped truncate marker by ``-D`` rows of the keys it covers.

    Args:
        items: the batch (rows and markers, oldest first).
        schema: the batch's schema (its primary key is the lake table's).
        table_id: the table, for the rows made.
        table_name: the lake table's name, for errors.
        read_rows: ``f(columns) -> rows`` of the lake table as it is before this batch.

    Raises:
        PipelineDataError: a key column the truncate's Kafka key was written with is not a column
            of the lake table (a transform renamed or dropped it); names table and column.
    """
    lake_pk = list(schema.primary_key)
    needed = list(lake_pk)
    for item in items:
        if isinstance(item, TruncateMarker) and item.scope is not None:
            for c in item.scope.key_columns:
                if c not in schema:
                    raise PipelineDataError(
                        f"table {table_name}: a truncate of a hash-by-key topic covers the keys of its partition, "
                        f"but the key column {c!r} is not a column of the lake table; keep the source's primary-key "
                        "columns in the transform's projection",
                        table=table_name, column=c,
                    )
                if c not in needed:
                    needed.append(c)
    # the key columns of every row the lake holds and of every row earlier in the batch
    known: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in read_rows(needed):
        known[tuple(row.get(k) for k in lake_pk)] = {c: row.get(c) for c in needed}
    out: list[BatchItem] = []
    for item in items:
        if isinstance(item, TruncateMarker) and item.scope is not None:
            meta = dict(item.metadata)
            for key, row in list(known.items()):
                if item.scope.covers(row):
                    out.append(ChangelogRow(RowKind.DELETE, dict(row), table_id, meta))
                    del known[key]
            continue
        if isinstance(item, ChangelogRow):
            key = tuple(item.values.get(k) for k in lake_pk)
            if item.kind.is_accumulate:
                known[key] = {c: item.values.get(c) for c in needed}
            else:
                known.pop(key, None)
        else:  # a full truncate: nothing is left
            known.clear()
        out.append(item)
    return out
