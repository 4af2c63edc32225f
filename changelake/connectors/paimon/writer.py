"""PaimonSink: writes changelog batches to Paimon primary-key tables, exactly once per Kafka offset.

Each :meth:`PaimonSink.write` is one Paimon commit (one snapshot) that

1. reduces the batch to the last change per primary key
   (:func:`changelake.connectors.lake.compaction.compact`, shared with the Iceberg sink),
2. writes one row per changed key with its Paimon row kind: ``+I``/``+U`` for the final image of
   an upserted key, ``-D`` (key columns only) for a deleted key, and after a TRUNCATE a ``-D``
   for every key the table held. Paimon merges them on read (deduplicate merge engine, the
   default); no data file is rewritten. The files are written by Paimon's Rust writer
   (``pypaimon-rust``, pypaimon's ``write.native.enabled``) when it is installed and takes the
   table, else by pypaimon's Python writer (see :func:`_write_options`),
3. stores the next Kafka offset per topic-partition in the snapshot's properties, with the
   table's previous snapshot id + 1 as commit identifier (see :mod:`changelake.connectors.paimon.offsets`).

pypaimon 2.1 writes a row kind only from a column named by the table option ``rowkind.field``,
so every table the sink creates has the column :data:`~changelake.connectors.paimon.options.ROW_KIND_FIELD`
(readers of this package drop it). pypaimon does not compact: with ``deletion-vectors.enabled``
the level-0 files it writes are read by this package with ``deletion-vectors.merge-on-read``;
Java readers see them once a Paimon compaction (e.g. Flink's ``compact`` action) has run.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa

from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.lake.compaction import ArrowCompacted, BatchItem, CompactedBatch, TruncateMarker, python_rows
from changelake.connectors.lake.offsets import COMMIT_ID_PROPERTY, OFFSETS_PROPERTY, encode_offsets
from changelake.connectors.lake.sink import LakeTableSink, WriteResult
from changelake.connectors.paimon.errors import PaimonCommitError, PaimonSinkError, PaimonTypeError
from changelake.connectors.paimon.evolve import (
    classify_columns,
    comment_changes,
    paimon_schema_of,
    plan_evolution,
    plan_recreate,
    to_schema_changes,
)
from changelake.connectors.paimon.catalog import DEFAULT_DATABASE, identifier, load_table, open_catalog
from changelake.connectors.paimon.offsets import next_commit_identifier, read_committed_offsets
from changelake.connectors.paimon.options import (
    BUCKET_OPTION,
    ROW_KIND_FIELD,
    PaimonSinkOptions,
    default_bucket_count,
    uses_default_buckets,
)
from changelake.connectors.paimon.types import arrow_type_of, to_arrow_array

__all__ = ["WriteResult", "PaimonSink", "open_catalog", "DEFAULT_DATABASE", "CHECKPOINT_TABLE"]

#: Where :meth:`PaimonSink.write_checkpoint` keeps pipeline checkpoints (one row per pipeline).
CHECKPOINT_TABLE = TableId("changelake", "pipeline_checkpoints")
_CHECKPOINT_SCHEMA = Schema.of(
    [
        ("pipeline", parse_data_type("STRING NOT NULL")),
        ("offsets", parse_data_type("STRING")),
    ],
    ["pipeline"],
)
# Empty commits must still record offsets (pypaimon skips them by default).
_WRITE_OPTIONS = {"snapshot.ignore-empty-commit": "false"}
#: pypaimon's switch to Paimon's Rust data writer (``pypaimon-rust``); a table's own value wins.
NATIVE_WRITE_OPTION = "write.native.enabled"


def _write_options(table: Any, native: bool = True) -> dict[str, str]:
    """The options a commit's writer runs with: empty commits kept, and Paimon's Rust writer
    (``write.native.enabled``, off in pypaimon by default) unless the table says otherwise or
    ``native`` is False.

    The Rust writer costs about 1-2 µs of CPU per row against 35-50 µs for pypaimon 2.1's Python
    writer, which hashes every key to its bucket and folds the sorted buffer row by row in
    Python. It also records each file's ``deleteRowCount``, which the Python writer leaves at 0
    (so the sink writes ``-D`` rows for every deleted key only with the Rust writer; see
    :func:`_present_keys`). pypaimon falls back to its Python writer by itself where the Rust one
    does not take the table (no ``pypaimon-rust``, another file format, ...)."""
    own = table.options.options.to_map().get(NATIVE_WRITE_OPTION)
    enabled = str(own).lower() != "false" if own is not None else True
    return {**_WRITE_OPTIONS, NATIVE_WRITE_OPTION: "true" if native and enabled else "false"}


def _is_native(write: Any) -> bool:
    """Whether pypaimon handed out its Rust writer (which records ``deleteRowCount``)."""
    try:
        from pypaimon.write.native_write import NativeTableWrite
    except ImportError:  # a pypaimon without the Rust bridge
        return False
    return isinstance(write, NativeTableWrite)


def _delete_rows(data: pa.Table) -> int:
    """How many ``-D`` rows ``data`` (rows in the lake's columns, row-kind column included) holds."""
    import pyarrow.compute as pc

    if not data.num_rows:
        return 0
    return int(pc.sum(pc.equal(data.column(ROW_KIND_FIELD), "-D")).as_py() or 0)


class PaimonSink(LakeTableSink):
    """Changelog sink into Paimon primary-key tables with offsets in snapshot properties (exactly-once).

    As Flink CDC's Paimon pipeline sink: one Paimon table per source table (``database.table``),
    created with the transform's primary key, ``partition.key`` and ``table.properties.*``,
    evolved additively; rows upserted and deleted by row kind.

    Example::

        sink = PaimonSink(PaimonSinkOptions.filesystem("/tmp/wh"))
        with sink:
            schema = Schema.of([("id", DataType.of("BIGINT", False)), ("name", DataType.of("STRING"))], ["id"])
            sink.write(TableId("shop", "customers"), [ChangelogRow.insert({"id": 1, "name": "A"})],
                       schema, {"shop.customers/0": 1})
            sink.committed_offsets(TableId("shop", "customers"))   # {"shop.customers/0": 1}

    One process should write a table at a time (one consumer-group member per table, as the
    runner does); Paimon's commit detects and retries conflicting commits. Buffering, replay
    skipping, compaction and the checkpoint are :class:`~changelake.connectors.lake.sink.LakeTableSink`'s.
    """

    #: The checkpoint of a Kafka -> lake pipeline is the row named after the pipeline.
    CHECKPOINT_KEY = "{pipeline}"
    options: PaimonSinkOptions

    def _open_catalog(self) -> Any:
        return open_catalog(self.options)

    def _not_open(self) -> Exception:
        return PaimonSinkError("PaimonSink is not open; call open() first")

    def read_table(self, table_id: TableId, columns: Sequence[str] | None = None) -> pa.Table:
        """Every current row of the lake table (:func:`changelake.connectors.paimon.reader.read_table`)."""
        from changelake.connectors.paimon.reader import read_table

        return read_table(self.options, table_id, columns)

    # -- pipeline properties (checkpoints) -----------------------------------------------------
    def read_pipeline_property(self, key: str) -> str | None:
        """A pipeline property (e.g. a checkpoint) of this lake, None when absent: the ``offsets``
        column of row ``key`` of the Paimon table ``changelake.pipeline_checkpoints``.

        The key is pushed down: the table gains a file per commit (pypaimon never compacts), and
        only the files whose key range holds ``key`` are read. A key that is seldom written (a
        table's dropped flag, read at every start) then reads almost nothing: 0.11 s against
        0.46 s for a full scan after 200 checkpoint commits."""
        from changelake.connectors.paimon.reader import scan_table

        table = self.load_table(CHECKPOINT_TABLE)
        if table is None:
            return None
        for row in scan_table(table, first_key_in=[key]).to_pylist():
            if row["pipeline"] == key and row["offsets"]:
                return str(row["offsets"])
        return None

    def write_pipeline_property(self, key: str, value: str) -> None:
        """Store a pipeline property (one upsert commit of ``changelake.pipeline_checkpoints``)."""
        self.write_pipeline_properties({key: value})

    def read_pipeline_properties(self, prefix: str) -> dict[str, str]:
        """The pipeline properties (rows of ``changelake.pipeline_checkpoints``) whose key starts with ``prefix``."""
        from changelake.connectors.paimon.reader import scan_table

        table = self.load_table(CHECKPOINT_TABLE)
        if table is None:
            return {}
        return {str(r["pipeline"]): str(r["offsets"]) for r in scan_table(table).to_pylist()
                if str(r["pipeline"]).startswith(prefix) and r["offsets"]}

    def write_pipeline_properties(self, values: Mapping[str, str]) -> None:
        """Store several pipeline properties in one upsert commit (one row per key)."""
        rows = [ChangelogRow.insert({"pipeline": k, "offsets": v}) for k, v in values.items()]
        self.write(CHECKPOINT_TABLE, rows, _CHECKPOINT_SCHEMA, {})

    # -- tables --------------------------------------------------------------------------------
    def identifier(self, table_id: TableId) -> str:
        """The Paimon identifier ``database.table`` of a source table."""
        return identifier(table_id)

    def load_table(self, table_id: TableId) -> Any | None:
        """The lake table of ``table_id`` (a pypaimon ``FileStoreTable``, freshly loaded), or None."""
        return load_table(self.catalog, table_id)

    def primary_key(self, table_id: TableId) -> list[str]:
        """The table's primary keys (as created from the source's primary key or ``transform``).

        Raises:
            PaimonSinkError: the table does not exist.
        """
        table = self.load_table(table_id)
        if table is None:
            raise PaimonSinkError(f"Paimon table {self.table_name(table_id)!r} (for {table_id}) does not exist",
                                  table=self.table_name(table_id))
        return list(table.primary_keys)

    def ensure_table(self, table_id: TableId, schema: Schema) -> Any:
        """Create the lake table of ``table_id`` or evolve it to accept rows of ``schema``.

        A new table gets the ``table.properties.*`` options and, unless they set ``bucket`` or a
        ``dynamic-bucket.*`` option, a fixed bucket count sized from the rows of the write creating it
        (:func:`~changelake.connectors.paimon.options.default_bucket_count`: 1 up to 2M rows);
        an existing table keeps its bucket mode.

        Raises:
            PaimonSinkError: ``schema`` has no primary key, a bad ``partition.key``, or an existing
                table without a primary key or without the sink's row-kind column.
            SchemaEvolutionError: a change that would lose data or change the key (names the
                table, the column, the old and the new type).
        """
        name = self.identifier(table_id)
        table = self.load_table(table_id)
        if table is None:
            options = dict(self.options.table_properties)
            if uses_default_buckets(options):  # fixed buckets sized from this write (see default_bucket_count)
                options[BUCKET_OPTION] = str(default_bucket_count(self.creation_hint[0]))
            paimon_schema = paimon_schema_of(
                schema,
                table=name,
                options=options,
                partition_keys=self.options.partition_keys.get(table_id, ()),
            )
            self.catalog.create_database(table_id.database or DEFAULT_DATABASE, True)
            self.catalog.create_table(name, paimon_schema, True)
            table = self.load_table(table_id)
            if table is None:
                raise PaimonSinkError(f"Paimon table {name!r} was created but cannot be loaded", table=name)
        row_kind_field = table.options.options.to_map().get("rowkind.field")
        if row_kind_field != ROW_KIND_FIELD or not table.primary_keys:
            raise PaimonSinkError(
                f"Paimon table {name!r} exists but was not created by this sink: it needs a primary key and "
                f"'rowkind.field' = {ROW_KIND_FIELD!r} (has primary key {list(table.primary_keys)}, "
                f"rowkind.field {row_kind_field!r}); without them deletes cannot be written. Drop it or route "
                "the source table elsewhere",
                table=name,
            )
        fields = [(f.name, str(f.type.type)) for f in table.table_schema.fields]
        changes = plan_evolution(fields, table.primary_keys, schema, table=name)
        # column and table comment changes reach the lake too
        comments = comment_changes([(f.name, f.description) for f in table.table_schema.fields],
                                   table.table_schema.comment, schema)
        if changes or comments:
            try:
                self.catalog.alter_table(name, [*to_schema_changes(changes), *comments])
            except Exception as exc:
                raise PaimonSinkError(
                    f"cannot evolve Paimon table {name!r} ({', '.join(map(str, changes))}): {exc}", table=name
                ) from exc
            table = self.load_table(table_id)
        return table

    def column_changes(self, table_id: TableId, schema: Schema) -> list[Any]:
        """How the table's columns differ from ``schema`` (:func:`~changelake.connectors.paimon.evolve.classify_columns`)."""
        table = self.load_table(table_id)
        if table is None:
            return []
        fields = [(f.name, str(f.type.type)) for f in table.table_schema.fields]
        comments = {f.name: f.description for f in table.table_schema.fields}
        return classify_columns(fields, table.primary_keys, schema, comments)

    def past_column_sets(self, table_id: TableId) -> list[frozenset[str]]:
        """The column names of every earlier Paimon schema of the table (its ``schema-N`` files),
        without the row-kind field."""
        table = self.load_table(table_id)
        if table is None:
            return []
        current = table.table_schema.id
        return [frozenset(f.name for f in s.fields if f.name != ROW_KIND_FIELD)
                for s in table.schema_manager.list_all() if s.id != current]

    def drop_columns(self, table_id: TableId, columns: Sequence[str]) -> None:
        """Drop ``columns`` from the table (``evolve``'s ``drop.column``)."""
        from pypaimon.schema.schema_change import SchemaChange as PaimonChange

        if columns:
            name = self.identifier(table_id)
            try:
                self.catalog.alter_table(name, [PaimonChange.drop_column(c) for c in columns])
            except Exception as exc:
                raise PaimonSinkError(f"cannot drop columns {list(columns)} of Paimon table {name!r}: {exc}",
                                      table=name) from exc

    def recreate_schema(self, table_id: TableId, schema: Schema) -> list[str]:
        """Give an emptied table whose source was dropped and created again the new definition
        (:func:`changelake.connectors.paimon.evolve.plan_recreate`); returns the changes made."""
        name = self.identifier(table_id)
        table = self.load_table(table_id)
        if table is None:
            return []
        fields = [(f.name, str(f.type.type)) for f in table.table_schema.fields]
        drops, adds = plan_recreate(fields, table.primary_keys, schema, table=name)
        for changes in (drops, adds):
            if changes:
                try:
                    self.catalog.alter_table(name, changes)
                except Exception as exc:
                    raise PaimonSinkError(f"cannot re-create the schema of Paimon table {name!r}: {exc}", table=name) from exc
        return [f"{len(drops)} column(s) dropped", f"{len(adds)} column(s) added"] if drops or adds else []

    def table_name(self, table_id: TableId) -> str:
        """The Paimon identifier ``database.table``."""
        return self.identifier(table_id)

    def _read_committed_offsets(self, table: Any) -> dict[str, int]:
        return read_committed_offsets(table)

    def last_commit_ms(self, table_id: TableId) -> int | None:
        """Commit time (ms since the epoch) of the lake table's latest snapshot; None if never written."""
        table = self.load_table(table_id)
        latest = table.snapshot_manager().get_latest_snapshot() if table is not None else None
        return int(latest.time_millis) if latest is not None else None

    # -- writing -------------------------------------------------------------------------------
    def _commit_batch(
        self, table: Any, name: str, batch: CompactedBatch, items: Sequence[BatchItem], schema: Schema,
        offsets: dict[str, int],
    ) -> tuple[int | None, int, int, int]:
        # One row per changed key with its Paimon row kind (merge-on-read: a commit writes its
        # changed rows only, no rows rewritten).
        kinds = _last_kinds(items, schema)
        snapshot_id, (_, upserted, deleted) = self._commit(
            table, name, lambda lookup: self._changes(table, name, batch, schema, kinds, lookup), offsets)
        return snapshot_id, upserted, deleted, 0

    def _commit_arrow(self, table: Any, name: str, batch: ArrowCompacted, schema: Schema,
                      offsets: dict[str, int]) -> tuple[int | None, int, int, int]:
        """The columnar lane's commit: the upserts go to the table as Arrow (cast to its
        columns), each with its last row kind, then one ``-D`` row per deleted key (with the
        Python writer only for deleted keys the table holds, as :meth:`_commit_batch`)."""
        snapshot_id, (_, upserted, deleted) = self._commit(
            table, name, lambda lookup: self._arrow_changes(table, name, batch, schema, lookup), offsets)
        return snapshot_id, upserted, deleted, 0

    def _arrow_changes(self, table: Any, name: str, batch: ArrowCompacted, schema: Schema,
                       lookup: bool) -> tuple[pa.Table, int, int]:
        """:meth:`_changes` of the columnar lane: the batch as one Arrow table in the lake's
        columns, with the row-kind column; ``lookup``: ``-D`` rows only for keys the table holds."""
        lake_fields = [(f.name, str(f.type.type)) for f in table.table_schema.fields]
        lake_types = dict(lake_fields)
        primary_key = list(schema.primary_key)
        upserts = batch.upserts
        deletes: list[tuple[Any, ...]] | None = None
        if lookup:
            deleted_keys = [tuple(row[k] for k in primary_key) for row in python_rows(batch.deletes, schema)]
            deletes = _present_keys(table, name, schema, lake_types, deleted_keys)
        delete_count = len(deletes) if deletes is not None else batch.deletes.num_rows
        arrays = []
        fields = []
        for column, type_name in lake_fields:
            arrow_type = arrow_type_of(type_name)
            if column == ROW_KIND_FIELD:
                array = pa.concat_arrays([upserts_kinds(batch), pa.array(["-D"] * delete_count, pa.string())])
            else:
                data_type = schema.column(column).type if column in schema else None
                head = (_cast_column(upserts, column, arrow_type, name) if column in upserts.column_names
                        else pa.nulls(upserts.num_rows, arrow_type))
                at = primary_key.index(column) if column in primary_key else None
                if deletes is not None:
                    tail = to_arrow_array([k[at] for k in deletes] if at is not None else [None] * len(deletes),
                                          data_type, arrow_type, table=name, column=column)
                elif at is not None:  # the deleted keys as the upserts' keys are stored: the same cast
                    tail = _cast_column(batch.deletes, column, arrow_type, name)
                else:
                    tail = pa.nulls(delete_count, arrow_type)
                array = pa.concat_arrays([head, tail])
            arrays.append(array)
            fields.append(pa.field(column, arrow_type, nullable=column not in primary_key and column != ROW_KIND_FIELD))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields)), upserts.num_rows, delete_count

    def _changes(
        self, table: Any, name: str, batch: CompactedBatch, schema: Schema, kinds: Mapping[tuple[Any, ...], str],
        lookup: bool = True,
    ) -> tuple[pa.Table, int, int]:
        """The batch as one Arrow table in the lake's columns, with the row kind column.

        ``lookup``: ``-D`` rows only for deleted keys the table holds (:func:`_present_keys`, for
        pypaimon's Python writer); otherwise one per deleted key, as Paimon's Flink sink writes them."""
        lake_fields = [(f.name, str(f.type.type)) for f in table.table_schema.fields]
        lake_types = dict(lake_fields)
        primary_key = list(schema.primary_key)
        upserts = list(batch.upserts.items())
        rows: list[Mapping[str, Any]] = [values for _, values in upserts]
        if batch.truncate:
            # keys read from the lake are in the lake's form already (TIME as text, ...)
            upserted = set(_lake_form(list(batch.upserts), schema, lake_types, name))
            deletes = [k for k in _lake_keys(table, primary_key) if k not in upserted]
            rows.extend(dict(zip(primary_key, key)) for key in deletes)
        else:
            deletes = (_present_keys(table, name, schema, lake_types, list(batch.deletes)) if lookup
                       else list(batch.deletes))
            rows.extend(dict(zip(primary_key, key)) for key in deletes)
        row_kinds = [kinds.get(key, "+I") for key, _ in upserts] + ["-D"] * len(deletes)
        arrays = []
        fields = []
        for column, type_name in lake_fields:
            arrow_type = arrow_type_of(type_name)
            if column == ROW_KIND_FIELD:
                arrays.append(pa.array(row_kinds, type=pa.string()))
            else:
                data_type = schema.column(column).type if column in schema else None
                values = [r.get(column) for r in rows] if data_type is not None else [None] * len(rows)
                arrays.append(to_arrow_array(values, data_type, arrow_type, table=name, column=column))
            fields.append(pa.field(column, arrow_type, nullable=column not in primary_key and column != ROW_KIND_FIELD))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields)), len(upserts), len(deletes)

    def _commit(self, table: Any, name: str, build: Callable[[bool], _Changes],
                offsets: dict[str, int]) -> tuple[int | None, _Changes]:
        """Write the rows ``build(lookup)`` gives and commit them with ``offsets`` as one
        snapshot; returns its id and what ``build`` returned.

        ``lookup`` is False when the writer is Paimon's Rust writer, which records every file's
        ``-D`` rows in its ``deleteRowCount``: then ``-D`` rows of keys the table does not hold
        are merged away on read, so no key lookup is needed. If the files of a commit ever
        report fewer ``-D`` rows than were written, they are dropped uncommitted and the commit
        is made again with pypaimon's Python writer and the key lookup.
        """
        try:
            return self._commit_with(table, name, build, offsets, native=True)
        except _DeleteCountMissing:
            return self._commit_with(table, name, build, offsets, native=False)

    def _commit_with(self, table: Any, name: str, build: Callable[[bool], _Changes], offsets: dict[str, int],
                     native: bool) -> tuple[int | None, _Changes]:
        writable = table.copy(_write_options(table, native))
        builder = writable.new_stream_write_builder()
        builder.commit_user = self.options.commit_user
        identifier = next_commit_identifier(writable)
        properties = {OFFSETS_PROPERTY: encode_offsets(offsets), COMMIT_ID_PROPERTY: str(uuid.uuid4())}
        write = builder.new_write()
        commit = builder.new_commit()
        try:
            changes = build(not _is_native(write))  # its errors (a value the lake cannot store) as they are
            data = changes[0]
            try:
                if data.num_rows:
                    write.write_arrow(data)
                messages = write.prepare_commit(identifier)
                written = _delete_rows(data) if _is_native(write) else 0
                if written and sum(int(f.delete_row_count or 0) for m in messages for f in m.new_files) < written:
                    _drop_files(writable, messages)
                    raise _DeleteCountMissing(name)
                commit.commit(messages, identifier, properties)
            except _DeleteCountMissing:
                raise
            except Exception as exc:
                stored = read_committed_offsets(table)
                if offsets and stored == offsets:
                    return _latest_snapshot_id(table), changes  # the commit landed although it reported a failure
                raise PaimonCommitError(
                    f"commit to Paimon table {name!r} failed: {type(exc).__name__}: {exc}", table=name
                ) from exc
        finally:
            write.close()
            commit.close()
        return _latest_snapshot_id(table), changes


#: What a commit writes: (rows in the lake's columns with the row kind, keys upserted, keys deleted).
_Changes = tuple[pa.Table, int, int]


class _DeleteCountMissing(Exception):
    """The Rust writer's files did not record their ``-D`` rows (never seen): write again in Python."""


def _drop_files(table: Any, messages: Sequence[Any]) -> None:
    """Delete the data files of uncommitted ``messages`` (best effort: a file no snapshot names is
    never read, and Paimon's ``remove_orphan_files`` procedure deletes what is left)."""
    for message in messages:
        for meta in message.new_files:
            try:
                table.file_io.delete_quietly(meta.file_path)
            except Exception:  # noqa: BLE001 - best effort
                pass


def _cast_column(data: pa.Table, column: str, arrow_type: pa.DataType, name: str) -> pa.Array:
    """Column ``column`` of ``data`` as one array of the lake's ``arrow_type``.

    Raises:
        PaimonTypeError: the values cannot be stored as ``arrow_type`` (names table and column).
    """
    try:
        return data.column(column).combine_chunks().cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise PaimonTypeError(f"cannot store column {column!r} of Paimon table {name!r} as "
                              f"{arrow_type}: {exc}", table=name, column=column) from exc


def upserts_kinds(batch: ArrowCompacted) -> pa.Array:
    """The row kind of each upsert of ``batch`` (``+I`` / ``+U``, its last change), as one array."""
    kinds = batch.upsert_kinds
    return kinds.combine_chunks() if isinstance(kinds, pa.ChunkedArray) else kinds


def _last_kinds(items: Sequence[BatchItem], schema: Schema) -> dict[tuple[Any, ...], str]:
    """Key -> ``+I`` or ``+U``: the kind of the last upsert of each key (Paimon's row kind)."""
    kinds: dict[tuple[Any, ...], str] = {}
    primary_key = tuple(schema.primary_key)
    for item in items:
        if isinstance(item, TruncateMarker) or not item.kind.is_accumulate:
            continue
        key = tuple(item.values.get(k) for k in primary_key)
        kinds[key] = item.kind.short_string
    return kinds


def _lake_keys(table: Any, primary_key: list[str], first_key_in: list[Any] | None = None) -> list[tuple[Any, ...]]:
    """Every key the table holds now (for a TRUNCATE's ``-D`` rows), or those whose first key
    column is in ``first_key_in``."""
    from changelake.connectors.paimon.reader import scan_table

    keys = scan_table(table, primary_key, first_key_in=first_key_in)
    return list(zip(*(keys.column(k).to_pylist() for k in primary_key)))


def _lake_form(
    keys: list[tuple[Any, ...]], schema: Schema, lake_types: Mapping[str, str], name: str
) -> list[tuple[Any, ...]]:
    """Key tuples as the lake stores and reads them back (e.g. TIME as ``HH:mm:ss`` text, a
    DECIMAL wider than 38 digits as text), so they compare with keys read from the table."""
    columns = []
    for i, column in enumerate(schema.primary_key):
        array = to_arrow_array([k[i] for k in keys], schema.column(column).type,
                               arrow_type_of(lake_types[column]), table=name, column=column)
        columns.append(array.to_pylist())
    return list(zip(*columns)) if columns else []


def _present_keys(
    table: Any, name: str, schema: Schema, lake_types: Mapping[str, str], keys: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """The ``keys`` the lake table holds now, in their order (returned as given).

    With pypaimon's Python writer a ``-D`` is written only for a key the table holds: it records
    ``deleteRowCount = 0`` for every data file it writes, so a reader (pypaimon's or Java's) takes
    a file alone in its split as already merged and would return a ``-D`` row of a key no other
    file holds as a row. A ``-D`` of a key held elsewhere overlaps that file's key range and is
    always merged away. Paimon's Rust writer records the count, so with it the sink skips this
    lookup, whose cost follows the table rather than the changes.
    """
    if not keys or table.snapshot_manager().get_latest_snapshot() is None:
        return []
    lake_keys = _lake_form(keys, schema, lake_types, name)
    first = list({k[0] for k in lake_keys})
    present = set(_lake_keys(table, list(schema.primary_key), first_key_in=first))
    return [key for key, lake_key in zip(keys, lake_keys) if lake_key in present]


def _latest_snapshot_id(table: Any) -> int | None:
    latest = table.snapshot_manager().get_latest_snapshot()
    return None if latest is None else int(latest.id)
