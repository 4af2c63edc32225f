"""Flink CDC's readable metadata of the MySQL source (``metadata.list``), appended to rows as columns.

As Flink CDC's MySQL connector (``MySqlReadableMetadata``): ``op_ts`` (TIMESTAMP_LTZ(3): when the
change was made in the database, the binlog event time; epoch 0 for snapshot rows),
``database_name`` and ``table_name`` (STRING) and ``row_kind`` (STRING: ``+I``, ``-U``, ``+U``,
``-D`` for the image it is in: an update's before image says ``-U``, its after image ``+U``).
The columns come after the table's own columns, in the order ``metadata.list`` names them, and
are NOT NULL; they are not part of the primary key.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any, Mapping, Sequence

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Column, Schema
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.errors import SourceError

__all__ = ["MetadataColumns"]

_TYPES = {
    "op_ts": DataType(TypeRoot.TIMESTAMP_LTZ, False, precision=3),
    "database_name": DataType(TypeRoot.STRING, False),
    "table_name": DataType(TypeRoot.STRING, False),
    "row_kind": DataType(TypeRoot.STRING, False),
}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
#: (kind of the before image, kind of the after image) per op.
_KINDS = {Op.CREATE: (None, "+I"), Op.READ: (None, "+I"), Op.UPDATE: ("-U", "+U"), Op.DELETE: ("-D", None)}


class MetadataColumns:
    """Appends the named metadata columns to events' rows and schemas.

    Args:
        names: metadata names (validated by the factory: op_ts, database_name, table_name, row_kind).
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self._schemas: dict[int, tuple[Schema, Schema]] = {}

    def schema(self, schema: Schema, table: Any) -> Schema:
        """``schema`` plus the metadata columns. Raises SourceError if the table has such a column."""
        hit = self._schemas.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        clash = [n for n in self.names if n in schema]
        if clash:
            raise SourceError(f"table {table} has column(s) {clash} named like the metadata columns of 'metadata.list'")
        out = Schema(schema.columns + tuple(Column(n, _TYPES[n]) for n in self.names), schema.primary_key, comment=schema.comment)
        if len(self._schemas) > 10000:
            self._schemas.clear()
        self._schemas[id(schema)] = (schema, out)
        return out

    def _row(self, row: Mapping[str, Any] | None, kind: str | None, event: DataChangeEvent) -> dict[str, Any] | None:
        if row is None:
            return None
        out = dict(row)
        for n in self.names:
            if n == "op_ts":
                out[n] = _EPOCH + dt.timedelta(milliseconds=event.ts_ms)
            elif n == "database_name":
                out[n] = event.table.database
            elif n == "table_name":
                out[n] = event.table.table
            else:
                out[n] = kind
        return out

    def apply(self, events: list[DataChangeEvent]) -> list[DataChangeEvent]:
        """The events with metadata columns in ``before`` / ``after`` and in the schema."""
        out = []
        for e in events:
            kinds = _KINDS.get(e.op)
            if kinds is None:  # truncate: no rows
                out.append(e)
                continue
            schema = self.schema(e.schema, e.table) if e.schema is not None else None
            out.append(replace(e, before=self._row(e.before, kinds[0], e), after=self._row(e.after, kinds[1], e), schema=schema))
        return out
