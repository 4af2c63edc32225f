"""IcebergSink: writes changelog batches to Iceberg tables, exactly once per Kafka offset.

Each :meth:`IcebergSink.write` is one Iceberg commit (one ``table.transaction()``) that

1. deletes the lake rows of every key the batch changes (or every row, after a TRUNCATE),
2. appends the final image of every upserted key,
3. stores the next Kafka offset per topic-partition in each snapshot summary
   (``changelake.kafka-offsets``, see :mod:`changelake.connectors.iceberg.offsets`).

Why not ``Table.upsert`` or ``Transaction.delete(In(pk, keys))``: pyiceberg 0.12's upsert has no
delete path, rejects duplicate keys and builds one expression node per key (iceberg-python #2159,
#3129); its delete binds and projects every key through the partition transforms once per data
file (minutes for 10k keys on a bucketed table). The sink plans the copy-on-write itself: the
live data files whose partition (identity/bucket/truncate of the first key column) and key
bounds can hold a changed key are read, their rows with unchanged keys (exact for composite keys
too) are written again with the new images, and the files are replaced in one overwrite
snapshot.

pyiceberg writes copy-on-write only: a delete rewrites every data file holding a changed key, so
larger, less frequent commits are cheaper (``commit.max-rows``).

The commit itself is an :class:`OffsetsCheckedTransaction` (the multi-writer commit rule, below):
a retry after a lost race rebases only while the table's Kafka offsets are the planned ones.
"""

from __future__ import annotations

import random
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, NoSuchTableError, ValidationException
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files, pyarrow_to_schema, write_file
from pyiceberg.partitioning import PartitionFieldValue, PartitionKey
from pyiceberg.table import Table, Transaction, WriteTask
from pyiceberg.types import IntegerType, LongType, StringType

from changelake.changelog.schema import Schema, TableId
from changelake.connectors.iceberg.catalog import (
    PIPELINE_NAMESPACE,
    ensure_namespace,
    open_catalog,
    read_namespace_properties,
    read_namespace_property,
    validate_sql_catalog_uri,
    write_namespace_properties,
    write_namespace_property,
)
from changelake.connectors.iceberg.errors import IcebergCommitError, IcebergSinkError, IcebergTypeError
from changelake.connectors.iceberg.evolve import (
    apply_comments,
    apply_evolution,
    apply_recreate,
    classify_columns,
    delete_columns,
    iceberg_schema_of,
    plan_evolution,
)
from changelake.connectors.iceberg.key_bounds import key_ranges, possibly_present
from changelake.connectors.iceberg.offsets import COMMIT_ID_PROPERTY, OFFSETS_PROPERTY, encode_offsets, is_replay, read_committed_offsets
from changelake.connectors.iceberg.options import IcebergSinkOptions
from changelake.connectors.iceberg.partitioning import default_bucket_count, key_bucket_field, partition_spec_for, sort_order_for
from changelake.connectors.iceberg.types import to_arrow_array
from changelake.changelog.change_batch import ChangeBatch
from changelake.connectors.lake.compaction import ArrowCompacted, BatchItem, CompactedBatch
from changelake.connectors.lake.sink import LakeTableSink, WriteResult

# the catalog functions are re-exported for callers that still import them from here (their home: catalog.py)
__all__ = ["WriteResult", "IcebergSink", "MULTI_WRITER_RETRIES", "OffsetsMovedError", "OffsetsCheckedTransaction",
           "open_catalog", "validate_sql_catalog_uri", "PIPELINE_NAMESPACE",
           "read_namespace_property", "write_namespace_property"]

_T = TypeVar("_T")


# -- the multi-writer commit rule: one Iceberg commit whose retries re-check the table's Kafka offsets ---
# pyiceberg 0.12 retries a commit that lost a race (``CommitFailedException``: the catalog's
# ``AssertRefSnapshotId`` saw a newer snapshot) by rebasing the staged snapshot onto the winner's,
# up to the table property ``commit.retry.num-retries`` times. That is right when the winner did
# not absorb Kafka offsets (a compaction, an expiry: pyiceberg validates the data conflicts), and
# wrong when it did: this sink filtered its batch, and merged the offsets it stores in the snapshot
# summary, against the offsets the table held when the commit was planned. Rebased, a worker that
# lost its partitions (a zombie resumed after ``SIGSTOP``) would land older rows over newer ones, and
# its summary would drop the winner's advance.
#
# So, as the Apache Iceberg Kafka Connect sink's ``SnapshotAncestryValidator`` checks that no other
# writer committed since the commit's base snapshot, :class:`OffsetsCheckedTransaction` checks inside
# every retry that the table's committed offsets are still the planned ones; if they moved, it
# stops with :class:`OffsetsMovedError` (nothing landed) and the sink redoes the write from the
# refreshed table, re-filtered against the winner's offsets
# (:meth:`IcebergSink.write`).

#: ``commit.retry.num-retries`` of the tables this sink creates, and its own redo budget: several
#: workers write one table (a topic with several partitions, a handover); with 4 writers pyiceberg's
#: default of 4 is not enough (measured: 1 run in 5 failed with 4, none with 20).
MULTI_WRITER_RETRIES = 20


class OffsetsMovedError(CommitFailedException):
    """Another writer absorbed Kafka offsets into the table after this commit was planned; the
    commit did not land (redo it from the refreshed table)."""


class OffsetsCheckedTransaction(Transaction):
    """A pyiceberg ``Transaction`` of ``table`` planned against ``planned`` offsets
    (``{"topic/partition": next offset}``, what the table held when the batch was filtered).

    A retry (the catalog refused the commit because the table moved) rebases only if the table's
    committed offsets are still ``planned``; otherwise it raises :class:`OffsetsMovedError`.
    """

    def __init__(self, table: Table, planned: Mapping[str, int]) -> None:
        self._metadata_cache: tuple[Any, Any, Any] | None = None
        super().__init__(table)
        self._planned = dict(planned)

    @property
    def table_metadata(self) -> Any:
        """The table's metadata with the staged updates applied, computed once per staged state.

        pyiceberg 0.12's ``Transaction.table_metadata`` replays every staged update and deep-copies
        the whole metadata (snapshot list included) on every read, and one commit reads it about
        60 times, so a commit's cost grew with the table's snapshot history (measured: a 20-row
        commit took 0.2 s on a table of 19 snapshots, 1.1 s at 199, 2.7 s at 599; iceberg-python
        #2673). As iceberg-python PR #3302 (approved upstream, closed unmerged) does, the result
        is kept while neither the table's metadata nor the staged updates (an immutable tuple,
        rebound by every stage) are replaced, and with nothing staged it is the table's own; the
        metadata is a frozen model that its readers do not change.
        """
        base, updates = self._table.metadata, self._updates
        if not updates:
            return base  # nothing staged: the table's own metadata (pyiceberg would return a deep copy of it)
        cached = self._metadata_cache
        if cached is not None and cached[0] is base and cached[1] is updates:
            return cached[2]
        metadata = super().table_metadata
        self._metadata_cache = (base, updates, metadata)
        return metadata

    def _rebuild_snapshot_updates(self) -> None:
        # Called by pyiceberg's retry loop after refreshing the table, before rebasing.
        current = read_committed_offsets(self._table)
        if current != self._planned:
            moved = sorted(k for k in set(current) | set(self._planned) if current.get(k) != self._planned.get(k))
            raise OffsetsMovedError(
                f"another writer committed offsets of {', '.join(moved)} since this commit was planned"
            )
        super()._rebuild_snapshot_updates()


class IcebergSink(LakeTableSink):
    """Changelog sink into Iceberg tables with offsets stored in snapshots (exactly-once).

    Buffering, replay skipping, compaction and the checkpoint are
    :class:`~changelake.connectors.lake.sink.LakeTableSink`'s; this class is the Iceberg part.

    Example::

        sink = IcebergSink(IcebergSinkOptions.sql("sqlite:////tmp/c.db", "file:///tmp/wh"))
        with sink:
            schema = Schema.of([("id", DataType.of("BIGINT", False)), ("name", DataType.of("STRING"))], ["id"])
            sink.write(TableId("shop", "customers"), [ChangelogRow.insert({"id": 1, "name": "A"})],
                       schema, {"shop.customers/0": 1})
            sink.committed_offsets(TableId("shop", "customers"))   # {"shop.customers/0": 1}

    Several writers may commit one table (parallel workers, on several machines with a shared
    catalog: PostgreSQL, REST; SQLite is for one machine): a commit that lost a race is retried by
    pyiceberg only while the table's offsets are the planned ones, otherwise redone by the sink
    against the winner's offsets (:class:`OffsetsCheckedTransaction`).
    """

    options: IcebergSinkOptions
    #: Commits check the table's offsets inside the commit (:class:`OffsetsCheckedTransaction`).
    multi_writer = True

    def __init__(self, options: IcebergSinkOptions) -> None:
        super().__init__(options)
        self._tables: dict[tuple[str, str], Table] = {}
        self._rows_rewritten = 0  # rows the last commit's copy-on-write delete wrote back
        #: tables refreshed in the write attempt in progress (None outside :meth:`write`)
        self._fresh: set[tuple[str, str]] | None = None

    def _open_catalog(self) -> Catalog:
        return open_catalog(self.options)

    def _not_open(self) -> Exception:
        return IcebergSinkError("IcebergSink is not open; call open() first")

    def close(self) -> None:
        """Forget the catalog and cached tables (idempotent). Buffered rows are dropped, not written."""
        self._tables.clear()
        super().close()

    def read_table(self, table_id: TableId, columns: Sequence[str] | None = None) -> pa.Table:
        """Every current row of the lake table (:func:`changelake.connectors.iceberg.reader.read_table`)."""
        from changelake.connectors.iceberg.reader import read_table

        return read_table(self.options, table_id, columns)

    # -- pipeline properties (checkpoints) -----------------------------------------------------
    def read_pipeline_property(self, key: str) -> str | None:
        """A pipeline property (e.g. a checkpoint) of this lake, None when absent.

        Kept as a property of the catalog namespace :data:`PIPELINE_NAMESPACE` (``changelake``).
        """
        return read_namespace_property(self.catalog, key)

    def write_pipeline_property(self, key: str, value: str) -> None:
        """Store a pipeline property (one namespace-properties update; creates the namespace)."""
        write_namespace_property(self.catalog, key, value)

    def read_pipeline_properties(self, prefix: str) -> dict[str, str]:
        """The pipeline properties whose key starts with ``prefix``."""
        return read_namespace_properties(self.catalog, prefix)

    def write_pipeline_properties(self, values: Mapping[str, str]) -> None:
        """Store several pipeline properties in one namespace-properties update (per key, no read)."""
        write_namespace_properties(self.catalog, values)

    # -- tables --------------------------------------------------------------------------------
    def identifier(self, table_id: TableId) -> tuple[str, str]:
        """The Iceberg ``(namespace, table)`` of a source table (``namespace`` option)."""
        return self.options.namespace.identifier(table_id)

    def table_name(self, table_id: TableId) -> str:
        """The Iceberg identifier as text, ``namespace.table``."""
        return ".".join(self.identifier(table_id))

    def load_table(self, table_id: TableId) -> Table | None:
        """The lake table of ``table_id``, refreshed from the catalog, or None if it does not exist.

        Inside one attempt of :meth:`write` the table is refreshed once: the write's later reads
        get the same table (its own commits update it in place), so a write reads the catalog
        and parses the table's metadata file once, not three times (a cost that grows with the
        snapshot history). A commit that another writer's commit made stale fails the
        catalog's check and is retried on a refreshed table, as before.
        """
        ident = self.identifier(table_id)
        table = self._tables.get(ident)
        fresh = self._fresh
        if table is not None:
            if fresh is not None and ident in fresh:
                return table
            table = table.refresh()
        else:
            catalog: Catalog = self.catalog
            try:
                table = catalog.load_table(ident)
            except NoSuchTableError:
                return None
            self._tables[ident] = table
        if fresh is not None:
            fresh.add(ident)
        return table

    def primary_key(self, table_id: TableId) -> list[str]:
        """The table's identifier fields, sorted (the sink declares the primary key as them).

        Raises:
            IcebergSinkError: the table does not exist.
        """
        table = self.load_table(table_id)
        if table is None:
            raise IcebergSinkError(f"Iceberg table {self.table_name(table_id)!r} (for {table_id}) does not exist",
                                   table=self.table_name(table_id))
        return sorted(table.schema().identifier_field_names())

    def ensure_table(self, table_id: TableId, schema: Schema) -> Table:
        """Create the lake table of ``table_id`` or evolve it to accept rows of ``schema``.

        A new table has ``schema``'s columns (primary key = identifier fields, required; other
        columns optional) and the ``table.properties.*`` options. An existing one is evolved as
        :mod:`changelake.connectors.iceberg.evolve` describes (never dropping data).

        Raises:
            IcebergSinkError: ``schema`` has no primary key.
            SchemaEvolutionError: a change that would lose data or change the key.
        """
        name = self.table_name(table_id)
        table = self.load_table(table_id)
        if table is None:
            namespace, _ = self.identifier(table_id)
            ensure_namespace(self.catalog, namespace)
            iceberg_schema = iceberg_schema_of(schema, table=name)
            rows, partitions = self.creation_hint  # set by write(): see _partition_spec
            table = self.catalog.create_table_if_not_exists(
                self.identifier(table_id),
                schema=iceberg_schema,
                partition_spec=self._partition_spec(table_id, iceberg_schema, schema, rows, partitions),
                sort_order=sort_order_for(iceberg_schema, tuple(schema.primary_key)),
                properties={"commit.retry.num-retries": str(MULTI_WRITER_RETRIES), **self.options.table_properties,
                            SOURCE_TABLE_PROPERTY: str(table_id)},
            )
            self._tables[self.identifier(table_id)] = table

        def evolve(table: Table) -> Table:
            apply_evolution(table, plan_evolution(table.schema(), schema, table=name))
            apply_comments(table, schema)  # column and table comment changes reach the lake
            return table

        return self._metadata_commit(table_id, evolve)

    def _commit_attempts(self) -> int:
        """Tries of a commit that loses races: 1 + ``commit.retry.num-retries`` (table property
        option, default :data:`MULTI_WRITER_RETRIES`)."""
        return int(self.options.table_properties.get("commit.retry.num-retries", MULTI_WRITER_RETRIES)) + 1

    def _metadata_commit(self, table_id: TableId, change: Callable[[Table], _T]) -> _T:
        """``change(table)`` on the refreshed lake table: it plans from the table it is given and
        commits table metadata (schema, properties). When another writer's commit to the table won
        the race (``CommitFailedException``: several Pipeline 2 workers evolving one table at the
        same schema change), the table is refreshed and ``change`` re-planned on it, up to
        ``commit.retry.num-retries`` (default 20) times; a change the winner already made plans
        as nothing. pyiceberg retries only snapshot commits (``retry_on_commit_failure``), not a
        schema update.

        Raises:
            IcebergSinkError: the table does not exist.
            CommitFailedException: the commit lost every retry.
        """
        attempts = self._commit_attempts()
        for attempt in range(attempts):
            table = self.load_table(table_id)
            if table is None:
                raise IcebergSinkError(f"Iceberg table {self.table_name(table_id)!r} (for {table_id}) does not exist",
                                       table=self.table_name(table_id))
            try:
                return change(table)
            except CommitFailedException:
                if attempt + 1 == attempts:
                    raise
                if self._fresh is not None:  # the next try plans on the winner's table
                    self._fresh.discard(self.identifier(table_id))
                time.sleep(random.uniform(0.02, 0.1) * (attempt + 1))  # jitter: writers do not retry in step
        raise AssertionError("unreachable")

    def _partition_spec(self, table_id: TableId, iceberg_schema: Any, schema: Schema, rows: int,
                        partitions: int) -> Any:
        """A new table's spec: its ``partition.key`` entry, else ``bucket[N](first key column)``
        (:func:`~changelake.connectors.iceberg.partitioning.default_bucket_count` of ``rows`` and
        ``partitions``) with ``bucket-by-key``, else unpartitioned."""
        name = self.table_name(table_id)
        fields = self.options.partition_keys.get(table_id)
        if fields is None and self.options.bucket_by_key:
            bucket = key_bucket_field(iceberg_schema, tuple(schema.primary_key), default_bucket_count(rows, partitions))
            fields = (bucket,) if bucket is not None else ()
        return partition_spec_for(iceberg_schema, fields or (), table=name)
    def column_changes(self, table_id: TableId, schema: Schema) -> list[Any]:
        """How the table's columns differ from ``schema`` (:func:`~changelake.connectors.iceberg.evolve.classify_columns`)."""
        table = self.load_table(table_id)
        return [] if table is None else classify_columns(table.schema(), schema)

    def recorded_source(self, table_id: TableId) -> str | None:
        """The table property ``changelake.source-table`` set when the sink created the table."""
        table = self.load_table(table_id)
        return None if table is None else table.properties.get(SOURCE_TABLE_PROPERTY)

    def past_column_sets(self, table_id: TableId) -> list[frozenset[str]]:
        """The column names of every earlier Iceberg schema of the table (``table.schemas()``)."""
        table = self.load_table(table_id)
        if table is None:
            return []
        current = table.schema().schema_id
        return [frozenset(f.name for f in s.fields) for sid, s in table.schemas().items() if sid != current]

    def drop_columns(self, table_id: TableId, columns: Sequence[str]) -> None:
        """Delete ``columns`` from the table (``evolve``'s ``drop.column``)."""
        if self.load_table(table_id) is not None:  # re-planned on a retry: the columns still there
            self._metadata_commit(table_id, lambda t: delete_columns(t, [c for c in columns if c in {f.name for f in t.schema().fields}]))

    def recreate_schema(self, table_id: TableId, schema: Schema) -> list[str]:
        """Give an emptied table whose source was dropped and created again the new definition
        (:func:`changelake.connectors.iceberg.evolve.apply_recreate`); returns the changes made."""
        if self.load_table(table_id) is None:
            return []
        return self._metadata_commit(table_id, lambda t: apply_recreate(t, schema, table_name=self.table_name(table_id)))

    def _read_committed_offsets(self, table: Table) -> dict[str, int]:
        # From the latest snapshot summary carrying ``changelake.kafka-offsets`` (walking the
        # snapshot ancestors, as Iceberg's Kafka Connect coordinator does).
        return read_committed_offsets(table)

    def last_commit_ms(self, table_id: TableId) -> int | None:
        """Commit time (ms since the epoch) of the lake table's current snapshot; None if never written."""
        table = self.load_table(table_id)
        snapshot = table.current_snapshot() if table is not None else None
        return int(snapshot.timestamp_ms) if snapshot is not None else None

    # -- writing -------------------------------------------------------------------------------
    def write(
        self,
        table_id: TableId,
        rows: Sequence[BatchItem | ChangeBatch],
        schema: Schema,
        offsets: Mapping[str, int],
    ) -> WriteResult:
        """Apply a changelog batch to the lake table in ONE Iceberg commit
        (:meth:`LakeTableSink.write <changelake.connectors.lake.sink.LakeTableSink.write>`).

        Raises:
            NullPrimaryKeyError: a row's key column is NULL (names table and column).
            IcebergTypeError: a value does not fit its column (names table and column).
            SchemaEvolutionError, IcebergSinkError: see :meth:`ensure_table`.
            IcebergCommitError: the commit failed; nothing was written. A commit that lost a race
                with another writer of the table (``CommitFailedException``, or pyiceberg's
                ``ValidationException`` when a rebased delete meets the winner's files; parallel
                workers, a handover) is redone from the refreshed table, re-filtered against the
                offsets the winner committed, up to ``commit.retry.num-retries`` (table property,
                default 20) times first: Iceberg's optimistic concurrency with the offsets checked
                inside the commit (:class:`OffsetsCheckedTransaction`).
        """
        attempts = self._commit_attempts()
        for attempt in range(attempts):
            self._fresh = set()  # each attempt refreshes the table once (load_table)
            try:
                return super().write(table_id, rows, schema, offsets)
            except IcebergCommitError as exc:
                if attempt + 1 == attempts or not isinstance(exc.__cause__, (CommitFailedException, ValidationException)):
                    raise
                self.commit_redos += 1
                time.sleep(random.uniform(0.02, 0.1) * (attempt + 1))  # jitter: writers do not retry in step
            finally:
                self._fresh = None
        raise AssertionError("unreachable")

    def _commit_batch(
        self, table: Table, name: str, batch: CompactedBatch, items: Sequence[BatchItem], schema: Schema,
        offsets: dict[str, int],
    ) -> tuple[int | None, int, int, int]:
        self._rows_rewritten = 0
        self._commit(table, name, batch, schema, offsets)
        snapshot = table.current_snapshot()
        return ((snapshot.snapshot_id if snapshot is not None else None), len(batch.upserts), len(batch.deletes),
                self._rows_rewritten)

    def _commit_arrow(self, table: Table, name: str, batch: ArrowCompacted, schema: Schema,
                      offsets: dict[str, int]) -> tuple[int | None, int, int, int]:
        """The columnar lane's commit: the compacted batch goes to the table as Arrow (cast to the
        table's columns), never through Python rows."""
        self._rows_rewritten = 0
        arrow_schema = table.schema().as_arrow()
        primary_key = list(schema.primary_key)
        upserts = _cast_to_lake(batch.upserts, arrow_schema, name)
        changed = pa.concat_tables([batch.upserts.select(primary_key), batch.deletes])
        keys = _cast_to_lake(changed, pa.schema([arrow_schema.field(k) for k in primary_key]), name)
        self._commit_tables(table, name, upserts, keys if keys.num_rows else None, False, batch.upserts.num_rows,
                            batch.deletes.num_rows, schema, offsets)
        snapshot = table.current_snapshot()
        return ((snapshot.snapshot_id if snapshot is not None else None), batch.upserts.num_rows,
                batch.deletes.num_rows, self._rows_rewritten)

    def _commit(
        self,
        table: Table,
        name: str,
        batch: CompactedBatch,
        schema: Schema,
        offsets: dict[str, int],
    ) -> None:
        arrow_schema = table.schema().as_arrow()
        upserts = _to_arrow(list(batch.upserts.values()), schema, arrow_schema, name)
        keys = None
        if not batch.truncate and batch.changed_keys:
            keys = _keys_to_arrow(batch.changed_keys, schema, arrow_schema, name)
        self._commit_tables(table, name, upserts, keys, batch.truncate, len(batch.upserts), len(batch.deletes), schema,
                            offsets)

    def _commit_tables(
        self,
        table: Table,
        name: str,
        upserts: pa.Table,
        keys: pa.Table | None,
        truncate: bool,
        upserted: int,
        deleted: int,
        schema: Schema,
        offsets: dict[str, int],
    ) -> None:
        """One commit: delete every row (``truncate``) or the rows of ``keys`` (copy-on-write of
        the files that can hold them), then append ``upserts`` (both in the table's columns)."""
        props = {OFFSETS_PROPERTY: encode_offsets(offsets), COMMIT_ID_PROPERTY: str(uuid.uuid4())}
        arrow_schema = table.schema().as_arrow()
        primary_key = list(schema.primary_key)
        # Sorted by key, so each file's key range stays narrow and the next commit's filter prunes files.
        upserts = _sorted(upserts, primary_key)
        plan = _Rewrite([])
        if not truncate and keys is not None:
            # Copy-on-write of only the files that hold a changed key (partition, key range, then
            # the rows), planned here: pyiceberg's delete(In(pk, keys)) re-projects every key
            # through the partition transforms once per data file (minutes for 10k keys on a
            # bucketed table).
            plan = _rewrite_plan(table, keys, primary_key)
        changed = upserted + deleted
        try:
            # planned against the offsets the batch was filtered with (read from this same metadata)
            with OffsetsCheckedTransaction(table, read_committed_offsets(table)) as tx:
                rewritten = 0
                if truncate:
                    with warnings.catch_warnings():
                        warnings.filterwarnings("ignore", message="Delete operation did not match any records")
                        tx.delete(AlwaysTrue(), snapshot_properties=props)
                elif plan.files:
                    # As pyiceberg's delete: one overwrite snapshot replaces the files with their
                    # kept rows (per partition, sorted by key); the new images follow in an
                    # append snapshot.
                    with tx.update_snapshot(snapshot_properties=props).overwrite() as overwrite:
                        for task in plan.files:
                            overwrite.delete_data_file(task.file)
                        data_files, rewritten = _rewritten_files(tx.table_metadata, table.io, plan, arrow_schema,
                                                                 primary_key)
                        for data_file in data_files:
                            overwrite.append_data_file(data_file)
                self._rows_rewritten = rewritten
                tx.append(upserts, snapshot_properties={**props, **write_amplification(rewritten, upserted, changed)})
        except (CommitFailedException, CommitStateUnknownException, ValidationException) as exc:
            table.refresh()
            stored = read_committed_offsets(table)
            if offsets and is_replay(stored, offsets):
                return  # the commit landed although its response was lost
            raise IcebergCommitError(
                f"commit to Iceberg table {name!r} failed: {type(exc).__name__}: {exc}", table=name
            ) from exc


#: Snapshot-summary keys of a commit's write amplification (see :func:`write_amplification`).
#: table property: the (routed) source table ``db.table`` the sink created the table for
SOURCE_TABLE_PROPERTY = "changelake.source-table"
ROWS_CHANGED_PROPERTY = "changelake.rows-changed"
ROWS_REWRITTEN_PROPERTY = "changelake.rows-rewritten"
WRITE_AMPLIFICATION_PROPERTY = "changelake.write-amplification"


def write_amplification(rewritten: int, upserted: int, changed: int) -> dict[str, str]:
    """The snapshot-summary properties of one commit's cost: ``changelake.rows-changed`` (keys
    upserted or deleted), ``changelake.rows-rewritten`` (unchanged rows the copy-on-write delete
    wrote back) and ``changelake.write-amplification`` (rows written per changed row:
    ``(rewritten + upserted) / changed``, 3 decimals; 0 for a commit that changes nothing)."""
    ratio = (rewritten + upserted) / changed if changed else 0.0
    return {ROWS_CHANGED_PROPERTY: str(changed), ROWS_REWRITTEN_PROPERTY: str(rewritten),
            WRITE_AMPLIFICATION_PROPERTY: f"{ratio:.3f}"}


def _rows_written_back(metadata: Any, before: int | None) -> int:
    """``added-records`` of the snapshot a copy-on-write delete staged (after ``before``): the
    unchanged rows of the files it rewrote; 0 when it staged none (nothing matched)."""
    snapshot = metadata.current_snapshot()
    if snapshot is None or snapshot.snapshot_id == before or snapshot.summary is None:
        return 0
    return int(snapshot.summary.additional_properties.get("added-records", 0) or 0)


def _sorted(rows: pa.Table, primary_key: Sequence[str]) -> pa.Table:
    """``rows`` sorted by the key columns, ascending."""
    if rows.num_rows < 2 or not primary_key:
        return rows
    if len(primary_key) == 1 and not rows.column(primary_key[0]).null_count:
        key = rows.column(primary_key[0])
        try:
            ordered = pc.all(pc.greater_equal(key.slice(1), key.slice(0, len(key) - 1))).as_py()
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            ordered = False  # a key type without an ordering kernel: sort_by decides
        if ordered:
            return rows  # in order already (an insert-only stream of growing keys): a stable sort keeps it
    return rows.sort_by([(k, "ascending") for k in primary_key])


def _to_arrow(rows: list[Mapping[str, Any]], schema: Schema, arrow_schema: pa.Schema, table: str) -> pa.Table:
    """Rows as an Arrow table with the lake's schema (columns missing from ``schema`` are NULL)."""
    arrays = []
    for lake_field in arrow_schema:
        name = lake_field.name
        data_type = schema.column(name).type if name in schema else None
        values = [r.get(name) for r in rows] if data_type is not None else [None] * len(rows)
        arrays.append(to_arrow_array(values, data_type, lake_field.type, table=table, column=name))
    return pa.Table.from_arrays(arrays, schema=arrow_schema)


def _cast_to_lake(rows: pa.Table, arrow_schema: pa.Schema, table: str) -> pa.Table:
    """A change batch's columns as the lake's Arrow schema (a lake column the batch lacks is
    NULL). Raises IcebergTypeError naming the column a value does not fit (as :func:`_to_arrow`)."""
    arrays = []
    for lake_field in arrow_schema:
        name = lake_field.name
        if name not in rows.column_names:
            arrays.append(pa.nulls(rows.num_rows, lake_field.type))
            continue
        column = rows.column(name)
        try:
            arrays.append(column if column.type == lake_field.type else column.cast(lake_field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise IcebergTypeError(f"cannot store column {name!r} of table {table!r} as {lake_field.type}: {exc}",
                                table=table, column=name) from exc
    return pa.Table.from_arrays(arrays, schema=arrow_schema)


def _keys_to_arrow(
    keys: list[tuple[Any, ...]], schema: Schema, arrow_schema: pa.Schema, table: str
) -> pa.Table:
    """Key tuples as an Arrow table of the key columns, typed as the lake stores them."""
    arrays = []
    names = list(schema.primary_key)
    for i, name in enumerate(names):
        arrays.append(
            to_arrow_array(
                [k[i] for k in keys], schema.column(name).type, arrow_schema.field(name).type, table=table, column=name
            )
        )
    return pa.Table.from_arrays(arrays, names=names)


@dataclass(frozen=True)
class _Rewrite:
    """A copy-on-write plan: the data files to replace, the changed ``keys`` (key columns) whose
    rows they lose, and ``read`` (one file's rows, see :func:`_file_reader`)."""

    files: list[Any]
    keys: pa.Table | None = None
    read: Callable[[Any], pa.Table] | None = None


def _rewrite_plan(table: Table, keys: pa.Table, primary_key: list[str]) -> _Rewrite:
    """The data files a copy-on-write of changed ``keys`` must rewrite (none are read here).

    A live data file is kept out when its partition cannot hold a key (partition fields that
    transform the first key column: identity, bucket, truncate; the keys are transformed as one
    Arrow array) or when no key falls in its ``[lower, upper]`` bounds of the first key column
    (keys all outside a file's bounds, e.g. new inserts past the table's largest key, are ruled
    out from the keys' min and max without sorting them). The files left are read, and their
    rows whose key is not changed written again, partition by partition, in the commit
    (:func:`_rewritten_files`).
    """
    first = primary_key[0]
    schema = table.schema()
    field = schema.find_field(first)
    spec = table.spec()
    key_array = keys.column(first).combine_chunks()
    if not len(key_array):
        return _Rewrite([])
    partition_values: dict[int, set[Any]] = {}
    for pos, partition_field in enumerate(spec.fields):
        transform = partition_field.transform
        if partition_field.source_id == field.field_id and str(transform).split("[")[0] in ("identity", "bucket",
                                                                                              "truncate"):
            try:
                partition_values[pos] = set(pc.unique(transform.pyarrow_transform(field.field_type)(key_array))
                                            .to_pylist())
            except (NotImplementedError, ValueError, TypeError, pa.ArrowException):
                continue  # no Arrow kernel for this type: no partition pruning on this field
    ranged = isinstance(field.field_type, (IntegerType, LongType, StringType))
    bounds = pc.min_max(key_array).as_py() if ranged else None
    sorted_keys: list[Any] | None = None
    candidates = []
    for task in table.scan().plan_files():
        data_file = task.file
        if data_file.spec_id == spec.spec_id and any(
            data_file.partition[pos] not in values for pos, values in partition_values.items()
        ):
            continue
        if bounds is not None:
            if not _may_hold(data_file, field, [bounds["min"], bounds["max"]], within=True):
                continue
            if sorted_keys is None:
                sorted_keys = sorted(key_array.to_pylist())
            if not _may_hold(data_file, field, sorted_keys):
                continue
        candidates.append(task)
    return _Rewrite(candidates, keys, _file_reader(table)) if candidates else _Rewrite([])


def _file_reader(table: Table) -> Callable[[Any], pa.Table]:
    """A function reading one scan task's rows in the table's current schema (Arrow fields
    without Parquet field ids, as pyiceberg's ``ArrowScan`` gives them; the types of a file
    written by another engine may be Arrow's small ones, e.g. ``string``).

    A Parquet file written in the current schema, exactly (the same Arrow fields, types,
    nullability and Parquet field ids, as the sink writes it) and with no delete files, is read
    whole with pyarrow: a tenth of a second less per million rows than ``ArrowScan``, whose
    per-file projection and name mapping cost about 2 ms a file. Every other file (an older
    schema, another engine's types, delete files, not Parquet) is read by ``ArrowScan``, which
    projects it by field id and applies its deletes.
    """
    import pyarrow.parquet as pq
    from pyiceberg.manifest import FileFormat

    schema = table.schema()
    scan = ArrowScan(table.metadata, table.io, schema, AlwaysTrue())
    stored = schema.as_arrow()
    plain = pa.schema([f.remove_metadata() for f in stored])

    def read(task: Any) -> pa.Table:
        data_file = task.file
        if not task.delete_files and data_file.file_format == FileFormat.PARQUET:
            with table.io.new_input(data_file.file_path).open() as stream:
                parquet = pq.ParquetFile(stream)
                if parquet.schema_arrow.equals(stored, check_metadata=True):
                    return parquet.read().cast(plain)
        return scan.to_table([task])

    return read


def _changed_rows(parts: list[pa.Table], keys: pa.Table, primary_key: Sequence[str]) -> pa.ChunkedArray:
    """A boolean per row of ``parts`` (in order, as one chunked array): whether its key is one
    of ``keys`` (key columns, no nulls; the parts in one schema). One lookup over every part: ``is_in`` builds its hash
    set of the keys once (once per part cost a hash set of 50,000 keys for each of 80 files, a
    tenth of a second), and a composite key is matched by one hash semi-join (Arrow's join
    takes every key type MySQL has), not row by row."""
    primary_key = list(primary_key)
    if len(primary_key) == 1:
        first = primary_key[0]
        column = pa.chunked_array([c for part in parts for c in part.column(first).chunks],
                                  type=parts[0].schema.field(first).type)
        value_set = keys.column(first).combine_chunks().cast(column.type)
        return pc.is_in(column, value_set=value_set)
    rows = pa.concat_tables([part.select(primary_key) for part in parts])
    lake_keys = rows.append_column(_ROW_POSITION, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    typed = pa.table([keys.column(k).cast(rows.schema.field(k).type) for k in primary_key], names=primary_key)
    hit = lake_keys.join(typed, keys=primary_key, join_type="left semi").column(_ROW_POSITION)
    mask = np.zeros(rows.num_rows, dtype=bool)
    mask[hit.to_numpy()] = True
    return pa.chunked_array([pa.array(mask)])


#: a column name no table has, for the row positions of :func:`_changed_rows`'s join
_ROW_POSITION = "__changelake_row_position"


def _rewritten_files(metadata: Any, io: Any, plan: _Rewrite, arrow_schema: pa.Schema,
                     primary_key: Sequence[str]) -> tuple[list[Any], int]:
    """The data files of the rows ``plan``'s files keep, and how many rows they hold.

    Partition by partition of the current spec (two at a time, so the memory held is that of two
    partitions, not of every file rewritten): its files are read (:attr:`_Rewrite.read`, in
    parallel), the rows of changed keys dropped (:func:`_changed_rows`), and the rest written in
    one run sorted by key (files of ``write.target-file-size-bytes``) with that partition's value
    as it is (no transform of the rows again). The kept rows of files of an older spec go through
    pyiceberg's partitioning writer.
    """
    from pyiceberg.io.pyarrow import bin_pack_arrow_table
    from pyiceberg.table import TableProperties
    from pyiceberg.utils.properties import property_as_int

    assert plan.keys is not None and plan.read is not None
    keys, read = plan.keys, plan.read
    spec = metadata.spec()
    iceberg_schema = metadata.schema()
    task_schema = pyarrow_to_schema(arrow_schema, name_mapping=iceberg_schema.name_mapping,
                                    format_version=metadata.format_version)
    target = property_as_int(metadata.properties, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                             TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT) or 512 * 1024 * 1024
    groups: dict[tuple[Any, ...], list[Any]] = {}
    other = []
    for task in plan.files:
        if task.file.spec_id != spec.spec_id:
            other.append(task)
            continue
        partition = task.file.partition
        groups.setdefault(tuple(partition[pos] for pos in range(len(spec.fields))), []).append(task)

    def kept(tasks: list[Any]) -> list[pa.Table]:
        # a pool of its own: pyiceberg's reads run on its executor, which must not wait on itself;
        # each file in the table's types (another engine's file, Spark's string, not large_string,
        # can share a partition with the sink's files)
        with ThreadPoolExecutor(max_workers=min(4, len(tasks))) as pool:
            parts = list(pool.map(lambda task: read(task).cast(arrow_schema), tasks))
        changed = _changed_rows(parts, keys, primary_key)
        out, start = [], 0
        for part in parts:
            rows = part.filter(pc.invert(changed.slice(start, part.num_rows)))
            start += part.num_rows
            if rows.num_rows:
                out.append(rows)
        return out

    def rewrite(values: tuple[Any, ...], tasks: list[Any]) -> tuple[list[Any], int]:
        parts = kept(tasks)
        if not parts:
            return [], 0
        if len(primary_key) == 1:
            # each file is sorted by key: in the order of their first keys, files of disjoint key
            # ranges (one per load commit) concatenate sorted, and _sorted only checks the order
            parts.sort(key=lambda part: part.column(primary_key[0])[0].as_py())
        rows = _sorted(pa.concat_tables(parts), primary_key)
        key = None
        if spec.fields:
            key = PartitionKey(field_values=[PartitionFieldValue(f, v) for f, v in zip(spec.fields, values)],
                               partition_spec=spec, schema=iceberg_schema)
        write_uuid = uuid.uuid4()
        tasks_out = [WriteTask(write_uuid=write_uuid, task_id=i, schema=task_schema, record_batches=batches,
                               partition_key=key) for i, batches in enumerate(bin_pack_arrow_table(rows, target))]
        return list(write_file(io, metadata, iter(tasks_out))), rows.num_rows

    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda group: rewrite(*group), groups.items()))
    files = [data_file for written, _ in done for data_file in written]
    rows_kept = sum(n for _, n in done)
    if other:
        parts = kept(other)
        if parts:
            rows = pa.concat_tables(parts)
            files.extend(_dataframe_to_data_files(metadata, rows, io))
            rows_kept += rows.num_rows
    return files, rows_kept


def _may_hold(data_file: Any, field: Any, sorted_keys: list[Any], within: bool = False) -> bool:
    """True when some key of ``sorted_keys`` falls in the file's bounds of ``field`` (or the
    file has no bounds); ``within``: ``sorted_keys`` is ``[min, max]`` and the test is whether
    that range meets the bounds."""
    from bisect import bisect_left

    from pyiceberg.conversions import from_bytes

    lower = (data_file.lower_bounds or {}).get(field.field_id)
    upper = (data_file.upper_bounds or {}).get(field.field_id)
    if lower is None or upper is None:
        return True
    lo, hi = from_bytes(field.field_type, lower), from_bytes(field.field_type, upper)
    if within:
        return bool(sorted_keys[0] <= hi and sorted_keys[-1] >= lo)
    i = bisect_left(sorted_keys, lo)
    return i < len(sorted_keys) and sorted_keys[i] <= hi
