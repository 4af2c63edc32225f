"""Table-level changes a lake sink applies besides rows: truncates that cover a share of a table.

A truncate read from one partition of a ``hash-by-key`` topic deletes only the rows that
partition carried (:mod:`changelake.connectors.kafka.truncate_scope` says why). The lake sink
turns such a marker into ``-D`` rows of the covered keys (the lake's current keys and the keys
earlier in the batch) before compacting, so a worker deletes the keys of its own partitions and
nothing else; a marker without a scope deletes every row, as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.connectors.lake.compaction import BatchItem, TruncateMarker
from changelake.connectors.lake.offsets import topic_partition
from changelake.connectors.lake.schema_change import SchemaChangeBehavior, SchemaChangeError
from changelake.errors import PipelineDataError

log = logging.getLogger(__name__)

__all__ = ["scoped", "has_scoped_truncate", "expand_scoped_truncates", "Refusal", "apply_schema_change_policy",
           "offsets_before", "dropped_after", "dropped_key", "without_dropped_rows",
           "dropped_rows_removed", "rows_after_a_drop", "DROP_COPIES_SUFFIX", "drop_copies_key", "drop_copies",
           "kafka_offsets", "DropGenerations", "by_drop_generation"]


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


# -- DROP TABLE ------------------------------------------------------------------------------------
def dropped_key(table_name: str) -> str:
    """The pipeline property that marks a lake table whose source table was dropped."""
    return f"changelake.dropped.{table_name}"


def dropped_after(items: Sequence[BatchItem]) -> bool | None:
    """True when the batch ends with its table dropped (a drop marker after its last row), False
    when rows follow the last drop marker (or there is none but rows), None without a drop."""
    state: bool | None = None
    for item in items:
        if isinstance(item, TruncateMarker) and item.drop:
            state = True
        elif state is not None and isinstance(item, ChangelogRow):
            state = False
    return state


def rows_after_a_drop(items: Sequence[BatchItem]) -> bool:
    """True when a changelog row follows some drop marker of the batch (on a hash-by-key topic the
    drop copy of any partition): rows of the re-created table, whatever comes after them."""
    seen = False
    for item in items:
        if isinstance(item, TruncateMarker) and item.drop:
            seen = True
        elif seen and isinstance(item, ChangelogRow):
            return True
    return False


def without_dropped_rows(items: Sequence[BatchItem]) -> list[BatchItem]:
    """``items`` without the rows a later drop marker of the same batch deletes: every row before
    an unscoped drop, and the rows a scoped drop copy (one partition of a ``hash-by-key`` topic)
    covers before it; markers and every other row are kept, in order.

    Those rows belong to a definition of the table that is dropped within the batch, so their
    schema (the batch's, which may differ from the lake table's, e.g. ``v INT`` re-created as
    ``v VARCHAR``) must neither re-create nor evolve the lake table; the compacted result is the
    same as with them (the drop deletes their keys: ones the lake holds are still read and deleted
    by :func:`expand_scoped_truncates` or the truncate)."""
    return dropped_rows_removed([items])[0]


def dropped_rows_removed(segments: Sequence[Sequence[BatchItem]]) -> list[list[BatchItem]]:
    """:func:`without_dropped_rows` over consecutive ``segments`` of one table's items (one per
    schema, oldest first): a drop in a later segment deletes the rows it covers in earlier ones."""
    out: list[list[BatchItem]] = []
    scopes: list[Any] = []  # scoped drops that follow, read from no known partition
    partitions: set[str] = set()  # topic/partition of the scoped drop copies that follow
    everything = False  # an unscoped drop follows: every earlier row is deleted
    for segment in reversed(segments):
        kept: list[BatchItem] = []
        for item in reversed(segment):
            if isinstance(item, TruncateMarker):
                if item.drop:
                    found = _located(item)
                    if item.scope is None:
                        everything = True
                    elif found is not None:
                        partitions.add(found[0])
                    else:
                        scopes.append(item.scope)
            elif isinstance(item, ChangelogRow) and _dropped_later(item, everything, partitions, scopes):
                continue
            kept.append(item)
        kept.reverse()
        out.append(kept)
    out.reverse()
    return out


def _dropped_later(row: ChangelogRow, everything: bool, partitions: set[str], scopes: Sequence[Any]) -> bool:
    if everything:
        return True
    found = _located(row)
    if found is not None and found[0] in partitions:  # its own partition's drop copy
        return True
    return any(s.covers(row.values) for s in scopes)


# -- drop generations: a hash-by-key partition a whole DROP behind another --------------------------
#: Suffix of the keys, in a lake table's committed offsets map (``changelake.kafka-offsets``), that
#: count the DROP TABLE copies read from one partition: ``"<topic>/<partition>@drop.table"`` (a
#: Kafka topic name has no ``@``). Committed in the same snapshot as the offsets, so the count and
#: the offset of every partition always agree, across restarts, replays and workers.
DROP_COPIES_SUFFIX = "@drop.table"


def drop_copies_key(tp: str) -> str:
    """The committed-offsets key counting the DROP TABLE copies read from ``tp`` (``topic/partition``)."""
    return tp + DROP_COPIES_SUFFIX


def drop_copies(committed: Mapping[str, int]) -> dict[str, int]:
    """``topic/partition`` -> DROP TABLE copies read from it, from a lake table's committed offsets map."""
    n = len(DROP_COPIES_SUFFIX)
    return {k[:-n]: int(v) for k, v in committed.items() if k.endswith(DROP_COPIES_SUFFIX)}


def kafka_offsets(committed: Mapping[str, int]) -> dict[str, int]:
    """A lake table's committed offsets map without the drop-copy counts: ``topic/partition`` ->
    next offset."""
    return {k: v for k, v in committed.items() if not k.endswith(DROP_COPIES_SUFFIX)}


@dataclass(frozen=True)
class DropGenerations:
    """A batch of one table read against the DROP TABLE copies each partition has passed
    (:func:`by_drop_generation`).

    Attributes:
        items: the batch without the rows of a dropped generation; a drop copy another partition
            already brought (a *late* copy) is a plain truncate of its partition's share.
        copies: ``topic/partition`` -> drop copies passed, after the batch (to commit with it).
        newest: the table's generation after the batch: the most drop copies any partition passed.
        before: the same before the batch (from the committed counts).
        stale: rows left out.
        through: ``topic/partition`` -> the offset after the last drop copy the batch read from
            it: the commit that stores :attr:`copies` stores at least these offsets, so a replay
            never counts a copy twice (a batch's earlier schema segments commit without offsets).
    """

    items: list[BatchItem]
    copies: dict[str, int]
    newest: int
    before: int
    stale: int = 0
    through: dict[str, int] = field(default_factory=dict)

    @property
    def offsets(self) -> dict[str, int]:
        """:attr:`copies` as committed-offsets entries (:func:`drop_copies_key`)."""
        return {drop_copies_key(tp): n for tp, n in sorted(self.copies.items())}


def by_drop_generation(items: Sequence[BatchItem], committed: Mapping[str, int], *,
                       late_copies_as_truncates: bool = True) -> DropGenerations:
    """Tell the rows of a dropped definition from the live ones by the drop copies each partition passed.

    On a ``hash-by-key`` topic every ``DROP TABLE`` has a copy in every partition (at the drop's
    place in the binlog), so the rows a partition carries after its ``n``-th copy are of the
    table's ``n``-th generation (the ``n``-th re-CREATE). A row of partition ``p`` read while
    another partition has passed more copies than ``p`` (``p`` is a whole drop behind: its next
    copy is not read yet, possibly in an earlier lake commit of another worker) was written in
    MySQL before a DROP that is already applied: it is of a dropped definition and left out.
    Nothing is lost: its key hashes to ``p``, so ``p``'s own copy of that DROP deletes it, and no
    newer row of that key exists before that copy. Applying it would re-create or evolve the lake
    table to the older definition (the newer rows' values of a retyped column would become NULL).
    The first copy of a DROP (the one that raises the generation) stays a drop; the later copies
    of other partitions only delete their share (a scoped truncate).

    One partition (or the pseudo partition of a ``mysql`` source) passes every drop itself, so
    nothing is ever left out there. Items without ``topic``/``partition``/``offset`` metadata are
    kept as they are. The counts assume the topic's partition count does not change, as the
    truncate scopes of :mod:`changelake.connectors.kafka.truncate_scope` do.

    Args:
        items: one table's items not yet absorbed (oldest first).
        committed: the lake table's committed drop-copy counts (:func:`drop_copies`).
        late_copies_as_truncates: False: only leave the rows out, every marker stays as it is
            (before a schema change policy filters the markers).
    """
    copies = dict(committed)
    before = max(copies.values(), default=0)
    through: dict[str, int] = {}
    for item in items:
        if isinstance(item, TruncateMarker) and item.drop:
            found = _located(item)
            if found is not None:
                copies[found[0]] = copies.get(found[0], 0) + 1
                through[found[0]] = max(through.get(found[0], 0), found[1] + 1)
    newest = max(copies.values(), default=0)
    if newest == 0:  # the table was never dropped
        return DropGenerations(list(items), copies, 0, 0)
    running = dict(committed)
    top = before
    out: list[BatchItem] = []
    stale = 0
    for item in items:
        found = _located(item)
        if found is None:
            out.append(item)
            continue
        gen = running.get(found[0], 0)
        if isinstance(item, TruncateMarker) and item.drop:
            running[found[0]] = gen + 1
            if gen + 1 <= top and late_copies_as_truncates:  # another partition brought it first: its share only
                item = replace(item, drop=False)
            else:
                top = gen + 1
        elif isinstance(item, ChangelogRow) and gen < newest:
            stale += 1
            continue
        out.append(item)
    return DropGenerations(out, copies, newest, before, stale, through)


# -- a truncate or drop of a table whose schema this run never saw --------------------------------
def _data_type(arrow_type: Any, nullable: bool) -> Any:
    import pyarrow as pa

    from changelake.changelog.types import DataType, TypeRoot

    t = arrow_type
    simple = [(pa.types.is_boolean, TypeRoot.BOOLEAN), (pa.types.is_int8, TypeRoot.TINYINT),
              (pa.types.is_int16, TypeRoot.SMALLINT), (pa.types.is_int32, TypeRoot.INT),
              (pa.types.is_int64, TypeRoot.BIGINT), (pa.types.is_float32, TypeRoot.FLOAT),
              (pa.types.is_float64, TypeRoot.DOUBLE), (pa.types.is_date, TypeRoot.DATE)]
    for test, root in simple:
        if test(t):
            return DataType(root, nullable)
    if pa.types.is_decimal(t):
        return DataType.decimal(t.precision, t.scale, nullable)
    if pa.types.is_timestamp(t):
        return DataType.of(TypeRoot.TIMESTAMP_LTZ if t.tz else TypeRoot.TIMESTAMP, nullable, precision=6)
    if pa.types.is_time(t):
        return DataType.of(TypeRoot.TIME, nullable, precision=6)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return DataType(TypeRoot.BYTES, nullable)
    return DataType(TypeRoot.STRING, nullable)


def lake_schema(lake: Any, table_id: TableId) -> Schema | None:
    """The schema of the lake table of ``table_id`` as the lake holds it (its Arrow schema and
    primary key), for a truncate or DROP TABLE that reaches Pipeline 2 without a schema (the
    table was dropped before Pipeline 1 saw a row of it); None when the lake has no such table."""
    from changelake.changelog.schema import Column

    if lake.load_table(table_id) is None:
        return None
    arrow = lake.read_table(table_id).schema
    key = list(lake.primary_key(table_id))
    cols = tuple(Column(f.name, _data_type(f.type, f.name not in key)) for f in arrow)
    return Schema(cols, tuple(key))


# -- pipeline.schema.change.behavior ---------------------------------------------------------------
@dataclass(frozen=True)
class Refusal:
    """A schema change refused under ``exception``: the error (naming table and change) and the
    batch's items from the refused change on (none of them is written)."""

    error: SchemaChangeError
    tail: list[BatchItem]


def apply_schema_change_policy(sink: Any, policy: Any, table_id: TableId, table_name: str,
                               rows: Sequence[BatchItem], schema: Schema, *,
                               recreating: bool = False) -> tuple[list[BatchItem], Schema, Refusal | None]:
    """The batch and schema to write under ``policy``
    (:class:`~changelake.connectors.lake.schema_change.SchemaChangePolicy`): truncates / drops it
    ignores are left out, columns are added, kept, dropped or renamed as the mode says.
    ``recreating``: the rows are those of a re-CREATEd table whose DROP TABLE the policy applies;
    the lake table takes their definition as it is (a new table, as ``create.table``), so no
    column change is planned (``try_evolve`` would keep an old column type and write NULL).

    Under ``exception`` the first refused change ends the batch: the items before it are returned
    with a :class:`Refusal` (the caller commits them, then raises its error). A column change
    is the batch's schema, so it comes before every item of the batch (the lake sink commits one
    schema per batch) and is found before any truncate / drop in it.

    Raises:
        the lake's schema-evolution errors: ``evolve`` met a change the lake cannot apply.
    """
    exists = sink.load_table(table_id) is not None
    refusal = None
    if policy.behavior is SchemaChangeBehavior.EXCEPTION:
        if exists:
            try:
                policy.plan(table_name, sink.column_changes(table_id, schema), schema)
            except SchemaChangeError as err:
                return [], schema, Refusal(err, list(rows))
        found = policy.first_refused_marker(table_name, rows)
        if found is not None:  # the items before it: none refused (every change in them is ignored)
            rows, tail = _before_refused(policy, rows, found[0])
            refusal = Refusal(found[1], tail)
    items = policy.filter_markers(table_name, rows)
    if not exists or recreating:
        return items, schema, refusal  # create.table: a new lake table always starts from the schema
    changes = sink.column_changes(table_id, schema)
    drops = [c.column for c in changes if c.kind == "drop"]
    if (drops and policy.behavior in (SchemaChangeBehavior.EVOLVE, SchemaChangeBehavior.TRY_EVOLVE)
            and is_earlier_schema(schema, drops, sink.past_column_sets(table_id))):
        # rows written with a definition the lake has already evolved past (another partition or
        # worker is behind; an incremental snapshot's chunks and binlog join interleave old and new
        # definitions): their missing columns are not a DROP COLUMN (dropping would lose the values
        # the newer rows wrote there); the rows get NULL in them
        log.info("table %s: a batch written with an earlier definition of the lake table (without %s); the "
                 "columns are kept", table_name, ", ".join(drops))
        changes = [c for c in changes if c.kind != "drop"]
    plan = policy.plan(table_name, changes, schema)
    if plan.drop_columns:
        sink.drop_columns(table_id, plan.drop_columns)
    return plan.apply(items), plan.schema, refusal


def is_earlier_schema(incoming: Schema, would_drop: Sequence[str], past: Sequence[frozenset[str]]) -> bool:
    """True when ``incoming``'s columns are all in one of the lake table's earlier schemas
    (``past``, from its schema history) that lacked every column ``would_drop`` names: a record
    of a definition the lake has already evolved past, not a new DROP COLUMN. A table altered back
    to an earlier definition (``ADD COLUMN w`` then ``DROP COLUMN w``) looks the same: ``w`` is
    then kept in the lake (NULL from then on), as changelake's default keeps a dropped column.
    (Only drops are held back: an ADD COLUMN is always applied, it never loses a value.)"""
    names = set(incoming.names)
    return any(names <= cols and not cols.intersection(would_drop) for cols in past)


def _before_refused(policy: Any, rows: Sequence[BatchItem], at: int) -> tuple[list[BatchItem], list[BatchItem]]:
    """``rows`` split into the items before the refused truncate / drop at ``at`` and the rest.

    A truncate of a ``hash-by-key`` topic has a copy in every partition (a scoped marker): a
    partition's records before its own copy precede the TRUNCATE, so each partition is cut at
    its first refused copy (records of one partition are in binlog order; those of different
    partitions are interleaved as polled). An unscoped marker cuts every partition where it is."""
    cut: set[str] = set()
    written: list[BatchItem] = []
    tail: list[BatchItem] = []
    everything = False  # an unscoped refused marker: everything after it is cut
    for index, item in enumerate(rows):
        found = _located(item)
        if isinstance(item, TruncateMarker) and index >= at and policy.applies(
                "drop.table" if item.drop else "truncate.table"):
            if item.scope is None or found is None:
                everything = True
            else:
                cut.add(found[0])
        if everything or (found is not None and found[0] in cut) or (found is None and index >= at):
            tail.append(item)
        else:
            written.append(item)
    return written, tail


def _located(item: BatchItem) -> tuple[str, int] | None:
    meta = item.metadata
    if "topic" not in meta or "partition" not in meta or "offset" not in meta:
        return None
    return topic_partition(str(meta["topic"]), int(meta["partition"])), int(meta["offset"])


def offsets_before(refusal: Refusal, written: Sequence[BatchItem], offsets: Mapping[str, int]) -> dict[str, int]:
    """The offsets to commit with ``written``, the part of a batch before a refused schema
    change: per ``topic/partition`` a record of the batch came from, the offset of its first
    record not written (the refused one, in its partition), or else the batch's next offset
    (``offsets``; at least the next after its last written record). Partitions no record of the
    table came from are left out, so a restart that stops at the same change commits nothing."""
    out: dict[str, int] = {}
    for item in written:
        found = _located(item)
        if found is not None:
            tp, offset = found
            out[tp] = max(out.get(tp, 0), offsets.get(tp, 0), offset + 1)
    first: dict[str, int] = {}
    for item in refusal.tail:
        found = _located(item)
        if found is not None and found[0] not in first:
            first[found[0]] = found[1]  # records of one partition are in offset order
    out.update(first)
    return out
