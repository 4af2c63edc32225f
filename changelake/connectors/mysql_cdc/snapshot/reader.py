"""Initial snapshot of the captured tables, without global locks (MariaDB consistent snapshot).

``START TRANSACTION WITH CONSISTENT SNAPSHOT`` on MariaDB sets the session status variables
``binlog_snapshot_file`` / ``binlog_snapshot_position`` to the binlog position that matches the
transaction's view exactly, so no ``FLUSH TABLES WITH READ LOCK`` is needed. Each captured table is
then read in primary-key order in chunks (``SELECT ... WHERE key > last ORDER BY key LIMIT
chunk_size``, fetched ``fetch_size`` rows at a time with an unbuffered cursor), emitting
``Op.READ`` events with ``ts_ms`` 0. Streaming then starts at the snapshot's binlog position.

Restart in the middle of the snapshot (consistency trade-off): the stored position keeps the
original snapshot's binlog position P1, the tables still to read and the last key read. On resume
a *new* consistent snapshot (at some later P2) reads only the remaining keys; the binlog is then
streamed from P1. Rows of the remaining part therefore reflect P2, and changes between P1 and P2
are replayed on top of them: applied by primary key (upsert semantics) the result converges to the
source state after P2, but a consumer may briefly see an older version of such a row, or an insert
both as ``r`` and as ``c``. This is the at-least-once-per-key behaviour of Flink CDC with
``scan.incremental.snapshot.backfill.skip=true``; an uninterrupted snapshot is exact. A table
without primary key is read in one pass and restarted from its beginning after a restart.

DDL on a table not read yet: the transaction holds a table's metadata lock only from its first
SELECT on, so a DDL of a captured table the snapshot has not reached commits freely. Each table's
definition is therefore read again right after its lock is taken (a one-row SELECT before its
first chunk), and its rows are read with the definition MariaDB reads them with: after an instant
``ALTER`` (drop, rename, add with a default MySQL fills in) the rows of the snapshot's point in the
new definition. A table the transaction cannot read (``ER_TABLE_DEF_CHANGED``: rebuilt, e.g. a
``MODIFY`` to a wider type, or dropped and created again) is read by a new consistent snapshot
(with the tables after it), as after a restart above; a table gone (``ER_NO_SUCH_TABLE``) is
skipped: its ``DROP`` / ``RENAME`` follows in the binlog. The binlog's rows events before the DDL
are decoded with their own table maps (the old definition), never with the snapshot's.

This is the default. ``scan.incremental.snapshot.enabled`` = true reads Flink CDC's way instead
(:mod:`~changelake.connectors.mysql_cdc.snapshot.incremental`): chunks at low/high watermarks,
in parallel, exact across restarts too, on any server with a binlog.
"""

from __future__ import annotations

import decimal
import logging
from typing import Any, Callable, Iterator, Mapping, Sequence

import pymysql
import pymysql.cursors
from pymysql.constants import ER

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import TableId
from changelake.connectors.errors import SourceError, SourceTableNotFoundError
from changelake.connectors.mysql_cdc.connection import close_quietly, is_connection_loss, text_connection
from changelake.connectors.mysql_cdc.errors import SnapshotInterruptedError
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SnapshotProgress, SourcePosition
from changelake.connectors.mysql_cdc.schema.tracker import TableSchema, load_table_schema
from changelake.connectors.mysql_cdc.snapshot.conditions import where_clause
from changelake.connectors.mysql_cdc.values import convert

log = logging.getLogger(__name__)

__all__ = ["SnapshotReader", "quote", "select_list", "read_table", "no_such_table"]

def quote(name: str) -> str:
    """Backtick-quote an identifier (embedded backticks doubled)."""
    return "`" + name.replace("`", "``") + "`"


def select_list(table: TableSchema) -> str:
    """Columns to select; FLOAT is widened exactly to DOUBLE (``f + 0e0``), since the text
    protocol prints FLOAT with only 6 significant digits while the binlog carries all 24 bits."""
    parts = []
    for c in table.columns:
        q = quote(c.name)
        parts.append(f"({q} + 0e0) AS {q}" if c.kind == "float" else q)
    return ", ".join(parts)


def read_table(connection: dict[str, Any], table_id: TableId) -> tuple[TableSchema, list[dict[str, Any]]]:
    """All rows of one table, converted exactly as the snapshot path converts them.

    For checks that compare MySQL with a sink (e.g. the lake). Not a consistent snapshot of
    several tables; rows come in no particular order.

    Args:
        connection: PyMySQL connection kwargs (host, port, user, password).
        table_id: the table.

    Returns:
        (table schema, rows as column name -> Python value).

    Raises:
        SourceTableNotFoundError: the table does not exist now (the server answers
            ``ER_NO_SUCH_TABLE``, 1146: dropped or renamed; its key state is empty).
        SourceError: information_schema has no columns of the table for another reason (e.g. the
            database does not exist, ``ER_BAD_DB_ERROR``, or the user may not see the table).
        pymysql.err.Error: the server cannot be reached, or another error.
    """
    conn = text_connection(connection)
    name = f"{quote(table_id.database or '')}.{quote(table_id.table)}"
    try:
        try:
            table = load_table_schema(conn, table_id)
        except SourceError as exc:  # no columns in information_schema: ask the server why
            _raise_if_no_such_table(conn, table_id, exc)
            raise
        with conn.cursor(pymysql.cursors.SSCursor) as cur:
            try:
                cur.execute(f"SELECT {select_list(table)} FROM {name}")
            except pymysql.err.ProgrammingError as exc:  # dropped since its columns were read
                _raise_if_no_such_table(conn, table_id, exc)
                raise
            rows = [{c.name: convert(c, v) for c, v in zip(table.columns, raw)} for raw in cur.fetchall_unbuffered()]
        return table, rows
    finally:
        conn.close()


# The server's error codes are pymysql's ``ER`` names (MySQL and MariaDB share them):
# ER.NO_SUCH_TABLE (1146): the database exists, the table does not;
# ER.TABLE_DEF_CHANGED (1412): InnoDB cannot read a table rebuilt or re-created after the transaction's read view.

#: new consistent snapshots for one table (each after ER_TABLE_DEF_CHANGED) before the snapshot gives up
_MAX_RESTARTS = 5


class _DefinitionChanged(Exception):
    """The snapshot transaction cannot read a table (``ER_TABLE_DEF_CHANGED``); cause: the error."""


def no_such_table(conn: Any, table_id: TableId) -> bool:
    """Whether a SELECT of the table run on ``conn`` in the table's database (``USE`` first: a
    missing database is not a dropped table) answers ``ER_NO_SUCH_TABLE`` (dropped or renamed)."""
    probe = f"SELECT 1 FROM {quote(table_id.database or '')}.{quote(table_id.table)} LIMIT 0"
    try:
        # the database must exist (else ER_BAD_DB_ERROR, 1049): a SELECT of a table of a missing
        # database answers ER_NO_SUCH_TABLE as well
        conn.select_db(table_id.database or "")
        with conn.cursor() as cur:
            cur.execute(probe)
    except pymysql.err.ProgrammingError as exc:
        return bool(exc.args and exc.args[0] == ER.NO_SUCH_TABLE)
    except pymysql.err.Error:
        return False
    return False


def _raise_if_no_such_table(conn: Any, table_id: TableId, cause: BaseException) -> None:
    """Raise :class:`SourceTableNotFoundError` if :func:`no_such_table`; else return, so the
    caller re-raises ``cause``."""
    if no_such_table(conn, table_id):
        raise SourceTableNotFoundError(
            f"MySQL table {table_id} does not exist (ER_NO_SUCH_TABLE): dropped or renamed", table=str(table_id)
        ) from cause


def _key_param(table: TableSchema, name: str, raw: Any) -> Any:
    kind = table.column(name).kind
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw)
    if kind in ("tinyint", "smallint", "mediumint", "int", "bigint", "year"):
        return int(raw)
    if kind == "decimal":
        return decimal.Decimal(str(raw))
    return raw


class SnapshotReader:
    """Reads the captured tables of one snapshot, resumable by :class:`SnapshotProgress`.

    Args:
        connection: PyMySQL connection kwargs.
        progress: tables still to read (``db.table``) and the last key read from the first one.
        chunk_size: rows per chunk query (``scan.incremental.snapshot.chunk.size``).
        fetch_size: rows per fetch round trip (``scan.snapshot.fetch.size``).
        binlog_position: the snapshot's original binlog position (None: taken from this snapshot).
        chunk_key_column: ``scan.incremental.snapshot.chunk.key-column`` per table (None: the
            primary key). With a primary key, rows are read in (column, primary key) order; without
            one, in ranges of the column's values (``k > last AND k <= boundary``, the boundary
            being the chunk-size-th value; NULLs in the first range).
        include_comments: ``include-comments.enabled``.
        tinyint1_as_boolean: ``treat-tinyint1-as-boolean.enabled``.
        conditions: Debezium's ``additional-conditions`` of an ad-hoc snapshot: ``db.table`` ->
            filter texts; only rows matching all of a table's filters are read (each filter is
            parsed and re-rendered by :mod:`~changelake.connectors.mysql_cdc.snapshot.conditions`).
        signal_id: the id of the ``execute-snapshot`` signal that gave ``conditions`` (named when a
            filter no longer fits its table's definition, changed since the signal).

    Raises (from :meth:`open`):
        SourceError: a configured chunk key column is not in its table, or is nullable in a table
            with a primary key.
        AdditionalConditionError: a filter of ``conditions`` is not a plain condition over its table's columns.
    """

    def __init__(
        self,
        connection: dict[str, Any],
        progress: SnapshotProgress,
        chunk_size: int,
        fetch_size: int,
        binlog_position: BinlogPosition | None = None,
        *,
        chunk_key_column: Callable[[TableId], str | None] = lambda _t: None,
        include_comments: bool = False,
        tinyint1_as_boolean: bool = True,
        conditions: Mapping[str, Sequence[str]] | None = None,
        signal_id: str = "?",
    ) -> None:
        self._connection = connection
        self._conditions = dict(conditions or {})
        self._signal_id = signal_id
        #: ``db.table`` -> the re-rendered filter (``(...) AND (...)``), set by open()
        self._where: dict[str, str] = {}
        self._chunk_key_column = chunk_key_column
        self._schema_options = {"include_comments": include_comments, "tinyint1_as_boolean": tinyint1_as_boolean}
        self._keys: dict[str, tuple[tuple[str, ...], bool]] = {}
        #: every table this snapshot reads (``db.table``).
        self.tables_read: list[str] = list(progress.tables)
        self._range_end: Any = None
        self.progress = progress
        self._chunk = chunk_size
        self._fetch = fetch_size
        self.binlog_position = binlog_position
        self._conn: Any = None
        self._rows: Iterator[tuple[TableSchema, tuple[Any, ...]]] | None = None
        self._schemas: dict[str, TableSchema] = {}
        #: tables whose metadata lock this transaction holds and whose definition was read after it
        self._locked: set[str] = set()
        #: ``db.table`` -> new consistent snapshots begun because the table could not be read
        self._restarts: dict[str, int] = {}

    @property
    def schemas(self) -> dict[str, TableSchema]:
        """``db.table`` -> the definition this snapshot read each table with (the latest one)."""
        return dict(self._schemas)

    @property
    def done(self) -> bool:
        return not self.progress.tables

    def open(self) -> BinlogPosition:
        """Start the consistent snapshot; returns the binlog position to stream from.

        Raises:
            SourceError: the server gives no snapshot binlog position (only MariaDB does), or a
                table to read has no definition for another reason than being gone (a table gone,
                ``ER_NO_SUCH_TABLE``, is skipped by :meth:`read`: see the module doc).
        """
        here = self._begin()
        if self.binlog_position is None:
            self.binlog_position = here
        for name in self.progress.tables:
            table_id = TableId.parse(name)
            try:
                self._describe(name, load_table_schema(self._conn, table_id, **self._schema_options))
            except SourceError:
                # gone (a resumed snapshot: dropped or renamed while the pipeline was stopped; its
                # DROP / RENAME is in the binlog from the snapshot's position): read() skips it
                if not no_such_table(self._conn, table_id):
                    raise
        return self.binlog_position

    def _begin(self) -> BinlogPosition:
        """Open the connection and start the consistent snapshot; returns its binlog position."""
        self._conn = text_connection(self._connection)
        self._locked = set()
        with self._conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
            status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
        file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
        if not file or not pos:
            self.close()
            raise SourceError(
                "the server reports no binlog_snapshot_file/binlog_snapshot_position after START TRANSACTION WITH "
                "CONSISTENT SNAPSHOT (a MariaDB feature); a lock-free snapshot is not possible on this server. "
                "Use 'scan.startup.mode' = 'latest-offset' or 'specific-offset' instead."
            )
        return BinlogPosition(file, int(pos))

    def _describe(self, name: str, table: TableSchema) -> None:
        """Take ``table`` as the definition ``name`` is read with (its order key and filter too)."""
        self._schemas[name] = table
        self._keys[name] = self._order_key(table)
        if self._conditions.get(name):
            # every query here runs with a parameter list: a literal % is written %% for PyMySQL
            self._where[name] = where_clause(self._conditions[name], [c.name for c in table.columns],
                                             signal_id=self._signal_id, table=name).replace("%", "%%")

    def _lock_and_describe(self, name: str) -> bool:
        """Before the first chunk of ``name`` in this transaction: take the table's metadata lock
        (a SELECT of one row: held until the transaction ends, so no DDL of the table commits
        while it is read), then read its definition again, which is now the one MariaDB reads its
        rows with. A DDL committed since :meth:`open` (the transaction held no lock on a table it
        had not read yet) thus cannot make the chunk SELECT name a dropped or renamed column
        (``ER_BAD_FIELD_ERROR``) or miss one added, whose values (an ``ADD COLUMN ... DEFAULT``)
        MariaDB shows in the snapshot's rows.

        Returns False if the table is gone (``ER_NO_SUCH_TABLE``: dropped or renamed after the
        snapshot's binlog position; the binlog from there carries its ``DROP TABLE`` / ``RENAME
        TABLE``, whose new name is read again then). Raises :class:`_DefinitionChanged` if the
        transaction cannot read the table (``ER_TABLE_DEF_CHANGED``: rebuilt or re-created since
        the snapshot began)."""
        table_id = TableId.parse(name)
        try:
            with self._conn.cursor() as cur:
                cur.execute(f"SELECT 1 FROM {quote(table_id.database or '')}.{quote(table_id.table)} LIMIT 1")
                cur.fetchall()
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if exc.args else None
            if code == ER.NO_SUCH_TABLE:
                return False
            if code == ER.TABLE_DEF_CHANGED:
                raise _DefinitionChanged(name) from exc
            raise
        old = self._keys.get(name)
        self._describe(name, load_table_schema(self._conn, table_id, **self._schema_options))
        after = self.progress.after_key
        if after is not None and old is not None and self._keys[name] != old:
            raise SourceError(
                f"the snapshot of table {name} resumes after key {after!r} of columns {list(old[0])}, but the "
                f"table is now read in order of {list(self._keys[name][0])} (its primary or chunk key changed); "
                "snapshot the table again from its beginning (a new pipeline state)"
            )
        self._locked.add(name)
        return True

    def _restart_transaction(self, name: str, cause: BaseException) -> None:
        """A new consistent snapshot for the tables still to read (the binlog is still streamed
        from the original position, as after a restart of the snapshot: see the module doc)."""
        restarts = self._restarts[name] = self._restarts.get(name, 0) + 1
        if restarts > _MAX_RESTARTS:
            raise SourceError(
                f"the lock-free snapshot cannot read table {name}: its definition changed since the snapshot "
                f"began (ER_TABLE_DEF_CHANGED) {restarts} times; pause the DDL on {name} "
                "and restart the pipeline, or use 'scan.incremental.snapshot.enabled' = 'true'"
            ) from cause
        log.warning("lock-free snapshot: table %s was rebuilt or re-created since the snapshot began (%s); "
                    "a new consistent snapshot reads it and the %d table(s) after it; the binlog is still "
                    "streamed from %s", name, cause, len(self.progress.tables), self.binlog_position)
        self._rows = None
        close_quietly(self._conn)
        self._begin()

    def stop_tables(self, names: Sequence[str]) -> list[str]:
        """Debezium's ``stop-snapshot``: drop ``names`` (``db.table``) from the tables still to
        read (the one in progress too); rows already returned stay. Returns the tables dropped."""
        dropped = [t for t in self.progress.tables if t in names]
        if not dropped:
            return []
        first = self.progress.tables[0]
        rest = tuple(t for t in self.progress.tables if t not in names)
        if first in dropped:
            self._rows = None
            self.progress = SnapshotProgress(rest, None)
        else:
            self.progress = SnapshotProgress(rest, self.progress.after_key)
        return dropped

    def _order_key(self, table: TableSchema) -> tuple[tuple[str, ...], bool]:
        """(columns the table is read in order of, ranged): ranged means a non-unique chunk key."""
        column = self._chunk_key_column(table.table_id)
        pk = table.primary_key
        if column is None:
            return pk, False
        if column not in {c.name for c in table.columns}:
            raise SourceError(
                f"'scan.incremental.snapshot.chunk.key-column' names column {column!r}, which table "
                f"{table.table_id} does not have (columns: {[c.name for c in table.columns]})"
            )
        if not pk:
            return (column,), True
        if column in pk:
            return (column,) + tuple(k for k in pk if k != column), False
        if table.column(column).nullable:
            raise SourceError(
                f"'scan.incremental.snapshot.chunk.key-column' column {column!r} of table {table.table_id} is "
                "nullable; a chunk key outside the primary key must be NOT NULL"
            )
        return (column,) + pk, False

    def close(self) -> None:
        """End the snapshot transaction and close the connection (idempotent)."""
        self._rows = None
        close_quietly(self._conn)
        self._conn = None

    def _range_rows(self, table: TableSchema, column: str, after: Any) -> Iterator[tuple[TableSchema, tuple[Any, ...]]]:
        """One range of a non-unique chunk key: ``(after, boundary]`` (plus NULLs in the first)."""
        name = f"{quote(table.table_id.database or '')}.{quote(table.table_id.table)}"
        q = quote(column)
        start = f"{q} > %s" if after is not None else f"{q} IS NOT NULL"
        cond = self._where.get(str(table.table_id))
        if cond:
            start = f"{start} AND {cond}"
        params: list[Any] = [_key_param(table, column, after)] if after is not None else []
        with self._conn.cursor() as cur:
            cur.execute(f"SELECT MAX(k) FROM (SELECT {q} AS k FROM {name} WHERE {start} ORDER BY {q} "
                        f"LIMIT {int(self._chunk)}) AS chunk", params)
            found = cur.fetchone()
        boundary = found[0] if found else None
        self._range_end = boundary
        if boundary is None and after is not None:
            return
        if boundary is None:
            where, params = f"{q} IS NULL" + (f" AND {cond}" if cond else ""), []
        else:
            where = (f"({q} IS NULL OR {q} <= %s)" + (f" AND {cond}" if cond else "") if after is None
                     else f"{start} AND {q} <= %s")
            params = params + [_key_param(table, column, boundary)]
        yield from self._stream(table, f"SELECT {select_list(table)} FROM {name} WHERE {where}", params)

    def _chunk_rows(self, table: TableSchema, after_key: tuple[Any, ...] | None) -> Iterator[tuple[TableSchema, tuple[Any, ...]]]:
        pk, ranged = self._keys.get(str(table.table_id), (table.primary_key, False))
        if ranged:
            yield from self._range_rows(table, pk[0], after_key[0] if after_key else None)
            return
        sql = f"SELECT {select_list(table)} FROM {quote(table.table_id.database or '')}.{quote(table.table_id.table)}"
        params: list[Any] = []
        wheres = [self._where[str(table.table_id)]] if self._where.get(str(table.table_id)) else []
        if pk:
            if after_key is not None:
                # (k1, k2) > (v1, v2) spelled out so that the index is used on every server
                ors = []
                for i in range(len(pk)):
                    terms = [f"{quote(pk[j])} = %s" for j in range(i)] + [f"{quote(pk[i])} > %s"]
                    params += [_key_param(table, pk[j], after_key[j]) for j in range(i + 1)]
                    ors.append("(" + " AND ".join(terms) + ")")
                wheres.insert(0, "(" + " OR ".join(ors) + ")")
        if wheres:
            sql += " WHERE " + " AND ".join(wheres)
        if pk:
            sql += " ORDER BY " + ", ".join(quote(k) for k in pk) + f" LIMIT {int(self._chunk)}"
        yield from self._stream(table, sql, params)

    def _stream(self, table: TableSchema, sql: str, params: list[Any]) -> Iterator[tuple[TableSchema, tuple[Any, ...]]]:
        """The rows of one chunk query, fetched ``fetch_size`` at a time with an unbuffered cursor."""
        cur = self._conn.cursor(pymysql.cursors.SSCursor)
        try:
            cur.execute(sql, params)
            while True:
                batch = cur.fetchmany(self._fetch)
                if not batch:
                    break
                for row in batch:
                    yield table, row
        finally:
            cur.close()

    def read(self, max_events: int) -> list[DataChangeEvent]:
        """Up to ``max_events`` snapshot rows as ``Op.READ`` events (ts_ms 0), in primary-key order.

        Each event's ``position`` is the snapshot progress after it. Returns [] when done.
        """
        out: list[DataChangeEvent] = []
        assert self.binlog_position is not None, "open() first"
        while len(out) < max_events and self.progress.tables:
            name = self.progress.tables[0]
            if self._rows is None:
                try:
                    if name not in self._locked and not self._lock_and_describe(name):
                        log.info("lock-free snapshot: table %s is gone (dropped or renamed since the snapshot "
                                 "began); its DROP/RENAME follows in the binlog", name)
                        self.progress = SnapshotProgress(self.progress.tables[1:], None)
                        continue
                except _DefinitionChanged as exc:
                    self._restart_transaction(name, exc.__cause__ or exc)
                    continue
                except Exception as exc:
                    if not is_connection_loss(exc):
                        raise
                    raise SnapshotInterruptedError(table=name, after_key=self.progress.after_key,
                                                   cause=f"{type(exc).__name__}: {exc}") from exc
                self._rows = self._chunk_rows(self._schemas[name], self.progress.after_key)
                self._chunk_count = 0
            table = self._schemas[name]
            key_columns, ranged = self._keys.get(name, (table.primary_key, False))
            try:
                row_item = next(self._rows, None)
            except Exception as exc:
                if (isinstance(exc, pymysql.err.MySQLError) and exc.args and exc.args[0] == ER.TABLE_DEF_CHANGED
                        and self._chunk_count == 0 and self.progress.after_key is None):
                    self._restart_transaction(name, exc)  # (the lock's probe saw it first, as a rule)
                    continue
                if not is_connection_loss(exc):
                    raise
                self._rows = None
                raise SnapshotInterruptedError(table=name, after_key=self.progress.after_key,
                                               cause=f"{type(exc).__name__}: {exc}") from exc
            if row_item is None:
                self._rows = None
                if ranged:
                    if self._range_end is None:
                        self.progress = SnapshotProgress(self.progress.tables[1:], None)  # table finished
                    else:  # the range is done: the next one starts after its boundary
                        self.progress = SnapshotProgress(self.progress.tables, (self._range_end,))
                elif not key_columns or self._chunk_count < self._chunk:
                    self.progress = SnapshotProgress(self.progress.tables[1:], None)  # table finished
                continue
            _, raw = row_item
            self._chunk_count += 1
            try:
                after = {c.name: convert(c, v) for c, v in zip(table.columns, raw)}
            except ValueError as exc:
                raise SourceError(f"snapshot of {name}: {exc}") from exc
            if key_columns and not ranged:
                idx = {c.name: i for i, c in enumerate(table.columns)}
                key = tuple(raw[idx[k]] for k in key_columns)
                self.progress = SnapshotProgress(self.progress.tables, key)
            position = SourcePosition(self.binlog_position, self.progress).to_dict()
            out.append(DataChangeEvent(table.table_id, Op.READ, None, after, table.schema, 0, position))
        return out
