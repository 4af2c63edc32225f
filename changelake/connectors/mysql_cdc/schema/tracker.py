"""Table schemas of captured tables: from information_schema (snapshot) and table-map events (binlog).

* Snapshot path: :func:`load_table_schema` reads ``information_schema.COLUMNS`` and the primary
  key at snapshot time.
* Binlog path: :meth:`SchemaTracker.on_table_map` builds the schema **at each event** from the
  table-map event (``binlog_row_metadata=FULL``: names, signedness, charsets, ENUM/SET labels,
  primary key; nullability from the table-map's null bitmap), so rows written before a
  ``DROP COLUMN`` keep the dropped column and rows after it do not.

The binlog does not carry an integer's display width, so TINYINT(1) (-> BOOLEAN) is recognised
with a *hint* from information_schema, used only when the hint's type family agrees with the
binlog's. Hints are the table's current definition; they are re-read after any DDL statement on
the table, so a type change of the same column between an event and the time it is read could
use a newer display width (documented trade-off; only TINYINT(1) vs TINYINT(n) depends on it).

Dropped tables: a ``DROP TABLE`` (also a ``RENAME TABLE``'s old name, each table of a ``DROP
DATABASE``) carries the table's schema as last known (:meth:`SchemaTracker.last_known`), which
information_schema no longer has. The tracker keeps, per table and for the life of the reader,
its latest table-map schema (the binlog's own definition, wins) and the last definition
information_schema gave (fallback), seeded by :meth:`SchemaTracker.warm_up` of the captured
tables at reader start, so that a restarted Pipeline 1 that sees no row of a table before its
drop still knows it, and by the definitions the snapshot read (``known``), so that a table dropped
between the snapshot's consistent point and the reader's start still has one. Neither is forgotten on :meth:`SchemaTracker.invalidate`. A table created
and dropped while the reader was down (or dropped before it started) with no row in between is
unknowable: ``last_known`` returns None (formats that need the schema then refuse the event,
naming the table).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Sequence

from changelake.changelog.schema import Column, Schema, TableId
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.schema.columns import (
    INTEGER_BITS,
    MySqlColumn,
    column_from_information_schema,
    to_data_type,
)

__all__ = ["TableSchema", "SchemaTracker", "load_table_schema", "column_from_table_map", "list_tables"]

# mysql-replication / MySQL binlog field type codes (pymysqlreplication.constants.FIELD_TYPE)
_BINLOG_KINDS = {
    0: "decimal", 246: "decimal", 1: "tinyint", 2: "smallint", 9: "mediumint", 3: "int", 8: "bigint",
    4: "float", 5: "double", 16: "bit", 13: "year", 10: "date", 14: "date", 11: "time", 19: "time",
    12: "datetime", 18: "datetime", 7: "timestamp", 17: "timestamp", 245: "json", 247: "enum", 248: "set",
    255: "geometry",
}
_STRING_TYPES = {254: ("binary", "char"), 15: ("varbinary", "varchar"), 253: ("varbinary", "varchar"),
                 252: ("blob", "text"), 249: ("blob", "text"), 250: ("blob", "text"), 251: ("blob", "text")}


@dataclass(frozen=True)
class TableSchema:
    """Columns (MySQL view) and primary key of one table at one point in time."""

    table_id: TableId
    columns: tuple[MySqlColumn, ...]
    primary_key: tuple[str, ...]
    comment: str | None = None
    #: False for a table of a non-transactional engine (Aria, MyISAM, MEMORY...): its changes
    #: stay when the transaction rolls back (``information_schema.ENGINES.TRANSACTIONS``).
    transactional: bool = field(default=True, compare=False)
    schema: Schema = field(init=False, compare=False)

    def __post_init__(self) -> None:
        cols = [Column(c.name, to_data_type(c), c.comment) for c in self.columns]
        object.__setattr__(self, "schema", Schema(tuple(cols), self.primary_key, comment=self.comment))

    def column(self, name: str) -> MySqlColumn:
        for c in self.columns:
            if c.name == name:
                return c
        raise SourceError(f"table {self.table_id}: no column {name!r}")


_IS_COLUMNS = (
    "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE, "
    "DATETIME_PRECISION, CHARACTER_SET_NAME, COLUMN_KEY FROM information_schema.COLUMNS "
    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION"
)
_IS_COMMENTS = (
    "SELECT COLUMN_NAME, COLUMN_COMMENT FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
)
_IS_TABLE_COMMENT = "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
_IS_TRANSACTIONAL = (
    "SELECT e.TRANSACTIONS FROM information_schema.TABLES t JOIN information_schema.ENGINES e ON e.ENGINE = t.ENGINE "
    "WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s"
)
_IS_PK = (
    "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
    "AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION"
)


def _text(v: Any) -> Any:
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else v


def apply_type_options(col: MySqlColumn, tinyint1_as_boolean: bool) -> MySqlColumn:
    """``treat-tinyint1-as-boolean.enabled`` = false: TINYINT(1) stays TINYINT (its width is dropped)."""
    if not tinyint1_as_boolean and col.kind == "tinyint" and col.width == 1:
        return replace(col, width=None)
    return col


def load_table_schema(conn: Any, table_id: TableId, *, include_comments: bool = False,
                      tinyint1_as_boolean: bool = True) -> TableSchema:
    """Read a table's columns and primary key from information_schema.

    Args:
        conn: an open PyMySQL connection.
        table_id: the table.
        include_comments: also read the table and column comments (``include-comments.enabled``).
        tinyint1_as_boolean: ``treat-tinyint1-as-boolean.enabled`` (TINYINT(1) -> BOOLEAN).

    Raises:
        SourceError: the table does not exist.
    """
    comments: dict[str, str] = {}
    table_comment = None
    with conn.cursor() as cur:
        cur.execute(_IS_PK, (table_id.database, table_id.table))
        pk = tuple(str(_text(r[0])) for r in cur.fetchall())
        cur.execute(_IS_COLUMNS, (table_id.database, table_id.table))
        names = [d[0].upper() for d in cur.description]
        rows = [dict(zip(names, (_text(v) for v in r))) for r in cur.fetchall()]
        if include_comments and rows:
            cur.execute(_IS_COMMENTS, (table_id.database, table_id.table))
            comments = {str(_text(n)): str(_text(c)) for n, c in cur.fetchall() if c}
            cur.execute(_IS_TABLE_COMMENT, (table_id.database, table_id.table))
            found = cur.fetchone()
            table_comment = str(_text(found[0])) if found and found[0] else None
        cur.execute(_IS_TRANSACTIONAL, (table_id.database, table_id.table))
        engine = cur.fetchone()
        transactional = engine is None or str(_text(engine[0]) or "").upper() != "NO"
    if not rows:
        raise SourceError(f"table {table_id} not found in information_schema")
    cols = tuple(
        replace(apply_type_options(column_from_information_schema(r, primary_key=str(r["COLUMN_NAME"]) in pk),
                                   tinyint1_as_boolean), comment=comments.get(str(r["COLUMN_NAME"])))
        for r in rows
    )
    return TableSchema(table_id, cols, pk, table_comment, transactional)


def list_tables(conn: Any) -> list[TableId]:
    """All base tables of the server outside the system databases, sorted."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
            "AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"
        )
        return sorted(TableId(str(_text(d)), str(_text(t))) for d, t in cur.fetchall())


def column_from_table_map(col: Any, nullable: bool, hint: MySqlColumn | None = None) -> MySqlColumn:
    """Build a column from a mysql-replication table-map ``Column`` (FULL metadata).

    Args:
        col: ``pymysqlreplication.column.Column`` (type, name, unsigned, charset, fsp, bits...).
        nullable: from the table-map's null bitmap.
        hint: the same column from information_schema, used for facts the binlog lacks
            (integer display width) only when its type family agrees.
    """
    t = int(col.type)
    charset = getattr(col, "character_set_name", None)
    binary = charset == "binary" or getattr(col, "collation_name", None) == "binary"
    name = str(col.name)
    base: dict[str, Any] = {"name": name, "nullable": nullable, "unsigned": bool(getattr(col, "unsigned", False))}
    if t in _STRING_TYPES:
        kind = _STRING_TYPES[t][0 if binary else 1]
        base["kind"] = kind
        if kind == "binary":
            base["length"] = int(getattr(col, "max_length", 0) or 0) or None
        if not binary:
            base["charset"] = _mysql_charset(col)
        if hint is not None and hint.comment:
            base["comment"] = hint.comment
        return MySqlColumn(**base)
    found = _BINLOG_KINDS.get(t)
    if found is None:
        raise SourceError(f"column {name!r}: unsupported binlog column type {t}")
    kind = found
    base["kind"] = kind
    if hint is not None and hint.comment:
        base["comment"] = hint.comment
    if kind in INTEGER_BITS and hint is not None and hint.kind == kind:
        base["width"] = hint.width
    elif kind == "decimal":
        base["precision"], base["scale"] = int(col.precision), int(col.decimals)
    elif kind == "bit":
        base["precision"] = int(col.bits)
    elif kind in ("time", "datetime", "timestamp"):
        base["precision"] = int(getattr(col, "fsp", 0) or 0)
        if t in (7, 11, 12) and hint is not None and hint.kind == kind:
            # pre-5.6 types carry no fsp in the map; MariaDB's TIME(n)/DATETIME(n)/TIMESTAMP(n) of
            # that family (mysql56_temporal_format=OFF) use another format: the row decoder refuses them
            base["precision"] = hint.precision
    elif kind == "enum":
        base["labels"] = tuple((col.enum_values or [""])[1:])
        base["charset"] = _mysql_charset(col)
    elif kind == "set":
        base["labels"] = tuple(col.set_values or ())
        base["charset"] = _mysql_charset(col)
    if kind == "year":
        base["unsigned"] = False
    return MySqlColumn(**base)


def _mysql_charset(col: Any) -> str | None:
    collation = getattr(col, "collation_name", None)
    if collation:
        return str(collation).split("_", 1)[0]
    return None


class SchemaTracker:
    """Schemas of captured tables as of each binlog event.

    Args:
        hints_loader: ``f(table_id) -> TableSchema | None`` reading the table's current
            information_schema definition (None if the table no longer exists).
        known: definitions read before this tracker's reader started (the snapshot's, at its
            consistent point): a table's last-known schema while information_schema has none, so
            a table the snapshot read and that is dropped before the binlog reader starts (its
            warm-up finds nothing) still has one at its DROP. information_schema's definition at
            the warm-up and the binlog's table maps win over them.
    """

    def __init__(self, hints_loader: Callable[[TableId], TableSchema | None],
                 known: Iterable[TableSchema] = ()) -> None:
        self._load_hints = hints_loader
        self._hints: dict[TableId, TableSchema | None] = {}
        self._by_table_id: dict[int, TableSchema] = {}
        self._cache: dict[Any, TableSchema] = {}
        self._last: dict[TableId, TableSchema] = {}  # latest table-map schema per table
        #: latest schema information_schema gave per table (kept across invalidate: a dropped
        #: table's fallback schema when no table map of it was read)
        self._resolved: dict[TableId, TableSchema] = {}
        self._warmed: set[TableId] = set()
        self._seeded: set[TableId] = set()  # in _resolved from ``known``, not read by this tracker
        for schema in known:
            self._resolved[schema.table_id] = schema
            self._seeded.add(schema.table_id)

    def on_create(self, table_id: TableId, existed: bool) -> None:
        """A ``CREATE TABLE`` of ``table_id`` was read; ``existed``: a table of that name existed
        before it (``IF NOT EXISTS``: kept, its schemas stay). Otherwise the new table's definition
        is read from information_schema now (its last-known schema should it be dropped before
        any row of it is read; unknown when it is already gone, the reader lagging)."""
        if existed:
            return
        self._last.pop(table_id, None)
        self._resolved.pop(table_id, None)
        self._hints.pop(table_id, None)
        self._hint(table_id)

    def on_rename(self, table_id: TableId, schema: TableSchema | None) -> None:
        """A ``RENAME TABLE`` gave ``table_id`` the table whose last-known schema was ``schema``
        (the definition moves with it); unknown (None): its definition now, as :meth:`on_create`."""
        if schema is None:
            self.on_create(table_id, existed=False)
            return
        self._resolved.pop(table_id, None)
        self._last[table_id] = replace(schema, table_id=table_id)

    def on_drop(self, table_id: TableId) -> None:
        """The table was dropped (after its drop event was built): forget its schemas, so that a
        later table of the same name does not get them."""
        self._last.pop(table_id, None)
        self._resolved.pop(table_id, None)

    def warm_up(self, tables: Iterable[TableId]) -> None:
        """Read (once per table for the tracker's life) the information_schema definition of
        ``tables`` that no table map or lookup has resolved yet: the reader's captured tables at
        its start, so that a table dropped before any row of it is read has a last-known schema.
        Tables missing from information_schema are skipped (their schema stays unknown, or the
        one given as ``known``)."""
        for t in tables:
            if t not in self._warmed and t not in self._last and (t not in self._resolved or t in self._seeded):
                self._warmed.add(t)
                self._seeded.discard(t)
                self._hint(t)

    def known(self, tables: Iterable[TableId]) -> tuple[TableSchema, ...]:
        """The definitions this tracker holds for ``tables`` (the latest table map's, else the
        latest information_schema one it read or was given), for the ``known`` of a later
        tracker: a reader started again (after a re-read) when a table is already dropped still
        has its last-known schema at the drop."""
        out = []
        for t in tables:
            schema = self._last.get(t) or self._resolved.get(t)
            if schema is not None:
                out.append(schema)
        return tuple(out)

    def invalidate(self, table_id: TableId | None = None) -> None:
        """Forget information_schema hints (of one table, or all after an unparsed DDL)."""
        if table_id is None:
            self._hints.clear()
        else:
            self._hints.pop(table_id, None)
        self._cache.clear()  # schemas built with the old hints

    def current(self, table_id: TableId) -> TableSchema | None:
        """The table's schema as information_schema shows it now (None if the table is gone).

        Used for events without a table-map (TRUNCATE), which carry no columns of their own.
        """
        return self._hint(table_id)

    def last_known(self, table_id: TableId) -> TableSchema | None:
        """The table's schema as last seen, for a table that was just dropped: its latest
        table-map schema (the binlog's definition), else the latest information_schema definition
        this tracker read (a warm-up at start, a hint), else information_schema now; None when
        none of them knows the table (created and dropped while the reader was down)."""
        seen = self._last.get(table_id)
        if seen is not None:
            return seen
        resolved = self._resolved.get(table_id)
        return resolved if resolved is not None else self._hint(table_id)

    def _hint(self, table_id: TableId) -> TableSchema | None:
        if table_id not in self._hints:
            found = self._hints[table_id] = self._load_hints(table_id)
            if found is not None:
                self._resolved[table_id] = found
        return self._hints[table_id]

    def on_table_map(self, event: Any) -> TableSchema:
        """Build (and remember under its binlog table id) the schema of a TableMapEvent.

        Cached by the event's body bytes (``event.cache_key``, set by the table-map cache of
        :mod:`~changelake.connectors.mysql_cdc.binlog._replication_fixes`) or, without them, by a
        signature of its parsed columns; the cache is dropped with the hints after a DDL.
        """
        key = getattr(event, "cache_key", None)
        if key is not None:
            hit = self._cache.get(key)
            if hit is not None:
                self._by_table_id[int(event.table_id)] = hit
                self._last[hit.table_id] = hit
                return hit
        table_id = TableId(str(event.schema), str(event.table))
        bitmap: bytes = bytes(event.null_bitmask)
        signature = key if key is not None else (
            table_id, tuple(tuple(sorted((k, repr(v)) for k, v in c.data.items())) for c in event.columns), bitmap)
        cached = self._cache.get(signature)
        if cached is None:
            hint = self._hint(table_id)
            hints = {c.name: c for c in hint.columns} if hint else {}
            pk_idx: Sequence[int] = list(getattr(event.optional_metadata, "simple_primary_key_list", []) or [])
            names = [str(c.name) for c in event.columns]
            pk = tuple(names[i] for i in pk_idx if i < len(names))
            if not pk and hint is not None and all(k in names for k in hint.primary_key):
                pk = hint.primary_key
            cols = []
            if hint is not None and event.columns and any(c.name is None for c in event.columns):
                # binlog_row_metadata=MINIMAL: no names, signedness, charsets or ENUM/SET labels in
                # the map: information_schema's columns, by position (same count), the map's nullability
                if len(hint.columns) != len(event.columns):
                    raise SourceError(f"table {table_id}: the table map (without column metadata) has "
                                      f"{len(event.columns)} columns, information_schema {len(hint.columns)}")
                pk = hint.primary_key
                for i, h in enumerate(hint.columns):
                    cols.append(replace(h, nullable=bool(bitmap[i // 8] & (1 << (i % 8))) and h.name not in pk))
            for i, c in enumerate(event.columns if not cols else ()):
                nullable = bool(bitmap[i // 8] & (1 << (i % 8))) and str(c.name) not in pk
                cols.append(column_from_table_map(c, nullable, hints.get(str(c.name))))
            cached = TableSchema(table_id, tuple(cols), pk, hint.comment if hint is not None else None,
                                 hint.transactional if hint is not None else True)
            if len(self._cache) > 10000:
                self._cache.clear()  # _last stays: one entry per captured table, a dropped table's schema
            self._cache[signature] = cached
        self._by_table_id[int(event.table_id)] = cached
        self._last[cached.table_id] = cached
        return cached

    def for_rows_event(self, event: Any) -> TableSchema | None:
        """The schema of the table-map that preceded a rows event (None if it was not captured)."""
        return self._by_table_id.get(int(event.table_id))

    def clear_table_ids(self) -> None:
        """Binlog table ids are only valid within one binlog file (call on rotation)."""
        self._by_table_id.clear()
