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

A state value is either :func:`~changelake.changelog.state.encode_values` of the row (written by
:meth:`ChangelogNormalize.process`; tagged JSON, starts with ``{``) or
:data:`ENCODED_STATE_MARK` followed by the caller's own encoding of the row (written by
:meth:`ChangelogNormalize.process_encoded`, e.g. the upsert-kafka source's raw key and value
bytes; read back with the ``decode_state`` function given to the constructor). Both kinds can
live in one store.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from changelake.changelog.errors import KeyStateError, SchemaError
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RETRACT, UPSERT, RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.state import KeyStateStore, decode_values, encode_key, encode_values
from changelake.changelog.types import TypeRoot

__all__ = ["ChangelogNormalize", "ENCODED_STATE_MARK"]

#: First byte of a state value written by :meth:`ChangelogNormalize.process_encoded`.
ENCODED_STATE_MARK = b"\x01"


class ChangelogNormalize:
    """Per-key normalizer of an upsert changelog over a key-state store.

    Args:
        schema: schema of the rows; its primary key identifies a row.
        store: where the last full row per key is kept (memory or durable).
        generate_update_before: emit ``-U(prev)`` before each ``+U`` (a retract changelog, as
            Flink when a downstream operator needs update-before); default False (upsert:
            +I/+U/-D only).
        decode_state: the row of an encoding given to :meth:`process_encoded` (the bytes after
            :data:`ENCODED_STATE_MARK`); needed to read such state values.

    :attr:`changelog_mode` is ``RETRACT`` with update-before, else ``UPSERT``.
    """

    def __init__(
        self,
        schema: Schema,
        store: KeyStateStore,
        *,
        generate_update_before: bool = False,
        decode_state: Callable[[bytes], dict[str, Any]] | None = None,
    ) -> None:
        if not schema.primary_key:
            raise SchemaError("ChangelogNormalize needs a schema with a primary key")
        self.schema = schema
        self.store = store
        self.generate_update_before = generate_update_before
        self.decode_state = decode_state
        # equal encodings mean equal rows, unless a row may hold NaN (NaN != NaN: such a row is
        # never equal to its previous value, so it is compared value by value)
        self._equal_bytes_equal_rows = not any(
            c.type.root in (TypeRoot.FLOAT, TypeRoot.DOUBLE) for c in schema.columns
        )

    @property
    def changelog_mode(self) -> frozenset[RowKind]:
        return RETRACT if self.generate_update_before else UPSERT

    def key_bytes(self, values: Mapping[str, Any]) -> bytes:
        """The store key of a row: :func:`encode_key` of its primary-key tuple."""
        return encode_key(self.schema.key_of(values))

    def previous(self, key: bytes) -> dict[str, Any] | None:
        """The last full row stored for ``key``, or None."""
        raw = self.store.get(key)
        return None if raw is None else self._decode(raw)

    def _decode(self, raw: bytes) -> dict[str, Any]:
        """The row of a state value (either kind, see the module docstring). Raises KeyStateError."""
        if raw[:1] != ENCODED_STATE_MARK:
            return decode_values(raw)
        if self.decode_state is None:
            raise KeyStateError(
                "the key state holds a row encoded by its source (upsert-kafka); read it through that source, "
                "or delete the key-state directory to rebuild it from the earliest offset"
            )
        return self.decode_state(raw[1:])

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
            prev = self._decode(prev_raw)
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
        return [ChangelogRow(RowKind.DELETE, self._decode(prev_raw), row.table, row.metadata)]

    def process_encoded(self, row: ChangelogRow, key: bytes, encoded: bytes) -> list[ChangelogRow]:
        """:meth:`process` for a caller that holds the row in its own encoding (e.g. the record
        bytes it was decoded from): the state keeps ``ENCODED_STATE_MARK + encoded`` instead of
        re-encoding the row, an upsert whose state bytes equal the stored ones is a duplicate
        without decoding anything, and the previous row is decoded (``decode_state``) only to
        compare unequal bytes or to emit ``-U`` / ``-D``.

        Args:
            row: as for :meth:`process`; for +I/+U ``row.values`` must equal
                ``decode_state(encoded)``, and decoding must be deterministic.
            key: the row's state key.
            encoded: the row's encoding (ignored for -D/-U).

        Emits exactly what :meth:`process` emits for the same rows.
        """
        if not row.kind.is_accumulate:
            return self.process(row, key)
        return self.upsert_encoded(dict(row.values), key, encoded, row.table, row.metadata)

    def upsert_encoded(
        self,
        values: dict[str, Any],
        key: bytes,
        encoded: bytes,
        table: TableId | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[ChangelogRow]:
        """:meth:`process_encoded` of the upsert ``ChangelogRow(+U, values, table, metadata)``
        without building it (a source's hot path): the same rows, which take ``values`` itself
        (not a copy; the caller hands over a fresh dict) and ``metadata`` (``{}`` when None).

        Args:
            values: the full row; must equal ``decode_state(encoded)``.
            key: the row's state key.
            encoded: the row's encoding.
        """
        meta: Mapping[str, Any] = {} if metadata is None else metadata
        store = self.store
        state = ENCODED_STATE_MARK + encoded
        prev_raw = store.get(key)
        if prev_raw is None:
            store.put(key, state)
            return [ChangelogRow(RowKind.INSERT, values, table, meta)]
        if prev_raw == state and self._equal_bytes_equal_rows:
            return []
        prev = self._decode(prev_raw)
        if prev == values:
            return []
        store.put(key, state)
        if self.generate_update_before:
            return [
                ChangelogRow(RowKind.UPDATE_BEFORE, prev, table, meta),
                ChangelogRow(RowKind.UPDATE_AFTER, values, table, meta),
            ]
        return [ChangelogRow(RowKind.UPDATE_AFTER, values, table, meta)]
