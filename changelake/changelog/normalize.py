"""ChangelogNormalize: turn an upsert changelog into a per-key consistent changelog.

Behaviour is Flink's ``DeduplicateFunctionHelper.processLastRowOnChangelog`` (the keyed
ChangelogNormalize operator the planner puts behind an upsert source), without state TTL:

==================  =====================  ============================================  ===========
incoming            state for the key      emitted                                       new state
==================  =====================  ============================================  ===========
+I / +U             empty                  ``+I(new)``                                   new
+I / +U             prev != new            ``-U(prev)`` (retract mode only), ``+U(new)`` new
+I / +U             prev == new            nothing (duplicate suppressed, FLINK-38217)   unchanged
-D / -U             prev                   ``-D(prev)``: the FULL previous row           cleared
-D / -U             empty                  nothing                                       -
==================  =====================  ============================================  ===========

State lives in a :class:`~changelake.changelog.state.KeyStateStore` (key: :func:`encode_key` of
the primary-key tuple unless the caller passes its own key bytes; value: the last full row).
"""

from __future__ import annotations

from typing import Any, Mapping

from changelake.changelog.errors import SchemaError
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RETRACT, UPSERT, RowKind
from changelake.changelog.schema import Schema
from changelake.changelog.state import KeyStateStore, decode_values, encode_key, encode_values

__all__ = ["ChangelogNormalize"]


class ChangelogNormalize:
    """Per-key normalizer of an upsert changelog over a key-state store.

    Args:
        schema: schema of the rows; its primary key identifies a row.
        store: where the last full row per key is kept (memory or durable).
        generate_update_before: emit ``-U(prev)`` before each ``+U`` (a retract changelog, as
            Flink when a downstream operator needs update-before); default False (upsert:
            +I/+U/-D only).

    :attr:`changelog_mode` is ``RETRACT`` with update-before, else ``UPSERT``.
    """

    def __init__(self, schema: Schema, store: KeyStateStore, *, generate_update_before: bool = False) -> None:
        if not schema.primary_key:
            raise SchemaError("ChangelogNormalize needs a schema with a primary key")
        self.schema = schema
        self.store = store
        self.generate_update_before = generate_update_before

    @property
    def changelog_mode(self) -> frozenset[RowKind]:
        return RETRACT if self.generate_update_before else UPSERT

    def key_bytes(self, values: Mapping[str, Any]) -> bytes:
        """The store key of a row: :func:`encode_key` of its primary-key tuple."""
        return encode_key(self.schema.key_of(values))

    def previous(self, key: bytes) -> dict[str, Any] | None:
        """The last full row stored for ``key``, or None."""
        raw = self.store.get(key)
        return None if raw is None else decode_values(raw)

    def process(self, row: ChangelogRow, key: bytes | None = None) -> list[ChangelogRow]:
        """Apply one incoming change and return the rows to emit (0, 1 or 2 rows).

        Args:
            row: an upsert (+I/+U, full row) or a retraction (-D/-U; only key columns needed).
            key: the row's state key; computed from the primary key when None.

        Emitted rows keep ``row.table`` and ``row.metadata``; -D rows carry the full previous row.
        """
        k = key if key is not None else self.key_bytes(row.values)
        prev_raw = self.store.get(k)
        if row.kind.is_accumulate:
            new_values = dict(row.values)
            if prev_raw is None:
                self.store.put(k, encode_values(new_values))
                return [ChangelogRow(RowKind.INSERT, new_values, row.table, row.metadata)]
            prev = decode_values(prev_raw)
            if prev == new_values:
                return []
            self.store.put(k, encode_values(new_values))
            out: list[ChangelogRow] = []
            if self.generate_update_before:
                out.append(ChangelogRow(RowKind.UPDATE_BEFORE, prev, row.table, row.metadata))
            out.append(ChangelogRow(RowKind.UPDATE_AFTER, new_values, row.table, row.metadata))
            return out
        if prev_raw is None:
            return []
        self.store.delete(k)
        return [ChangelogRow(RowKind.DELETE, decode_values(prev_raw), row.table, row.metadata)]
