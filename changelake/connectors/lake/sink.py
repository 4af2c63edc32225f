"""What every lake sink (``iceberg``, ``paimon``) does the same way: :class:`LakeTableSink`.

A lake sink writes changelog batches to primary-key tables, one commit per table per batch, with
the Kafka offsets (or the pipeline's event numbers, see
:class:`changelake.connectors.lake.changelog_sink.LakePositionSink`) it absorbed stored in the commit's snapshot. The
shared part, here:

* buffering: :meth:`~LakeTableSink.add` rows per table, :meth:`~LakeTableSink.should_flush` at
  ``commit.max-rows``, :meth:`~LakeTableSink.flush` one commit per buffered table;
* one commit (:meth:`~LakeTableSink.write`): skip a replayed batch, drop the items a table already
  absorbed, reduce the batch to the last change per key
  (:func:`~changelake.connectors.lake.compaction.compact`), merge the offsets, then hand the
  :class:`~changelake.connectors.lake.compaction.CompactedBatch` to the table format;
* the pipeline checkpoint (:meth:`~LakeTableSink.read_checkpoint`), kept as a pipeline property.

A table format subclasses it with its catalog, table creation/evolution, how a snapshot stores
the offsets, and the commit of a compacted batch (:meth:`LakeTableSink._commit_batch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence, cast

import pyarrow.compute as pc

from changelake.changelog.change_batch import ChangeBatch

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.connectors.lake.compaction import (
    TRUNCATE,
    ArrowCompacted,
    BatchItem,
    CompactedBatch,
    compact,
    compact_batches,
    python_rows,
)
from changelake.connectors.lake.ddl import (
    apply_schema_change_policy,
    by_drop_generation,
    drop_copies,
    kafka_offsets,
    dropped_after,
    dropped_key,
    expand_scoped_truncates,
    has_scoped_truncate,
    lake_schema,
    offsets_before,
    rows_after_a_drop,
    without_dropped_rows,
)
from changelake.connectors.lake.schema_change import SchemaChangePolicy
from changelake.errors import PipelineDataError
from changelake.connectors.lake.offsets import decode_offsets, encode_offsets, is_replay, merge_offsets, topic_partition

__all__ = ["WriteResult", "LakeTableSink", "already_absorbed"]


@dataclass(frozen=True)
class WriteResult:
    """Outcome of one :meth:`LakeTableSink.write` (one commit, or a skipped replay).

    Attributes:
        table: the lake identifier (Iceberg ``namespace.table``, Paimon ``database.table``).
        skipped: the batch's offsets were already absorbed (replay after a crash); nothing written.
        rows_in: changelog rows received (TRUNCATE markers not counted).
        rows_upserted: rows written as the final image of an upserted key.
        keys_deleted: keys whose final state is deleted (as the table format counts them).
        truncated: every earlier row was deleted.
        snapshot_id: the table's snapshot id after the commit (None when skipped).
        offsets: the offsets stored with the commit (or the committed ones when skipped).
        rows_rewritten: unchanged lake rows the commit wrote again (Iceberg's copy-on-write
            rewrite of the files holding changed keys; 0 for Paimon's merge-on-read).
        sink_table: the sink table the rows came for (``db.table``, as the pipeline's stats name it).
        rows_applied: change events this commit absorbed (an update's ``-U``/``+U`` pair and a
            TRUNCATE count once each): those past the table's stored offsets (0 when skipped).
            Rows another writer committed first (a replay, re-reads after a consumer-group
            handover, the winner of a commit race) are not counted, so the writers' counts add
            up to the distinct changes the table absorbed.
    """

    table: str
    skipped: bool
    rows_in: int = 0
    rows_upserted: int = 0
    keys_deleted: int = 0
    truncated: bool = False
    snapshot_id: int | None = None
    offsets: Mapping[str, int] = field(default_factory=dict)
    rows_rewritten: int = 0

    @property
    def write_amplification(self) -> float:
        """Rows written per changed key: ``(rows_rewritten + rows_upserted) / (rows_upserted +
        keys_deleted)``; 0.0 when the commit changed nothing."""
        changed = self.rows_upserted + self.keys_deleted
        return (self.rows_rewritten + self.rows_upserted) / changed if changed else 0.0
    sink_table: str = ""
    rows_applied: int = 0


@dataclass
class _Buffer:
    schema: Schema
    rows: list[BatchItem | ChangeBatch] = field(default_factory=list)
    offsets: dict[str, int] = field(default_factory=dict)
    count: int = 0  # changelog rows (a batch counts its rows)


def already_absorbed(item: BatchItem, committed: Mapping[str, int]) -> bool:
    """True when ``item``'s ``metadata`` names a Kafka record (``topic``, ``partition``,
    ``offset``) below the ``committed`` next offset of its partition."""
    meta = item.metadata
    if "topic" not in meta or "partition" not in meta or "offset" not in meta:
        return False
    next_offset = committed.get(topic_partition(str(meta["topic"]), int(meta["partition"])))
    return next_offset is not None and int(meta["offset"]) < next_offset


class LakeTableSink:
    """Base of the lake sinks: buffering, one exactly-once commit per table, the checkpoint.

    Subclasses set :attr:`CHECKPOINT_KEY` and implement the table format's part: ``_open_catalog``,
    ``table_name``, ``load_table``, ``ensure_table``, ``_read_committed_offsets``,
    ``_commit_batch``, ``last_commit_ms``, ``read_table``, ``read_pipeline_property``,
    ``read_pipeline_properties`` and ``write_pipeline_property``. ``options`` needs ``commit_max_rows`` (rows) and
    ``commit_interval_s`` (seconds).

    Lifecycle: construct (options only, no I/O) -> :meth:`open` -> :meth:`add` ... :meth:`flush`
    (or :meth:`write`) -> :meth:`close` (idempotent; buffered rows are dropped, not written).
    """

    #: Pipeline property holding a Kafka -> lake pipeline's checkpoint; ``{pipeline}`` is its name.
    CHECKPOINT_KEY = "pipeline.{pipeline}.kafka-offsets"
    #: Several writers may commit one table (the commit checks the table's offsets inside the
    #: commit); a table format that can says so.
    multi_writer = False

    def __init__(self, options: Any) -> None:
        self.options = options
        #: writes redone because another writer committed the table first (commit conflicts)
        self.commit_redos = 0
        self._catalog: Any = None
        self._buffers: dict[TableId, _Buffer] = {}
        self._dropped: dict[str, bool] = {}  # lake table -> its source was dropped (see lake/ddl.py)
        self._sources: dict[str, TableId] = {}  # lake table -> the (routed) source table writing it
        self._generations: dict[str, int] = {}  # lake table -> its drop generation as last read (lake/ddl.py)
        #: what schema changes do to the lake (set by the lake sink factory from the pipeline)
        self.schema_change_policy = SchemaChangePolicy()
        self._early: list[WriteResult] = []  # tables flushed by add() (schema change), reported by flush()
        self._writing: tuple[Sequence[BatchItem | ChangeBatch], int] = ((), 1)  # see creation_hint

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self) -> None:
        """Load the catalog (idempotent). Raises the table format's sink error."""
        if self._catalog is None:
            self._catalog = self._open_catalog()

    def close(self) -> None:
        """Forget the catalog (idempotent). Buffered rows are dropped, not written."""
        self._buffers.clear()
        self._early = []
        self._catalog = None

    def __enter__(self) -> Any:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def catalog(self) -> Any:
        """The open catalog. Raises the table format's sink error before :meth:`open`."""
        if self._catalog is None:
            raise self._not_open()
        return self._catalog

    @property
    def creation_hint(self) -> tuple[int, int]:
        """``(rows, topic partitions)`` of the write in progress (``(0, 1)`` outside one): what a
        table that write creates is sized from (Iceberg's key buckets, Paimon's ``bucket``)."""
        rows, partitions = self._writing
        return sum(r.num_rows if isinstance(r, ChangeBatch) else 1 for r in rows), partitions

    # -- the table format's part ---------------------------------------------------------------
    def _open_catalog(self) -> Any:
        raise NotImplementedError

    def _not_open(self) -> Exception:
        return RuntimeError(f"{type(self).__name__} is not open; call open() first")

    def table_name(self, table_id: TableId) -> str:
        """The lake identifier of a source table as text (e.g. ``db.table``)."""
        raise NotImplementedError

    def load_table(self, table_id: TableId) -> Any | None:
        """The lake table of ``table_id``, fresh from the catalog, or None if it does not exist."""
        raise NotImplementedError

    def primary_key(self, table_id: TableId) -> list[str]:
        """The primary-key columns the lake table of ``table_id`` declares ([] when it declares
        none). Raises the table format's sink error when the table does not exist."""
        raise NotImplementedError

    def ensure_table(self, table_id: TableId, schema: Schema) -> Any:
        """Create the lake table of ``table_id`` or evolve it to accept rows of ``schema``."""
        raise NotImplementedError

    def column_changes(self, table_id: TableId, schema: Schema) -> list[Any]:
        """How the lake table's columns differ from ``schema``, as
        :class:`~changelake.connectors.lake.schema_change.ColumnChange` items ([] for no table)."""
        raise NotImplementedError

    def drop_columns(self, table_id: TableId, columns: Sequence[str]) -> None:
        """Drop ``columns`` from the lake table's current schema (``evolve``'s ``drop.column``)."""
        raise NotImplementedError

    def recorded_source(self, table_id: TableId) -> str | None:
        """The (routed) source table, ``db.table``, the lake table of ``table_id`` was created for
        (kept in the lake, so that a later run or another worker writing a different source table
        into it is refused); None when the table does not exist or the lake records none."""
        return None

    def past_column_sets(self, table_id: TableId) -> list[frozenset[str]]:
        """The column names of each earlier schema of the lake table (its schema history, the
        current schema left out; the sink's own hidden columns left out); [] when unknown."""
        return []

    def recreate_schema(self, table_id: TableId, schema: Schema) -> list[str]:
        """Give the (emptied) lake table of a dropped and re-created source table the definition
        ``schema``: columns gone or retyped are dropped (old snapshots keep them), new ones added.
        Returns the changes made."""
        raise NotImplementedError

    def _read_committed_offsets(self, table: Any) -> dict[str, int]:
        raise NotImplementedError

    def _commit_batch(
        self, table: Any, name: str, batch: CompactedBatch, items: Sequence[BatchItem], schema: Schema,
        offsets: dict[str, int],
    ) -> tuple[int | None, int, int, int]:
        """Commit ``batch`` (``items``: the rows it was reduced from) with ``offsets`` as one
        snapshot; returns (snapshot id, rows upserted, keys deleted, unchanged rows rewritten)."""
        raise NotImplementedError

    def read_table(self, table_id: TableId, columns: Sequence[str] | None = None) -> Any:
        """Every current row of the lake table of ``table_id`` as a ``pyarrow.Table`` (a full scan;
        ``columns`` in that order, None: all). Raises the table format's sink error when the table
        or a column does not exist."""
        raise NotImplementedError

    def last_commit_ms(self, table_id: TableId) -> int | None:
        """Commit time (ms since the epoch) of the lake table's latest snapshot; None if never written."""
        raise NotImplementedError

    def read_pipeline_property(self, key: str) -> str | None:
        """A pipeline property (e.g. a checkpoint) of this lake, None when absent."""
        raise NotImplementedError

    def write_pipeline_property(self, key: str, value: str) -> None:
        """Store a pipeline property of this lake."""
        raise NotImplementedError

    # -- tables --------------------------------------------------------------------------------
    def committed_offsets(self, table_id: TableId) -> dict[str, int]:
        """Next Kafka offset per ``"topic/partition"`` the lake table holds; ``{}`` for a new table
        (the drop-copy counts stored beside them, :func:`~changelake.connectors.lake.ddl.drop_copies`,
        left out)."""
        table = self.load_table(table_id)
        return kafka_offsets(self._read_committed_offsets(table)) if table is not None else {}

    # -- writing -------------------------------------------------------------------------------
    def write(self, table_id: TableId, rows: Sequence[BatchItem | ChangeBatch], schema: Schema,
              offsets: Mapping[str, int]) -> WriteResult:
        """Apply a changelog batch to the lake table in ONE commit.

        Args:
            table_id: the source table.
            rows: changelog rows in order, oldest first, and
                :class:`~changelake.connectors.lake.compaction.TruncateMarker` items (delete every
                row written before them), or :class:`~changelake.changelog.change_batch.ChangeBatch`
                items (the columnar lane: when they are all there is and the schema change policy
                is the default, the batch is reduced and committed in Arrow; mixed with rows or
                markers they are turned into rows first, so the order is kept). ``-U`` rows retract their key; the batch is reduced to
                the last change per key. A row or marker whose ``metadata`` has ``topic``,
                ``partition`` and ``offset`` below the committed offset of that partition is
                dropped (partial replay).
            schema: the rows' schema (with the primary key); the table is created/evolved first.
            offsets: ``"topic/partition"`` -> next offset after this batch. When every partition
                is already absorbed the write is skipped (replay after a crash). An empty batch
                with new offsets still commits (an empty snapshot) to record them.

        Raises:
            NullPrimaryKeyError: a row's key column is NULL (names table and column).
            SchemaChangeError: ``pipeline.schema.change.behavior: exception`` met a schema change;
                raised after committing the items before it with the offsets up to it (per
                partition, the refused record's offset), so the lake table holds every change
                before it and a restart stops at the same change without a new commit.
            the table format's type, schema-evolution and commit errors (names the table).
        """
        outer, self._writing = self._writing, (rows, len(offsets) or 1)
        try:
            return self._write(table_id, rows, schema, offsets)
        finally:
            # the batch is not kept past its write; a write nested in another (Paimon's pipeline
            # properties are a table) gives the outer one its hint back
            self._writing = outer

    def _write(self, table_id: TableId, rows: Sequence[BatchItem | ChangeBatch], schema: Schema,
               offsets: Mapping[str, int]) -> WriteResult:
        """:meth:`write`'s work."""
        name = self.table_name(table_id)
        if name not in self._sources:  # the source table an earlier run or another worker recorded
            recorded = self.recorded_source(table_id)
            if recorded is not None and recorded != str(table_id):
                self._sources[name] = TableId.parse(recorded)
        owner = self._sources.setdefault(name, table_id)
        if owner != table_id:  # two source tables never share a lake table unless a route says so
            raise PipelineDataError(
                f"source tables {owner} and {table_id} both map to lake table {name!r}: their rows would overwrite "
                "each other's keys. Give them distinct lake tables (e.g. the 'namespace' option per database), or "
                "merge them on purpose with a 'route' (source-table: <both>, sink-table: <one>)",
                table=name,
            )
        policy = self.schema_change_policy
        if any(isinstance(r, ChangeBatch) for r in rows):
            if policy.is_default and all(isinstance(r, ChangeBatch) for r in rows):
                return self._write_batches(table_id, name, [r for r in rows if isinstance(r, ChangeBatch)], schema,
                                           offsets)
            rows = as_items(rows)  # mixed with rows or markers, or a schema change policy: row by row
        rows = cast("Sequence[BatchItem]", rows)
        if not policy.is_default:  # pipeline.schema.change.behavior / include / exclude.schema.changes
            if policy.applies("drop.table"):
                # rows of a dropped generation never reach the policy (it would evolve or refuse
                # the lake table's columns for them); the markers are left for it to filter
                rows = self._without_dropped_generations(table_id, rows)
            rows, schema, refusal = apply_schema_change_policy(
                self, policy, table_id, name, rows, schema,
                recreating=policy.applies("drop.table") and self._recreates(name, rows))
            if refusal is not None:  # exception: commit every change before the refused one, then stop
                before = offsets_before(refusal, rows, offsets)
                if rows:
                    self._write_items(table_id, name, rows, schema, before)
                else:
                    self._record_offsets(table_id, name, before)
                raise refusal.error
        return self._write_items(table_id, name, rows, schema, offsets)

    def _without_dropped_generations(self, table_id: TableId, rows: Sequence[BatchItem]) -> Sequence[BatchItem]:
        """``rows`` without the rows of a generation a DROP TABLE already replaced (lake/ddl.py
        :func:`by_drop_generation`), every marker kept."""
        table = self.load_table(table_id)
        committed = self._read_committed_offsets(table) if table is not None else {}
        copies = drop_copies(committed)
        if not copies:
            return rows
        fresh = [r for r in rows if not already_absorbed(r, committed)]
        kept = {id(r) for r in by_drop_generation(fresh, copies, late_copies_as_truncates=False).items}
        return [r for r in rows if id(r) in kept or already_absorbed(r, committed)]

    def _record_offsets(self, table_id: TableId, name: str, offsets: Mapping[str, int]) -> None:
        """Commit ``offsets`` to the lake table in an empty snapshot (its schema unchanged), unless
        it holds them already or does not exist."""
        table = self.load_table(table_id)
        if table is None or not offsets:
            return
        committed = self._read_committed_offsets(table)
        if is_replay(committed, offsets):
            return
        self._commit_batch(table, name, CompactedBatch(), [], self._table_schema(table_id),
                           merge_offsets(committed, offsets))

    def _table_schema(self, table_id: TableId) -> Schema:
        found = lake_schema(self, table_id)
        assert found is not None
        return found

    def _write_items(self, table_id: TableId, name: str, rows: Sequence[BatchItem], schema: Schema,
                     offsets: Mapping[str, int]) -> WriteResult:
        # Rows of a generation a DROP TABLE already replaced (a hash-by-key partition a whole drop
        # behind another, read in a later commit; lake/ddl.py by_drop_generation) and rows a later
        # DROP TABLE of the batch deletes (every row before an unscoped drop, the rows of its
        # partition before a drop copy) are of a dropped definition: they take no part in
        # deciding the lake table's schema, nor in the commit.
        received = rows
        existing = self.load_table(table_id)
        before = self._read_committed_offsets(existing) if existing is not None else {}
        generations = by_drop_generation([r for r in rows if not already_absorbed(r, before)], drop_copies(before))
        self._note_generation(name, generations.before, generations.newest)
        if generations.newest:
            rows = generations.items
            offsets = merge_offsets(offsets, generations.through)
        live = without_dropped_rows(rows)
        # (an empty batch of a table with drops: its rows were of a dropped generation)
        markers_only = (bool(received) or generations.newest > 0) and not any(isinstance(r, ChangelogRow) for r in live)
        if not markers_only:  # rows that outlive the batch: the lake table must take their schema
            # rows after a drop of this very batch (the drop carries the re-created table's schema
            # when Pipeline 1 read it after the re-CREATE) are the re-created table's too
            self._recreate_if_dropped(table_id, name, schema, rows_after_a_drop(live))
        # a batch of truncates / drops only writes no row of its schema: the table stays as it is
        # (a drop copy read after the re-CREATE's first rows must not evolve the table back, nor
        # rows of a definition dropped within the batch evolve it to that definition)
        table = (existing if markers_only else None) or self.ensure_table(table_id, schema)
        committed = self._read_committed_offsets(table)
        if is_replay(committed, offsets):
            return WriteResult(name, skipped=True, rows_in=_count_rows(received), offsets=kafka_offsets(committed),
                               sink_table=str(table_id))
        items = [r for r in rows if not already_absorbed(r, committed)]
        # before a scoped truncate expands into its partition's deletes; rows of a dropped generation count
        applied = _count_changes(items) + generations.stale
        drop_state = dropped_after(items)  # True: ends dropped, False: rows after the last drop, None: no drop
        received_items = len(items)
        items = without_dropped_rows(items)
        pruned = received_items - len(items) + generations.stale  # still counted as received
        if has_scoped_truncate(items):  # a truncate copy of one partition of a hash-by-key topic
            items = expand_scoped_truncates(items, schema, table_id, name,
                                            lambda cols: list(self.read_table(table_id, cols).to_pylist()))
        batch = compact(items, tuple(schema.primary_key), table=name)
        if batch.is_empty and not offsets:
            return WriteResult(name, skipped=False, rows_in=batch.input_rows + pruned, offsets=kafka_offsets(committed),
                               sink_table=str(table_id), rows_applied=applied)
        # the drop copies each partition passed go into the same snapshot as its offsets
        new_offsets = merge_offsets(merge_offsets(committed, offsets), generations.offsets)
        if drop_state:  # written before the commit: a crash in between replays the drop, flag set
            self.write_pipeline_property(dropped_key(name), "dropped")
            self._dropped[name] = True
        snapshot_id, upserted, deleted, rewritten = self._commit_batch(table, name, batch, items, schema, new_offsets)
        return WriteResult(
            name,
            skipped=False,
            rows_in=batch.input_rows + pruned,
            rows_upserted=upserted,
            keys_deleted=deleted,
            truncated=batch.truncate,
            snapshot_id=snapshot_id,
            offsets=kafka_offsets(new_offsets),
            rows_rewritten=rewritten,
            sink_table=str(table_id),
            rows_applied=applied,
        )

    def _note_generation(self, name: str, committed: int, newest: int) -> None:
        """Remember the lake table's drop generation; when another writer moved it since this sink
        last read it (a worker of another partition applied a DROP), forget whether the table is
        flagged dropped, so the flag is read fresh (lake/ddl.py)."""
        if self._generations.get(name, committed) != committed:
            self._dropped.pop(name, None)
        self._generations[name] = newest

    def _recreates(self, name: str, rows: Sequence[BatchItem]) -> bool:
        """True when this batch's rows re-create the lake table of a dropped source table (a drop
        earlier in the batch, or the table flagged dropped): :meth:`_recreate_if_dropped` then
        gives it their definition, so no column change of theirs is the schema change policy's."""
        if rows_after_a_drop(without_dropped_rows(rows)):
            return True
        if self._dropped.get(name) is False:
            return False
        # read as _recreate_if_dropped reads it (it reads again only while the flag is set)
        dropped = self._dropped[name] = bool(self.read_pipeline_property(dropped_key(name)))
        return dropped

    def _recreate_if_dropped(self, table_id: TableId, name: str, schema: Schema, dropped_here: bool = False) -> None:
        """Give the lake table of a dropped source table (the pipeline property, or
        ``dropped_here``: a drop earlier in this batch) the definition ``schema`` of rows that
        outlive this batch (no later drop of the batch deletes them), and clear the dropped flag.
        A drop later in the batch (a copy of another partition) sets the flag again."""
        if dropped_here or self._dropped.get(name) is not False:
            # the source table was dropped (a pipeline property, read fresh while it is set):
            # a re-CREATE starts from its new definition
            dropped = self._dropped[name] = dropped_here or bool(self.read_pipeline_property(dropped_key(name)))
            if dropped:  # rows of the re-created table
                self.recreate_schema(table_id, schema)
                self.write_pipeline_property(dropped_key(name), "")  # once: later changes evolve
                self._dropped[name] = False

    def _write_batches(self, table_id: TableId, name: str, batches: list[ChangeBatch], schema: Schema,
                       offsets: Mapping[str, int]) -> WriteResult:
        """:meth:`write` of change batches only (the columnar lane): the same steps, in Arrow."""
        existing = self.load_table(table_id)
        copies = drop_copies(self._read_committed_offsets(existing)) if existing is not None else {}
        newest = max(copies.values(), default=0)
        if any(copies.get(topic_partition(b.topic, b.partition), 0) < newest for b in batches):
            # rows of a partition a whole DROP TABLE behind another: row by row (by_drop_generation)
            return self._write_items(table_id, name, as_items(batches), schema, offsets)
        self._recreate_if_dropped(table_id, name, schema)
        table = self.ensure_table(table_id, schema)
        committed = self._read_committed_offsets(table)
        rows_in = sum(b.num_rows for b in batches)
        if is_replay(committed, offsets):
            return WriteResult(name, skipped=True, rows_in=rows_in, offsets=kafka_offsets(committed),
                               sink_table=str(table_id))
        fresh = [b for b in (_unabsorbed(b, committed) for b in batches) if b.num_rows]
        applied = sum(int(pc.sum(pc.not_equal(b.kinds, "-U")).as_py() or 0) for b in fresh)
        batch = (compact_batches(fresh, tuple(schema.primary_key), table=name) if fresh else None)
        if (batch is None or batch.is_empty) and not offsets:
            return WriteResult(name, skipped=False, rows_in=batch.input_rows if batch else 0,
                               offsets=kafka_offsets(committed), sink_table=str(table_id), rows_applied=applied)
        new_offsets = merge_offsets(committed, offsets)
        if batch is None:
            snapshot_id, upserted, deleted, rewritten = self._commit_batch(table, name, CompactedBatch(), [], schema,
                                                                           new_offsets)
        else:
            snapshot_id, upserted, deleted, rewritten = self._commit_arrow(table, name, batch, schema, new_offsets)
        return WriteResult(
            name, skipped=False, rows_in=batch.input_rows if batch else 0, rows_upserted=upserted,
            keys_deleted=deleted, truncated=False, snapshot_id=snapshot_id, offsets=kafka_offsets(new_offsets),
            rows_rewritten=rewritten, sink_table=str(table_id), rows_applied=applied,
        )

    def _commit_arrow(self, table: Any, name: str, batch: ArrowCompacted, schema: Schema,
                      offsets: dict[str, int]) -> tuple[int | None, int, int, int]:
        """Commit an Arrow-compacted batch as one snapshot; returns as :meth:`_commit_batch`. This
        default turns it into the :class:`CompactedBatch` :func:`compact` would give and commits
        that; a table format that writes Arrow directly overrides it."""
        compacted, last = batch.to_compacted(schema)
        return self._commit_batch(table, name, compacted, last, schema, offsets)

    def truncate(self, table_id: TableId, schema: Schema, offsets: Mapping[str, int]) -> WriteResult:
        """Delete every row of the lake table in one commit (MySQL ``TRUNCATE TABLE``).

        Same as ``write(table_id, [TRUNCATE], schema, offsets)``; skipped as a replay likewise.
        """
        return self.write(table_id, [TRUNCATE], schema, offsets)

    # -- buffering -----------------------------------------------------------------------------
    def add(self, table_id: TableId, rows: Iterable[BatchItem | ChangeBatch], schema: Schema,
            offsets: Mapping[str, int]) -> None:
        """Buffer rows of one table for the next :meth:`flush` (no I/O); a
        :class:`~changelake.changelog.change_batch.ChangeBatch` stands for its rows, in order.

        ``offsets`` are merged (max per partition) into the table's pending offsets. A schema
        different from the buffered one flushes that table first, so each commit has one schema.
        """
        buffer = self._buffers.get(table_id)
        if buffer is not None and buffer.schema != schema:
            self._early.append(self._flush_table(table_id))
            buffer = None
        if buffer is None:
            buffer = self._buffers[table_id] = _Buffer(schema)
        for item in rows:
            buffer.rows.append(item)
            buffer.count += item.num_rows if isinstance(item, ChangeBatch) else 1
        buffer.offsets = merge_offsets(buffer.offsets, offsets)

    @property
    def buffered_rows(self) -> int:
        """Changelog rows waiting in the buffer, over all tables."""
        return sum(b.count for b in self._buffers.values())

    def should_flush(self) -> bool:
        """True once :attr:`buffered_rows` reaches ``commit.max-rows``."""
        return self.buffered_rows >= int(self.options.commit_max_rows)

    def flush(self) -> list[WriteResult]:
        """Write every buffered table (one commit each); the buffer is cleared even on error.
        Returns their results, after those of tables :meth:`add` flushed early since the last flush."""
        results, self._early = self._early, []
        try:
            for table_id in list(self._buffers):
                results.append(self._flush_table(table_id))
        finally:
            self._buffers.clear()
        return results

    def _flush_table(self, table_id: TableId) -> WriteResult:
        buffer = self._buffers.pop(table_id)
        return self.write(table_id, buffer.rows, buffer.schema, buffer.offsets)

    # -- pipeline checkpoint ---------------------------------------------------------------------
    def read_pipeline_properties(self, prefix: str) -> dict[str, str]:
        """Every pipeline property whose key starts with ``prefix`` (key -> value)."""
        raise NotImplementedError

    def write_pipeline_properties(self, values: Mapping[str, str]) -> None:
        """Store several pipeline properties at once; each key is set on its own (no read of the
        others), so writers of different keys never undo each other."""
        for key, value in values.items():
            self.write_pipeline_property(key, value)

    def _entry_prefix(self, pipeline: str) -> str:
        return self.CHECKPOINT_KEY.format(pipeline=pipeline) + "@"

    def read_checkpoint(self, pipeline: str) -> dict[str, int]:
        """Offsets every lake table of ``pipeline`` had absorbed at its last completed batch;
        ``{}`` on the first run.

        The larger, per partition, of the pipeline property :attr:`CHECKPOINT_KEY` (one JSON map,
        written by a single-process run) and the per-partition entries
        ``<CHECKPOINT_KEY>@<topic>/<partition>`` (written by parallel workers,
        :meth:`write_checkpoint_entries`). Each only ever names offsets every table has absorbed,
        so their maximum does too. Both come from one read of the properties whose key starts
        with :attr:`CHECKPOINT_KEY` (a Paimon lake scans its checkpoint table once, not twice).
        """
        checkpoint_key = self.CHECKPOINT_KEY.format(pipeline=pipeline)
        found = self.read_pipeline_properties(checkpoint_key)
        text = found.get(checkpoint_key)
        offsets = decode_offsets(text) if text else {}
        prefix = self._entry_prefix(pipeline)
        for key, value in found.items():
            if not key.startswith(prefix):
                continue  # the map itself, or another pipeline's key that starts with this one's
            tp = key[len(prefix):].rpartition("@")[0]  # Kafka topic names have no '@'
            if tp:
                offsets[tp] = max(int(value), offsets.get(tp, 0))
        return dict(sorted(offsets.items()))

    def write_checkpoint(self, pipeline: str, offsets: Mapping[str, int]) -> None:
        """Store ``offsets`` as the checkpoint of ``pipeline``.

        Written after all of a batch's table commits succeeded; a restart seeks there and each
        table skips what its own snapshots say it already holds.
        """
        self.write_pipeline_property(self.CHECKPOINT_KEY.format(pipeline=pipeline), encode_offsets(offsets))

    def write_checkpoint_entries(self, pipeline: str, offsets: Mapping[str, int], writer: str = "worker") -> None:
        """Store one checkpoint entry per partition of ``offsets`` for ``writer`` (a parallel
        worker's stable id, after its tables committed): ``<CHECKPOINT_KEY>@<topic>/<partition>@<writer>``.

        No read-modify-write and no lock: a writer sets only its own keys, so no worker undoes
        another's advance, and a worker that lost a partition (a zombie) leaves the new owner's
        entry alone. It writes only offsets its tables absorbed, so an entry never leads.
        """
        prefix = self._entry_prefix(pipeline)
        self.write_pipeline_properties({f"{prefix}{tp}@{writer}": str(int(v)) for tp, v in sorted(offsets.items())})


def _count_changes(items: Sequence[BatchItem]) -> int:
    """Change events in ``items``: every row but ``-U`` (its ``+U`` counts the update), and markers."""
    return sum(1 for r in items if not isinstance(r, ChangelogRow) or r.kind is not RowKind.UPDATE_BEFORE)


def _count_rows(rows: Sequence[BatchItem]) -> int:
    return sum(1 for r in rows if isinstance(r, ChangelogRow))


def as_items(rows: Sequence[BatchItem | ChangeBatch]) -> list[BatchItem]:
    """``rows`` with each change batch turned into its changelog rows (the per-record path's
    values, each with its ``topic``, ``partition`` and ``offset``)."""
    out: list[BatchItem] = []
    for item in rows:
        if not isinstance(item, ChangeBatch):
            out.append(item)
            continue
        values = python_rows(item.rows, item.schema)
        kinds = item.kinds.to_pylist()
        for row, kind, offset in zip(values, kinds, item.offsets.to_pylist()):
            out.append(ChangelogRow(RowKind.from_short_string(kind), row, item.table,
                                    {"topic": item.topic, "partition": item.partition, "offset": offset}))
    return out


def _unabsorbed(batch: ChangeBatch, committed: Mapping[str, int]) -> ChangeBatch:
    """``batch`` without the rows of records below the committed next offset of its partition."""
    next_offset = committed.get(topic_partition(batch.topic, batch.partition))
    if next_offset is None or int(pc.min(batch.offsets).as_py()) >= next_offset:
        return batch
    keep = pc.greater_equal(batch.offsets, next_offset)
    return replace(batch, rows=batch.rows.filter(keep), kinds=batch.kinds.filter(keep),
                   offsets=batch.offsets.filter(keep))
