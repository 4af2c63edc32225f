"""Incremental snapshot (``scan.incremental.snapshot.enabled``): Flink CDC's chunk + watermark algorithm.

Each captured table is split into key-range chunks (:mod:`~changelake.connectors.mysql_cdc.snapshot.chunks`).
A chunk is read without locks or a long transaction, as Flink CDC's ``MySqlSnapshotSplitReadTask``:

1. low watermark ``lw`` = ``SHOW MASTER STATUS``;
2. ``SELECT`` the chunk's rows (fetched ``scan.snapshot.fetch.size`` rows per round trip),
   buffered by key;
3. high watermark ``hw`` = ``SHOW MASTER STATUS``;
4. if ``lw != hw``, the binlog from ``lw`` to ``hw`` is read (a binlog connection of its own,
   with the reader's ``server-id``) and every change of a row in the chunk's key range is applied
   to the buffer (insert/update: upsert by key; delete: remove), so the buffer is the chunk's
   state at ``hw``;
5. the buffer is emitted in key order as ``Op.READ`` events (``ts_ms`` 0).

Chunks are read by up to ``parallelism`` readers at once (threads, each with its own connections
and ``server-id``: the work waits on the server) and emitted in key order; at most
``parallelism`` chunk buffers are held at a time, so memory is bounded by about
``chunk.size * parallelism`` rows whatever the table size (:attr:`IncrementalSnapshotReader.peak_buffered_rows`).

The binlog phase then starts at the smallest ``hw`` and emits a change only after the ``hw`` of
the chunk its row falls in (:class:`~changelake.connectors.mysql_cdc.snapshot.watermarks.WatermarkFilter`).

Restart: every event's position carries the tables still to read and, per table, the key ranges
already emitted with their ``hw`` (one mark per chunk, adjacent chunks with one ``hw`` merged, plus
the row reached inside the chunk being emitted), never rows. A restart continues after the last
emitted key with a new chunk (new watermarks); the part emitted before keeps its own ``hw`` for
the binlog filter. Nothing is lost or emitted twice.

Tables need a primary key, and the chunk key (the first primary-key column, or
``scan.incremental.snapshot.chunk.key-column``, which must be a primary-key column as in Flink CDC)
must be an integer or DECIMAL column, whose order in Python is the server's: rows of the binlog are
placed in chunks by comparing keys in Python.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pymysql.cursors
from pymysql.constants import ER

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import TableId
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.binlog import _replication_fixes
from changelake.connectors.mysql_cdc.binlog.reader import BinlogReader, Progress
from changelake.connectors.mysql_cdc.connection import close_quietly, is_connection_loss, text_connection
from changelake.connectors.mysql_cdc.snapshot.chunks import INTEGRAL_KINDS, SPLITTABLE_KINDS, Chunk, ChunkSplitter
from changelake.connectors.mysql_cdc.errors import SnapshotInterruptedError
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SnapshotProgress
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker, TableSchema, load_table_schema
from changelake.connectors.mysql_cdc.snapshot.reader import no_such_table, quote, select_list
from changelake.connectors.mysql_cdc.values import convert
from changelake.connectors.mysql_cdc.snapshot.watermarks import ChunkMark, TableMarks, WatermarkFilter, encode_value, hw_reached, marks_from_json

__all__ = ["IncrementalSnapshotReader", "ChunkResult", "master_status", "new_progress"]

log = logging.getLogger(__name__)


def new_progress(tables: tuple[str, ...]) -> SnapshotProgress:
    """The progress of an incremental snapshot not started yet."""
    return SnapshotProgress(tables, None, {"tables": {}, "current": None})


def master_status(conn: Any) -> BinlogPosition:
    """``SHOW MASTER STATUS`` as a position. Raises SourceError when binary logging is off."""
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
    if not row:
        raise SourceError("SHOW MASTER STATUS returned nothing: binary logging is off")
    return BinlogPosition(str(row[0]), int(row[1]))


@dataclass
class ChunkResult:
    """A chunk read and back-filled: its rows in key order (ordering key, row) and its hw."""

    chunk: Chunk
    rows: list[tuple[tuple[Any, ...], dict[str, Any]]]
    hw: BinlogPosition
    backfilled: int  # binlog changes applied to the chunk; -1: no back-fill (lw == hw)
    #: the table's definition the chunk was read with (None: the table did not exist at ``hw``).
    table: TableSchema | None = None


class _TableQueries:
    """:class:`~changelake.connectors.mysql_cdc.snapshot.chunks.ChunkQueries` on one connection."""

    def __init__(self, conn: Any, table: TableSchema, column: str) -> None:
        self._conn, self._table, self._col = conn, table, table.column(column)
        self._name = f"{quote(table.table_id.database or '')}.{quote(table.table_id.table)}"
        self._q = quote(column)

    def _execute(self, cur: Any, sql: str, params: list[Any]) -> bool:
        """Run a query of the chunk key column; False: the table was dropped (no more rows).

        Raises:
            SourceError: the chunk key column is gone (dropped or renamed meanwhile).
        """
        try:
            return _execute_unless_gone(cur, sql, params)
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] == ER.BAD_FIELD_ERROR:
                raise SourceError(f"the chunk key column {self._col.name!r} of {self._table.table_id} was dropped or "
                                  "renamed during its incremental snapshot; snapshot it again under a new "
                                  "'pipeline.name'") from exc
            raise

    def _one(self, sql: str, params: list[Any]) -> Any:
        with self._conn.cursor() as cur:
            if not self._execute(cur, sql, params):
                return None  # the table was dropped: no more rows
            row = cur.fetchone()
        return convert(self._col, row[0]) if row and row[0] is not None else None

    def min_max(self, start: Any | None) -> tuple[Any | None, Any | None]:
        where, params = (f" WHERE {self._q} >= %s", [start]) if start is not None else ("", [])
        with self._conn.cursor() as cur:
            if not self._execute(cur, f"SELECT MIN({self._q}), MAX({self._q}) FROM {self._name}{where}", params):
                return None, None
            row = cur.fetchone()
        if not row or row[0] is None:
            return None, None
        return convert(self._col, row[0]), convert(self._col, row[1])

    def approximate_row_count(self) -> int:
        with self._conn.cursor() as cur:
            cur.execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                        [self._table.table_id.database, self._table.table_id.table])
            row = cur.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def next_chunk_max(self, start: Any, size: int) -> Any | None:
        return self._one(f"SELECT MAX(k) FROM (SELECT {self._q} AS k FROM {self._name} WHERE {self._q} >= %s "
                         f"ORDER BY {self._q} LIMIT {int(size)}) AS chunk", [start])

    def min_greater(self, value: Any) -> Any | None:
        return self._one(f"SELECT MIN({self._q}) FROM {self._name} WHERE {self._q} > %s", [value])


class _Slot:
    """One chunk reader: a text connection and a server id for its back-fill binlog reads."""

    def __init__(self, conn_kwargs: dict[str, Any], server_id: int) -> None:
        self.conn_kwargs, self.server_id = conn_kwargs, server_id
        self.conn: Any = None

    def connection(self) -> Any:
        if self.conn is not None:
            try:
                self.conn.ping()
                return self.conn
            except Exception:  # noqa: BLE001 - reconnect below
                self.close()
        self.conn = text_connection(self.conn_kwargs)
        return self.conn

    def close(self) -> None:
        close_quietly(self.conn)
        self.conn = None


class IncrementalSnapshotReader:
    """Reads the captured tables chunk by chunk with watermarks (see module doc).

    Same interface as :class:`~changelake.connectors.mysql_cdc.snapshot.reader.SnapshotReader`
    (``open``/``read``/``done``/``close``/``tables_read``/``binlog_position``), plus
    :meth:`binlog_filter` for the binlog phase.

    Args:
        connection: PyMySQL connection kwargs.
        progress: from :func:`new_progress` or a stored position (``marks`` set).
        chunk_size: ``scan.incremental.snapshot.chunk.size`` (rows).
        fetch_size: ``scan.snapshot.fetch.size`` (rows per round trip).
        server_ids: one ``server-id`` per chunk reader; ``len(server_ids)`` is the parallelism.
        binlog_position: the position kept in the source position during the snapshot (a stored
            one, or None: ``SHOW MASTER STATUS`` at :meth:`open`).
        chunk_key_column: ``scan.incremental.snapshot.chunk.key-column`` per table (None: the first
            primary-key column).
        upper_bound / lower_bound: ``chunk-key.even-distribution.factor.upper-bound`` / ``.lower-bound``.
        include_comments / tinyint1_as_boolean: as the other snapshot.
        backfill_timeout_s: how long a back-fill may wait for the binlog to reach the hw (s).

    Raises (from :meth:`open`):
        SourceError: a table has no primary key, its chunk key is not a primary-key column or not
            an integer/DECIMAL column, or the stored marks are not valid.
    """

    def __init__(
        self,
        connection: dict[str, Any],
        progress: SnapshotProgress,
        chunk_size: int,
        fetch_size: int,
        server_ids: list[int],
        binlog_position: BinlogPosition | None = None,
        *,
        chunk_key_column: Callable[[TableId], str | None] = lambda _t: None,
        upper_bound: float = 1000.0,
        lower_bound: float = 0.05,
        include_comments: bool = False,
        tinyint1_as_boolean: bool = True,
        backfill_timeout_s: float = 60.0,
    ) -> None:
        if not server_ids:
            raise ValueError("at least one server id")
        assert progress.marks is not None, "incremental progress"
        self._connection = connection
        self._chunk_key_column = chunk_key_column
        self._schema_options = {"include_comments": include_comments, "tinyint1_as_boolean": tinyint1_as_boolean}
        self._splitter = ChunkSplitter(chunk_size, upper_bound, lower_bound)
        self._fetch = fetch_size
        self._server_ids = list(server_ids)
        self._backfill_timeout_s = backfill_timeout_s
        self.binlog_position = binlog_position
        #: every table this snapshot reads (``db.table``).
        self.tables_read: list[str] = list(progress.tables)
        self._remaining: list[str] = list(progress.tables)
        self._marks = marks_from_json(progress.marks.get("tables"))
        current = progress.marks.get("current")
        if current:
            self._marks.setdefault(str(current[0]), TableMarks(()))
            try:
                self._marks[str(current[0])].append(ChunkMark.from_json(current[1]))
            except (TypeError, ValueError) as exc:
                raise SourceError(f"the stored incremental snapshot position is not valid: {exc!r}") from exc
        self._marks_json: dict[str, Any] = {t: m.to_json() for t, m in self._marks.items()}
        self._schemas: dict[str, TableSchema] = {}
        self._keys: dict[str, tuple[str, ...]] = {}
        self._ctl: Any = None
        self._slots: "queue.Queue[_Slot]" = queue.Queue()
        self._all_slots: list[_Slot] = []
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: collections.deque[concurrent.futures.Future[ChunkResult]] = collections.deque()
        self._chunks: Iterator[Chunk] | None = None
        self._current: ChunkResult | None = None
        self._index = 0
        self._lock = threading.Lock()
        self._buffered = 0
        #: the most rows held in chunk buffers at once (memory bound check).
        self.peak_buffered_rows = 0
        #: chunks emitted, and binlog changes applied by back-fills (for tests and logs).
        self.chunks_done = 0
        self.backfilled_changes = 0
        #: chunks whose low and high watermarks differed (the binlog was read for them).
        self.backfills = 0

    @property
    def parallelism(self) -> int:
        return len(self._server_ids)

    @property
    def schemas(self) -> dict[str, TableSchema]:
        """``db.table`` -> the definition this snapshot read each table with (the latest one)."""
        return dict(self._schemas)

    @property
    def done(self) -> bool:
        return not self._remaining

    # -- lifecycle ------------------------------------------------------------------------------
    def open(self) -> BinlogPosition:
        """Check the tables and start the chunk readers; returns the position to keep in the
        source position during the snapshot (the binlog phase starts at :meth:`binlog_filter`'s
        smallest hw). Raises SourceError (see class doc)."""
        _replication_fixes.apply()
        self._ctl = text_connection(self._connection)
        if self.binlog_position is None:
            self.binlog_position = master_status(self._ctl)
        for name in list(self._remaining):
            try:
                table = load_table_schema(self._ctl, TableId.parse(name), **self._schema_options)
            except SourceError:
                if not no_such_table(self._ctl, TableId.parse(name)):
                    raise
                # gone (a resumed snapshot: dropped or renamed while the pipeline was stopped; its
                # DROP / RENAME is in the binlog): no chunk of it, as for a table gone meanwhile
                log.info("incremental snapshot: table %s is gone (dropped or renamed); not read", name)
                self._remaining = [t for t in self._remaining if t != name]
                continue
            self._schemas[name] = table
            self._keys[name] = self._ordering_key(table)
            stored = self._marks.get(name)
            if stored is not None and stored.key_columns and stored.key_columns != self._keys[name]:
                raise SourceError(
                    f"the stored incremental snapshot of {name} is chunked by {list(stored.key_columns)}, but the table's "
                    f"chunk key is now {list(self._keys[name])}; finish it with the old 'scan.incremental.snapshot.chunk.key-column'"
                )
            if stored is not None and not stored.key_columns:
                self._marks[name] = TableMarks(self._keys[name], stored.marks)
        for sid in self._server_ids:
            slot = _Slot(self._connection, sid)
            self._all_slots.append(slot)
            self._slots.put(slot)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.parallelism, thread_name_prefix="mysql-cdc-chunk")
        self._chunks = self._all_chunks()
        assert self.binlog_position is not None
        return self.binlog_position

    def _ordering_key(self, table: TableSchema) -> tuple[str, ...]:
        pk = table.primary_key
        if not pk:
            raise SourceError(
                f"table {table.table_id} has no primary key; the incremental snapshot needs one (as Flink CDC's). "
                "Set 'scan.incremental.snapshot.enabled' = 'false' to read it with the consistent snapshot."
            )
        column = self._chunk_key_column(table.table_id) or pk[0]
        if column not in pk:
            raise SourceError(
                f"'scan.incremental.snapshot.chunk.key-column' column {column!r} of table {table.table_id} is not in "
                f"its primary key {list(pk)}; the incremental snapshot chunks by a primary-key column (as Flink CDC)"
            )
        kind = table.column(column).kind
        if kind not in SPLITTABLE_KINDS:
            raise SourceError(
                f"the chunk key {column!r} of table {table.table_id} is a {kind} column; the incremental snapshot "
                f"chunks by an integer or DECIMAL column (kinds {sorted(SPLITTABLE_KINDS)}). Choose one with "
                "'scan.incremental.snapshot.chunk.key-column', or set 'scan.incremental.snapshot.enabled' = 'false'."
            )
        return (column,) + tuple(k for k in pk if k != column)

    def close(self) -> None:
        """Stop the chunk readers and close every connection (idempotent)."""
        for fut in self._pending:
            fut.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._pending.clear()
        for slot in self._all_slots:
            slot.close()
        if self._ctl is not None:
            try:
                self._ctl.close()
            except Exception:  # noqa: BLE001
                pass
            self._ctl = None

    # -- chunks ---------------------------------------------------------------------------------
    def _all_chunks(self) -> Iterator[Chunk]:
        for name in list(self._remaining):
            table = self._schemas[name]
            key = self._keys[name]
            marks = self._marks.get(name)
            start, inclusive = marks.resume_start() if marks is not None and marks.marks else (None, True)
            queries = _TableQueries(self._ctl, table, key[0])
            integral = table.column(key[0]).kind in INTEGRAL_KINDS
            yield from self._splitter.split(name, queries, integral, start, inclusive)

    def _read_chunk(self, chunk: Chunk) -> ChunkResult:
        slot = self._slots.get()
        try:
            return self._read_chunk_with(slot, chunk)
        finally:
            self._slots.put(slot)

    def _read_chunk_with(self, slot: _Slot, chunk: Chunk) -> ChunkResult:
        """Read ``chunk`` between its watermarks, with the table's definition at that time.

        As DBLog re-reads a chunk whose window saw a change it cannot place, a chunk whose
        low/high watermark window holds a change of the table's definition (``ALTER``, ``DROP`` +
        ``CREATE``; seen as a different definition after ``hw``, or one not seen before) is read
        again with new watermarks, so its rows and back-fill always match one definition, which
        its events carry. A table gone at the time (``DROP TABLE``) gives an empty chunk: its
        state at ``hw`` is no rows.
        """
        name = chunk.table
        keyless: list[TableSchema] = []  # definitions without a primary key this chunk's reads saw
        for _attempt in range(_DDL_RETRIES):
            result = self._read_chunk_once(slot, chunk, self._schemas[name], keyless)
            if result is not None:
                return result
        if keyless:
            self._ordering_key(keyless[-1])  # raises: the table really has no primary key now
        raise SourceError(f"snapshot chunk {chunk.index} of {name}: the table's definition changed during each of "
                          f"{_DDL_RETRIES} reads of the chunk; pause the DDL and restart")

    def _read_chunk_once(self, slot: _Slot, chunk: Chunk, known: TableSchema,
                         keyless: list[TableSchema]) -> ChunkResult | None:
        """One read of ``chunk`` (see :meth:`_read_chunk_with`); None: read it again (a definition
        without a primary key is appended to ``keyless`` first)."""
        conn = slot.connection()
        lw = master_status(conn)
        try:
            table = load_table_schema(conn, known.table_id, **self._schema_options)
        except SourceError:  # the table is gone (DROP TABLE): no rows at hw
            return ChunkResult(chunk, [], master_status(conn), -1, None)
        if table != known:
            if not table.primary_key:
                # read between a DROP and a CREATE (the columns of one, the keys of the other)
                # or really without a key now: read again; after the retries the error says which
                keyless.append(table)
                return None
            if self._ordering_key(table) != self._keys[chunk.table]:
                raise SourceError(f"the primary key of {chunk.table} changed during its incremental snapshot (now "
                                  f"{list(table.primary_key)}); snapshot it again under a new 'pipeline.name'")
            self._schemas[chunk.table] = table  # later chunks start from it
            log.info("incremental snapshot of %s: the table's definition changed; chunk %d is read with the new one",
                     chunk.table, chunk.index)
        key_columns = self._keys[chunk.table]
        name = f"{quote(table.table_id.database or '')}.{quote(table.table_id.table)}"
        q = quote(key_columns[0])
        conds, params = [], []
        if chunk.start is not None:
            conds.append(f"{q} >= %s")
            params.append(chunk.start_value)
        if chunk.end is not None:
            conds.append(f"{q} < %s")
            params.append(chunk.end)
        sql = f"SELECT {select_list(table)} FROM {name}" + (" WHERE " + " AND ".join(conds) if conds else "")
        listed: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        columns = table.columns
        names = [c.name for c in columns]
        idx = [names.index(k) for k in key_columns]
        # the SQL range is the chunk's, except after a row emitted part-way (checked per row)
        check = chunk.start is not None and not chunk.start_inclusive
        cur = conn.cursor(pymysql.cursors.SSCursor)
        try:
            if not _execute_unless_gone(cur, sql + " ORDER BY " + ", ".join(quote(k) for k in key_columns), params,
                                        columns_may_change=True):
                self._count(-len(listed))
                return None  # dropped (or changed) between the definition and the SELECT: again
            while True:
                batch = cur.fetchmany(self._fetch)
                if not batch:
                    break
                kept = len(listed)
                for raw in batch:
                    try:
                        values = [convert(c, v) for c, v in zip(columns, raw)]
                    except ValueError as exc:
                        raise SourceError(f"snapshot of {chunk.table}: {exc}") from exc
                    key = tuple([values[i] for i in idx])
                    if check and not chunk.contains(key):
                        continue
                    listed.append((key, dict(zip(names, values))))
                self._count(len(listed) - kept)
        finally:
            cur.close()
        hw = master_status(conn)
        if hw == lw:  # nothing committed while reading: the rows are the chunk at hw
            # in key order as Python compares (marks compare so); the server's order is the same for
            # the chunk key, maybe not for a further string key column: timsort on near-sorted rows is O(n)
            listed.sort(key=_first)
            return ChunkResult(chunk, listed, hw, -1, table)
        try:
            after = load_table_schema(conn, known.table_id, **self._schema_options)
        except SourceError:
            after = None
        if after != table or table != known:
            # a DDL in or just before the window: the back-fill could not decode both sides of it
            self._count(-len(listed))
            return None
        rows = dict(listed)
        del listed
        before = len(rows)
        applied = self._backfill(slot.server_id, table, key_columns, chunk, lw, hw, rows)
        self._count(len(rows) - before)
        return ChunkResult(chunk, sorted(rows.items(), key=_first), hw, applied, table)

    def _count(self, n: int) -> None:
        with self._lock:
            self._buffered += n
            self.peak_buffered_rows = max(self.peak_buffered_rows, self._buffered)

    def _backfill(self, server_id: int, table: TableSchema, key_columns: tuple[str, ...], chunk: Chunk,
                  lw: BinlogPosition, hw: BinlogPosition, rows: dict[tuple[Any, ...], dict[str, Any]]) -> int:
        """Apply the binlog changes between ``lw`` and ``hw`` of rows in ``chunk`` to ``rows``."""
        table_id = table.table_id
        reader = BinlogReader(
            self._connection, server_id, lw, lambda t: t == table_id,
            SchemaTracker(lambda t: table if t == table_id else None), heartbeat_s=0.1,
            connect_timeout_s=self._backfill_timeout_s, linger_s=0.0, existing=(table_id,),  # for a DROP DATABASE
        )
        reader.start()
        applied = 0
        deadline = time.monotonic() + self._backfill_timeout_s
        try:
            while True:
                items = reader.take(1000, 0.5)
                for kind, item in items:
                    if kind == "progress":
                        assert isinstance(item, Progress)
                        if hw_reached(BinlogPosition(item.file, item.next_pos), hw):
                            return applied
                        continue
                    if kind != "event":
                        continue  # a re-read request: this chunk is read after the statement anyway
                    ev: DataChangeEvent = item
                    pos = ev.position or {}
                    if hw_reached(BinlogPosition(str(pos["file"]), int(pos["pos"])), hw):
                        return applied
                    applied += _apply(ev, key_columns, chunk, rows)
                if items:
                    deadline = time.monotonic() + self._backfill_timeout_s
                elif time.monotonic() > deadline:
                    raise SourceError(
                        f"back-fill of snapshot chunk {chunk.index} of {chunk.table}: the binlog did not reach the high "
                        f"watermark {hw} from {lw} within {self._backfill_timeout_s:.0f} s"
                    )
        finally:
            reader.close()

    # -- reading --------------------------------------------------------------------------------
    def _fill(self) -> None:
        """Submit chunks until ``parallelism`` are in flight (none while one is being emitted)."""
        assert self._pool is not None and self._chunks is not None
        while len(self._pending) < self.parallelism:
            chunk = next(self._chunks, None)
            if chunk is None:
                return
            self._pending.append(self._pool.submit(self._read_chunk, chunk))

    def read(self, max_events: int) -> list[DataChangeEvent]:
        """Up to ``max_events`` snapshot rows as ``Op.READ`` events (ts_ms 0), in chunk key order.

        Each event's ``position`` is the snapshot progress after it. Returns [] when done.

        Raises:
            SnapshotInterruptedError: a chunk reader lost its connection (restart from the position).
            SourceError: a value could not be converted, or a back-fill did not reach its hw.
        """
        out: list[DataChangeEvent] = []
        while len(out) < max_events and self._remaining:
            if self._current is None:
                try:
                    self._fill()  # the splitter's boundary queries run here
                except Exception as exc:
                    if is_connection_loss(exc):
                        raise SnapshotInterruptedError(table=self._remaining[0], after_key=None,
                                                       cause=f"{type(exc).__name__}: {exc}") from exc
                    raise
                if not self._pending:  # every chunk emitted
                    self._remaining = []
                    break
                fut = self._pending.popleft()
                try:
                    self._current = fut.result()
                except Exception as exc:
                    if is_connection_loss(exc):
                        raise SnapshotInterruptedError(table=self._remaining[0], after_key=None,
                                                       cause=f"{type(exc).__name__}: {exc}") from exc
                    raise
                self._index = 0
                if self._current.backfilled >= 0:
                    self.backfills += 1
                    self.backfilled_changes += self._current.backfilled
            res = self._current
            name = res.chunk.table
            table = res.table or self._schemas[name]
            take = res.rows[self._index:self._index + (max_events - len(out))]
            self._index += len(take)
            hw_file, hw_pos, tid, schema = res.hw.file, res.hw.pos, table.table_id, table.schema
            for key, row in take:
                end = list(key) if all(type(v) is int for v in key) else [encode_value(v) for v in key]
                out.append(DataChangeEvent(tid, Op.READ, None, row, schema, 0, self._position([name, [end, True, hw_file, hw_pos]])))
            if self._index >= len(res.rows):
                self._finish_chunk(res)
        return out

    def _finish_chunk(self, res: ChunkResult) -> None:
        name = res.chunk.table
        marks = self._marks.setdefault(name, TableMarks(self._keys[name]))
        end = (res.chunk.end,) if res.chunk.end is not None else None
        marks.append(ChunkMark(end, False, res.hw))
        self._marks_json = dict(self._marks_json)
        self._marks_json[name] = marks.to_json()
        self._count(-len(res.rows))
        self._current = None
        self.chunks_done += 1
        if end is None:  # the table's last chunk
            # a new list (never changed in place): earlier positions keep sharing the old one
            self._remaining = [t for t in self._remaining if t != name]

    def _position(self, current: list[Any] | None) -> dict[str, Any]:
        assert self.binlog_position is not None
        b = self.binlog_position
        return {"phase": "snapshot", "file": b.file, "pos": b.pos, "row": 0,
                "snapshot": {"tables": self._remaining, "after_key": None,
                             "marks": {"tables": self._marks_json, "current": current}}}

    def progress(self) -> SnapshotProgress:
        """The progress now (after the last event returned)."""
        return SnapshotProgress(tuple(self._remaining), None, {"tables": self._marks_json, "current": None})

    def binlog_filter(self) -> WatermarkFilter:
        """The watermarks of every table snapshotted (this run and before a restart)."""
        return WatermarkFilter(self._marks)


#: reads of one chunk before a definition changing under every one of them stops the snapshot.
_DDL_RETRIES = 20


def _execute_unless_gone(cur: Any, sql: str, params: list[Any], *, columns_may_change: bool = False) -> bool:
    """Run ``sql``; False if the table does not exist (dropped meanwhile) or, with
    ``columns_may_change``, if a column it names does not (``ALTER TABLE ... DROP/RENAME COLUMN``
    between reading the table's definition and this statement: the caller reads again with the
    new definition).

    Raises:
        pymysql.err.MySQLError: any other error (a missing column too, unless ``columns_may_change``).
    """
    try:
        cur.execute(sql, params)
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args else None
        if code == ER.NO_SUCH_TABLE or (columns_may_change and code == ER.BAD_FIELD_ERROR):
            return False
        raise
    return True


def _first(item: tuple[tuple[Any, ...], dict[str, Any]]) -> tuple[Any, ...]:
    return item[0]


def _apply(ev: DataChangeEvent, key_columns: tuple[str, ...], chunk: Chunk,
           rows: dict[tuple[Any, ...], dict[str, Any]]) -> int:
    """Apply one binlog change to a chunk's buffer (upsert / delete by key); 1 if it touched it."""
    if ev.op is Op.TRUNCATE:
        rows.clear()
        return 1
    touched = 0
    if ev.before is not None:
        key = tuple(ev.before[c] for c in key_columns)
        if chunk.contains(key):
            rows.pop(key, None)
            touched = 1
    if ev.after is not None and ev.op is not Op.DELETE:
        key = tuple(ev.after[c] for c in key_columns)
        if chunk.contains(key):
            rows[key] = dict(ev.after)
            touched = 1
    return touched
