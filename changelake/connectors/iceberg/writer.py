"""IcebergSink: writes changelog batches to Iceberg tables, exactly once per Kafka offset.

Each :meth:`IcebergSink.write` is one Iceberg commit (one ``table.transaction()``) that

1. deletes the lake rows of every key the batch changes (or every row, after a TRUNCATE),
2. appends the final image of every upserted key,
3. stores the next Kafka offset per topic-partition in each snapshot summary
   (``changelake.kafka-offsets``, see :mod:`changelake.connectors.iceberg.offsets`).

Why not ``Table.upsert``: pyiceberg 0.12's upsert has no delete path, rejects duplicate keys and
builds one expression node per key (iceberg-python #2159, #3129); for composite keys its
``Or(And(...))`` filter recursed into a segfault at 10k keys here. Measured on 100k rows / 10k
changed keys (single ``long`` key): ``delete(In(pk, keys)) + append`` 0.5 s vs ``upsert`` 0.8 s;
``bench/bench_iceberg_write.py`` (100k rows over 20k keys, 10k rows per commit, 2 cores):
this sink ~20k rows/s with a single or a composite key, ``Table.upsert`` ~6k rows/s (single key).
Composite keys use a coarse filter ``And(In(k1, ...), In(k2, ...))``: the rows it matches are
read first, the ones whose key is not changed are re-appended in the same transaction, so the
result is exact.

pyiceberg writes copy-on-write only: a delete rewrites every data file holding a changed key, so
larger, less frequent commits are cheaper (``commit.max-rows``).
"""

from __future__ import annotations

import random
import time
import uuid
import warnings
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, NoSuchTableError, ValidationException
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, In
from pyiceberg.table import Table

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
from changelake.connectors.iceberg.commit import MULTI_WRITER_RETRIES, OffsetsCheckedTransaction
from changelake.connectors.iceberg.errors import IcebergCommitError, IcebergSinkError
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
from changelake.connectors.iceberg.types import to_arrow_array
from changelake.connectors.lake.compaction import BatchItem, CompactedBatch
from changelake.connectors.lake.sink import LakeTableSink, WriteResult

# catalog functions re-exported for callers that still import them from here (their home: catalog.py)
__all__ = ["WriteResult", "IcebergSink", "open_catalog", "validate_sql_catalog_uri", "PIPELINE_NAMESPACE",
           "read_namespace_property", "write_namespace_property"]




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
    against the winner's offsets (:mod:`changelake.connectors.iceberg.commit`).
    """

    options: IcebergSinkOptions
    #: Commits check the table's offsets inside the commit (:mod:`changelake.connectors.iceberg.commit`).
    multi_writer = True

    def __init__(self, options: IcebergSinkOptions) -> None:
        super().__init__(options)
        self._tables: dict[tuple[str, str], Table] = {}

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
        """The lake table of ``table_id``, refreshed from the catalog, or None if it does not exist."""
        ident = self.identifier(table_id)
        table = self._tables.get(ident)
        if table is not None:
            return table.refresh()
        catalog: Catalog = self.catalog
        try:
            table = catalog.load_table(ident)
        except NoSuchTableError:
            return None
        self._tables[ident] = table
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
            table = self.catalog.create_table_if_not_exists(
                self.identifier(table_id),
                schema=iceberg_schema_of(schema, table=name),
                properties={"commit.retry.num-retries": str(MULTI_WRITER_RETRIES), **self.options.table_properties},
            )
            self._tables[self.identifier(table_id)] = table
        changes = plan_evolution(table.schema(), schema, table=name)
        apply_evolution(table, changes)
        apply_comments(table, schema)  # column and table comment changes reach the lake
        return table

    def column_changes(self, table_id: TableId, schema: Schema) -> list[Any]:
        """How the table's columns differ from ``schema`` (:func:`~changelake.connectors.iceberg.evolve.classify_columns`)."""
        table = self.load_table(table_id)
        return [] if table is None else classify_columns(table.schema(), schema)

    def drop_columns(self, table_id: TableId, columns: Sequence[str]) -> None:
        """Delete ``columns`` from the table (``evolve``'s ``drop.column``)."""
        table = self.load_table(table_id)
        if table is not None:
            delete_columns(table, columns)

    def recreate_schema(self, table_id: TableId, schema: Schema) -> list[str]:
        """Give an emptied table whose source was dropped and created again the new definition
        (:func:`changelake.connectors.iceberg.evolve.apply_recreate`); returns the changes made."""
        table = self.load_table(table_id)
        if table is None:
            return []
        return apply_recreate(table, schema, table_name=self.table_name(table_id))

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
        rows: Sequence[BatchItem],
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
                inside the commit (:mod:`changelake.connectors.iceberg.commit`).
        """
        attempts = int(self.options.table_properties.get("commit.retry.num-retries", MULTI_WRITER_RETRIES)) + 1
        for attempt in range(attempts):
            try:
                return super().write(table_id, rows, schema, offsets)
            except IcebergCommitError as exc:
                if attempt + 1 == attempts or not isinstance(exc.__cause__, (CommitFailedException, ValidationException)):
                    raise
                self.commit_redos += 1
                time.sleep(random.uniform(0.02, 0.1) * (attempt + 1))  # jitter: writers do not retry in step
        raise AssertionError("unreachable")

    def _commit_batch(
        self, table: Table, name: str, batch: CompactedBatch, items: Sequence[BatchItem], schema: Schema,
        offsets: dict[str, int],
    ) -> tuple[int | None, int, int]:
        self._commit(table, name, batch, schema, offsets)
        snapshot = table.current_snapshot()
        return (snapshot.snapshot_id if snapshot is not None else None), len(batch.upserts), len(batch.deletes)

    def _commit(
        self,
        table: Table,
        name: str,
        batch: CompactedBatch,
        schema: Schema,
        offsets: dict[str, int],
    ) -> None:
        props = {OFFSETS_PROPERTY: encode_offsets(offsets), COMMIT_ID_PROPERTY: str(uuid.uuid4())}
        arrow_schema = table.schema().as_arrow()
        primary_key = list(schema.primary_key)
        upserts = _to_arrow(list(batch.upserts.values()), schema, arrow_schema, name)
        delete_filter: BooleanExpression | None = None
        survivors: pa.Table | None = None
        if batch.truncate:
            delete_filter = AlwaysTrue()
        elif batch.changed_keys:
            keys = _keys_to_arrow(batch.changed_keys, schema, arrow_schema, name)
            # Keys outside every data file's key range are not in the table: no delete for them.
            keys = keys.filter(possibly_present(keys.column(0).combine_chunks(), key_ranges(table, primary_key[0])))
            if keys.num_rows:
                delete_filter, survivors = _delete_plan(table, keys, primary_key)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Delete operation did not match any records")
                # planned against the offsets the batch was filtered with (read from this same metadata)
                with OffsetsCheckedTransaction(table, read_committed_offsets(table)) as tx:
                    if delete_filter is not None:
                        tx.delete(delete_filter, snapshot_properties=props)
                    if survivors is not None and survivors.num_rows:
                        upserts = pa.concat_tables([survivors.cast(arrow_schema), upserts])
                    tx.append(upserts, snapshot_properties=props)
        except (CommitFailedException, CommitStateUnknownException, ValidationException) as exc:
            table.refresh()
            stored = read_committed_offsets(table)
            if offsets and is_replay(stored, offsets):
                return  # the commit landed although its response was lost
            raise IcebergCommitError(
                f"commit to Iceberg table {name!r} failed: {type(exc).__name__}: {exc}", table=name
            ) from exc


def _to_arrow(rows: list[Mapping[str, Any]], schema: Schema, arrow_schema: pa.Schema, table: str) -> pa.Table:
    """Rows as an Arrow table with the lake's schema (columns missing from ``schema`` are NULL)."""
    arrays = []
    for lake_field in arrow_schema:
        name = lake_field.name
        data_type = schema.column(name).type if name in schema else None
        values = [r.get(name) for r in rows] if data_type is not None else [None] * len(rows)
        arrays.append(to_arrow_array(values, data_type, lake_field.type, table=table, column=name))
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


def _delete_plan(table: Table, keys: pa.Table, primary_key: list[str]) -> tuple[BooleanExpression, pa.Table | None]:
    """The delete filter for changed ``keys`` and the rows it matches that must be re-appended.

    One key column: ``In(pk, keys)`` is exact. Several: ``And(In(k1, ...), In(k2, ...))`` also
    matches unchanged combinations (``(1, 'b')`` for keys ``(1, 'a'), (2, 'b')``), which are read
    now and re-appended in the same transaction.
    """
    columns = {name: keys.column(name).to_pylist() for name in primary_key}
    if len(primary_key) == 1:
        return _in(primary_key[0], columns[primary_key[0]]), None
    predicates = [_in(name, values) for name, values in columns.items()]
    coarse: BooleanExpression = And(*predicates)
    matched = table.scan(row_filter=coarse).to_arrow()
    if matched.num_rows == 0:
        return coarse, None
    changed = set(zip(*columns.values()))
    lake_keys = zip(*(matched.column(name).to_pylist() for name in primary_key))
    keep = pa.array([k not in changed for k in lake_keys], type=pa.bool_())
    return coarse, matched.filter(keep)


def _in(column: str, values: Iterable[Any]) -> BooleanExpression:
    """``column IN values`` (pyiceberg's ``In``; its pydantic signature confuses type checkers)."""
    expression: BooleanExpression = In(column, set(values))  # type: ignore[call-arg, arg-type]
    return expression
