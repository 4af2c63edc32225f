"""Compaction of a changelog batch to the last change per primary key (the sink's reduce step).

As Flink's upsert-kafka ``ReducingUpsertWriter`` keeps only the latest record per key before a
flush, the lake sinks (Iceberg, Paimon) reduce a batch before their single commit: ``+I``/``+U`` make the row's
image the key's final state, ``-D`` and ``-U`` make the key deleted (the ``+U`` that
follows a ``-U`` re-upserts its key; an update that changed the key leaves the old key deleted), and a :data:`TRUNCATE` marker forgets everything before it and
deletes every row already in the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Union

from changelake.changelog.row import ChangelogRow
from changelake.connectors.lake.errors import NullPrimaryKeyError

__all__ = ["TruncateMarker", "TRUNCATE", "BatchItem", "CompactedBatch", "compact"]


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
