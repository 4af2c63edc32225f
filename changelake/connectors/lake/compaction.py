"""Compaction of a changelog batch to the last change per primary key (the sink's reduce step).

As Flink's upsert-kafka ``ReducingUpsertWriter`` keeps only the latest record per key before a
flush, the lake sinks (Iceberg, Paimon) reduce a batch before their single commit: ``+I``/``+U`` make the row's
image the key's final state, ``-D`` and ``-U`` make the key deleted (the ``+U`` that
follows a ``-U`` re-upserts its key; an update that changed the key leaves the old key deleted), and a :data:`TRUNCATE` marker forgets everything before it and
deletes every row already in the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence, Union

from changelake.changelog.row import ChangelogRow
from changelake.connectors.lake.errors import NullPrimaryKeyError

__all__ = ["TruncateMarker", "TRUNCATE", "BatchItem", "CompactedBatch", "compact", "ArrowCompacted", "compact_batches",
           "python_rows"]


@dataclass(frozen=True)
class TruncateMarker:
    """Stands for a ``TRUNCATE TABLE`` (Debezium op ``t``) inside a batch: delete every row.

    Attributes:
        metadata: like :attr:`ChangelogRow.metadata`; give ``topic``, ``partition`` and ``offset``
            of the Kafka record that carried the truncate, so that a replayed batch reaching
            past the committed offsets does not truncate again rows absorbed after it, e.g.
            ``TruncateMarker({"topic": "shop.orders", "partition": 0, "offset": 41})``.
    """

    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: None: delete every row. Else the share of the table this truncate copy deletes, an object
    #: with ``covers(row) -> bool`` and ``key_columns`` (the Kafka source's
    #: :class:`~changelake.connectors.kafka.truncate_scope.TruncateScope`); the lake sink turns
    #: it into deletes of the covered keys before compacting.
    scope: Any = field(default=None, compare=False)
    #: the truncate stands for a ``DROP TABLE``: the table is emptied the same way, and the next
    #: schema it is written with replaces its definition (a re-CREATE starts from the new one).
    drop: bool = field(default=False, compare=False)

    def __repr__(self) -> str:
        return "TRUNCATE" + (f"{dict(self.metadata)}" if self.metadata else "")


#: A truncate marker without a Kafka position (replays of it are not filtered per record).
TRUNCATE = TruncateMarker()

BatchItem = Union[ChangelogRow, TruncateMarker]


@dataclass
class CompactedBatch:
    """The net effect of a batch on one table.

    Attributes:
        truncate: every row in the table before this batch is deleted.
        upserts: key tuple -> final row image (column name -> value), in first-seen order.
        deletes: keys whose final state is "deleted" (never also in ``upserts``); empty when
            ``truncate`` is set, since the truncate already removes them.
        input_rows: changelog rows read (markers not counted).
    """

    truncate: bool = False
    upserts: dict[tuple[Any, ...], Mapping[str, Any]] = field(default_factory=dict)
    deletes: set[tuple[Any, ...]] = field(default_factory=set)
    input_rows: int = 0

    @property
    def changed_keys(self) -> list[tuple[Any, ...]]:
        """Keys whose existing lake row must go: upserted and deleted keys."""
        return [*self.upserts, *self.deletes]

    @property
    def is_empty(self) -> bool:
        return not (self.truncate or self.upserts or self.deletes)


def compact(items: Iterable[BatchItem], primary_key: tuple[str, ...], *, table: str) -> CompactedBatch:
    """Reduce ``items`` (in changelog order) to the last change per primary key.

    Args:
        items: changelog rows of one table and :data:`TRUNCATE` markers, oldest first.
        primary_key: key column names, in key order (non-empty).
        table: the table's name, for errors.

    Returns:
        The :class:`CompactedBatch`.

    Raises:
        NullPrimaryKeyError: a ``+I``/``+U``/``-D`` row has NULL (or lacks) a key column; the error
            names the table and the column.
    """
    batch = CompactedBatch()
    for item in items:
        if isinstance(item, TruncateMarker):
            batch.truncate = True
            batch.upserts.clear()
            batch.deletes.clear()
            continue
        batch.input_rows += 1
        # -U retracts its key like -D: usually the +U that follows re-upserts the same key, but an
        # update that changes the primary key must delete the old key (else it would linger).
        key = _key_of(item.values, primary_key, table)
        if item.kind.is_accumulate:
            batch.upserts.pop(key, None)  # re-insert so order follows the last change
            batch.upserts[key] = item.values
            batch.deletes.discard(key)
        else:
            batch.upserts.pop(key, None)
            if not batch.truncate:
                batch.deletes.add(key)
    return batch


def _key_of(values: Mapping[str, Any], primary_key: tuple[str, ...], table: str) -> tuple[Any, ...]:
    key = tuple(values.get(k) for k in primary_key)
    for name, value in zip(primary_key, key):
        if value is None:
            raise NullPrimaryKeyError(
                f"primary-key column {name!r} of table {table!r} is NULL; the lake cannot key this row",
                table=table,
                column=name,
            )
    return key


# -- the columnar lane: change batches reduced in Arrow ---------------------------------------------
@dataclass
class ArrowCompacted:
    """The net effect of change batches on one table, in Arrow (:func:`compact_batches`).

    Attributes:
        upserts: the final image of each upserted key (the batches' columns), ordered by the
            key's last change.
        upsert_kinds: ``+I`` or ``+U``, the kind of each upsert's last change (Paimon's row kind).
        deletes: the key columns of the keys whose final state is deleted.
        input_rows: changelog rows read.
    """

    upserts: Any
    upsert_kinds: Any
    deletes: Any
    input_rows: int

    @property
    def is_empty(self) -> bool:
        return not (self.upserts.num_rows or self.deletes.num_rows)

    def to_compacted(self, schema: Any) -> tuple[CompactedBatch, list[ChangelogRow]]:
        """As :func:`compact` gives it, with Python values (TIME text back to ``timedelta``), and
        the last upsert of each key as a changelog row (for a lake reading the row kinds)."""
        from changelake.changelog.rowkind import RowKind

        primary_key = tuple(schema.primary_key)
        upserts = python_rows(self.upserts, schema)
        deletes = python_rows(self.deletes, schema)
        batch = CompactedBatch(input_rows=self.input_rows)
        last: list[ChangelogRow] = []
        for values, kind in zip(upserts, self.upsert_kinds.to_pylist()):
            key = tuple(values[k] for k in primary_key)
            batch.upserts[key] = values
            last.append(ChangelogRow(RowKind.from_short_string(kind), values))
        batch.deletes = {tuple(values[k] for k in primary_key) for values in deletes}
        return batch, last


def python_rows(table: Any, schema: Any) -> list[dict[str, Any]]:
    """A batch table's rows as the per-record path's values (TIME text back to ``timedelta``)."""
    from changelake.changelog.types import TypeRoot
    from changelake.formats.json_values import json_decoder_for

    rows: list[dict[str, Any]] = table.to_pylist()
    for column in schema.columns:
        if column.type.root is TypeRoot.TIME and column.name in table.column_names:
            decode = json_decoder_for(column.type, column.name)
            for row in rows:
                if row[column.name] is not None:
                    row[column.name] = decode(row[column.name])
    return rows


def compact_batches(batches: Sequence[Any], primary_key: tuple[str, ...], *, table: str) -> ArrowCompacted:
    """Reduce change batches (:class:`~changelake.changelog.change_batch.ChangeBatch`, oldest
    first, one schema) to the last change per primary key, in Arrow: as :func:`compact` does
    for rows (``+I``/``+U`` upsert the key, ``-U``/``-D`` delete it, the last change wins).

    Raises:
        NullPrimaryKeyError: a row has NULL (or lacks) a key column (names table and column).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = pa.concat_tables([b.rows for b in batches]) if len(batches) > 1 else batches[0].rows
    kinds = pa.concat_arrays([b.kinds for b in batches]) if len(batches) > 1 else batches[0].kinds
    for name in primary_key:
        if name not in rows.column_names or rows.column(name).null_count:
            raise NullPrimaryKeyError(
                f"primary-key column {name!r} of table {table!r} is NULL; the lake cannot key this row",
                table=table, column=name,
            )
    n = rows.num_rows
    upsert_kinds = pa.array(["+I", "+U"])
    # (an update's -U and +U share their key: batches with updates are not tried)
    if (len(primary_key) == 1 and not any(b.ops.get("u") for b in batches)
            and pc.count_distinct(rows.column(primary_key[0])).as_py() == n):
        # every key changes once (an insert-only stream): each row is its key's last change, in
        # order -- what the group-by below gives, without its copies of the batch
        keep = pc.is_in(kinds, value_set=upsert_kinds)
        if pc.all(keep).as_py() is not False:
            return ArrowCompacted(upserts=rows, upsert_kinds=kinds, deletes=rows.slice(0, 0).select(list(primary_key)),
                                  input_rows=n)
        return ArrowCompacted(upserts=rows.filter(keep), upsert_kinds=kinds.filter(keep),
                              deletes=rows.filter(pc.invert(keep)).select(list(primary_key)), input_rows=n)
    indexed = pa.table({**{k: rows.column(k) for k in primary_key}, "__i": pa.array(range(n), pa.int64())})
    last = indexed.group_by(list(primary_key), use_threads=False).aggregate([("__i", "max")])
    take = pc.sort_indices(last.column("__i_max"))
    positions = last.column("__i_max").take(take)
    final = rows.take(positions)
    final_kinds = kinds.take(positions)
    keep = pc.is_in(final_kinds, value_set=upsert_kinds)
    return ArrowCompacted(
        upserts=final.filter(keep),
        upsert_kinds=final_kinds.filter(keep),
        deletes=final.filter(pc.invert(keep)).select(list(primary_key)),
        input_rows=n,
    )
