"""Key and value row layout of an upsert-kafka table (Flink's ``KafkaConnectorOptionsUtil``
``createKeyFormatProjection`` / ``createValueFormatProjection``).

* Key row: the PRIMARY KEY columns in PK declaration order, named without ``key.fields-prefix``.
* Value row: every column (``ALL``) or every non-key column (``EXCEPT_KEY``), in table order.
* Reading with ``ALL``: key columns are filled from the key, then overwritten by the value.
"""

from __future__ import annotations

from typing import Any, Mapping

from changelake.changelog.schema import Column, Schema
from changelake.changelog.state import encode_key
from changelake.connectors.upsert_kafka.options import UpsertKafkaOptions, ValueFieldsInclude

__all__ = ["RowLayout"]


class RowLayout:
    """Projections between table rows and key/value rows.

    Attributes:
        schema: the table schema (with its primary key).
        key_schema: key row schema (stripped names, PK order; its primary key is every column).
        value_schema: value row schema (no primary key).
    """

    def __init__(self, schema: Schema, options: UpsertKafkaOptions) -> None:
        self.schema = schema
        self.prefix = options.key_fields_prefix
        self.include = options.value_fields_include
        self._key_cols = list(schema.primary_key)
        self._key_names = [c[len(self.prefix):] for c in self._key_cols]
        self.key_schema = Schema(
            tuple(Column(n, schema.column(c).type) for c, n in zip(self._key_cols, self._key_names)),
            tuple(self._key_names),
        )
        if self.include is ValueFieldsInclude.ALL:
            self._value_cols = list(schema.names)
        else:
            self._value_cols = [c for c in schema.names if c not in schema.primary_key]
        self.value_schema = Schema(tuple(schema.column(c) for c in self._value_cols))
        self._names = list(schema.names)
        self._key_name_of = dict(zip(self._key_cols, self._key_names))
        self._value_col_set = frozenset(self._value_cols)

    def key_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The key row (stripped names) of a table row."""
        return {n: values.get(c) for c, n in zip(self._key_cols, self._key_names)}

    def value_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The value row of a table row."""
        return {c: values.get(c) for c in self._value_cols}

    def key_tuple_from_key_row(self, key_row: Mapping[str, Any]) -> tuple[Any, ...]:
        """The PK tuple (PK order) of a decoded key row."""
        return tuple(key_row.get(n) for n in self._key_names)

    def state_keys(self, key_rows: list[dict[str, Any] | None]) -> list[bytes | None]:
        """:func:`~changelake.changelog.state.encode_key` of the PK tuple of each decoded key row
        (None stays None), for a batch."""
        names = self._key_names
        if len(names) == 1:
            (name,) = names
            return [None if r is None else encode_key((r.get(name),)) for r in key_rows]
        return [None if r is None else encode_key(tuple(r.get(n) for n in names)) for r in key_rows]

    def table_row(self, key_row: Mapping[str, Any], value_row: Mapping[str, Any] | None) -> dict[str, Any]:
        """Merge a decoded key row and value row (None for a tombstone) into a table row in
        column order; value columns win over key columns (Flink, ``ALL``)."""
        key_name = self._key_name_of
        out: dict[str, Any] = {}
        if value_row is None:
            for c in self._names:
                n = key_name.get(c)
                out[c] = None if n is None else key_row.get(n)
            return out
        value_cols = self._value_col_set
        for c in self._names:
            if c in value_cols and c in value_row:
                out[c] = value_row[c]
            else:
                n = key_name.get(c)
                out[c] = None if n is None else key_row.get(n)
        return out
