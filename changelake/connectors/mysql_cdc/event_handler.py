"""Decode one binlog connection's events into change events, positions and refusals.

:class:`EventHandler` is the per-connection state machine of the binlog reader (the thread and
reconnects live in :mod:`~changelake.connectors.mysql_cdc.binlog`). It is fed the
mysql-replication events of one connection in order and hands out, through ``put``:

* ``("event", DataChangeEvent)`` - a change of a captured table, its ``position`` the position
  *after* it (transaction start + rows emitted, plus prepared XA transactions);
* ``("progress", Progress)`` - the position moved past events without changes.

Each event type is handled as :data:`~changelake.connectors.mysql_cdc.event_policy.EVENT_RULES`
says; refusals raise :class:`~changelake.connectors.mysql_cdc.errors.BinlogEventError`
subclasses naming the event type, binlog file:position and table.

Start: a handler resumes at ``start`` (a :class:`SourcePosition`). When prepared XA transactions
are pending, the connection starts earlier, at the first of them (:meth:`physical_start`); up to
``start`` only those groups are read (into the :class:`~changelake.connectors.mysql_cdc.xa.XaBook`),
everything else there was handed out before and is skipped.
"""

from __future__ import annotations

import logging
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import TableId
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc import _replication_fixes
from changelake.connectors.mysql_cdc.errors import (
    RowImageError,
    StatementFormatError,
    UnsupportedBinlogEventError,
    XaTransactionError,
)
from changelake.connectors.mysql_cdc.event_policy import Action, rule_for
from changelake.connectors.mysql_cdc.positions import BinlogPosition, PreparedXa, SourcePosition, TransactionTracker, binlog_file_index
from changelake.connectors.mysql_cdc.row_decoder import decoder_for, rows_bytes
from changelake.connectors.mysql_cdc.schema_tracker import SchemaTracker, TableSchema
from changelake.connectors.mysql_cdc.statements import (
    StatementKind,
    classify,
    describe,
    dml_target,
    mentioned_tables,
    savepoint_action,
    strip_comments,
    xa_id,
    xid_key,
)
from changelake.connectors.mysql_cdc.values import convert
from changelake.connectors.mysql_cdc.xa import HeldChange, XaBook

__all__ = ["EventHandler", "Progress", "missing_columns", "parse_truncate"]

log = logging.getLogger(__name__)

# MariaDB Gtid_log_event flags (sql/log_event.h)
_FL_STANDALONE = 0x01
_FL_TRANSACTIONAL = 0x04  # the group changed transactional tables only: no rolled-back row is logged
_FL_PREPARED_XA = 0x40

_IDENT = r"(?:`((?:[^`]|``)+)`|([\w$]+))"
_TRUNCATE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*TRUNCATE\s+(?:TABLE\s+)?" + _IDENT + r"(?:\s*\.\s*" + _IDENT + r")?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def parse_truncate(query: str, default_db: str | None) -> TableId | None:
    """The table of a ``TRUNCATE [TABLE] [db.]t`` statement, or None for any other statement."""
    m = _TRUNCATE.match(strip_comments(query))
    if not m:
        return None
    first = (m.group(1) or "").replace("``", "`") or m.group(2)
    second = (m.group(3) or "").replace("``", "`") or m.group(4)
    if second:
        return TableId(first, second)
    return TableId(default_db, first) if default_db else None


_FULL_BITMAPS: dict[int, bytes] = {}


def _full_bitmap(count: int) -> bytes:
    """The column bitmap of a full row image of ``count`` columns (unused high bits clear)."""
    found = _FULL_BITMAPS.get(count)
    if found is None:
        value = (1 << count) - 1
        found = _FULL_BITMAPS[count] = value.to_bytes((count + 7) // 8, "little")
    return found


def missing_columns(bitmap: bytes, count: int) -> list[int]:
    """Indexes (0-based) of the columns absent from a rows event's column bitmap of ``count`` bits."""
    return [i for i in range(count) if i // 8 >= len(bitmap) or not bitmap[i // 8] & (1 << (i % 8))]


class _Lib:
    """mysql-replication's event classes, imported once when the first handler is made (importing
    this module does not import the library; a per-event import statement cost ~8 % of the reader)."""

    RowsEvent: Any = None
    TableMapEvent: Any = None
    WriteRowsEvent: Any = None
    QueryEvent: Any = None
    XAPrepareEvent: Any = None
    XidEvent: Any = None

    def load(self) -> None:
        if self.RowsEvent is not None:
            return
        from pymysqlreplication.event import QueryEvent, XAPrepareEvent, XidEvent
        from pymysqlreplication.row_event import RowsEvent, TableMapEvent, WriteRowsEvent

        self.QueryEvent, self.XAPrepareEvent, self.XidEvent = QueryEvent, XAPrepareEvent, XidEvent
        self.TableMapEvent, self.WriteRowsEvent = TableMapEvent, WriteRowsEvent
        self.RowsEvent = RowsEvent  # last: the "loaded" mark


_LIB = _Lib()


@dataclass(frozen=True)
class Progress:
    """Reader progress outside transactions: resume position and the server position reached."""

    position: SourcePosition
    file: str
    next_pos: int


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


class EventHandler:
    """Turns the events of one binlog connection into change events (see module doc).

    Args:
        start: the position to resume at.
        captured: ``f(TableId) -> bool``.
        tracker: the schema tracker (kept across connections).
        put: receives ``("event", DataChangeEvent)`` / ``("progress", Progress)`` items.
    """

    def __init__(self, start: SourcePosition, captured: Callable[[TableId], bool], tracker: SchemaTracker,
                 put: Callable[[tuple[str, Any]], None], min_ts_ms: int = 0) -> None:
        #: ``timestamp`` startup: rows events older than this (ms) are counted but not handed out,
        #: until the first one at or after it (then 0 for good).
        self.min_ts_ms = min_ts_ms
        _LIB.load()
        self._start = start.binlog
        self._captured = captured
        self._tracker = tracker
        self._put = put
        self._xa = XaBook(start.xa_prepared)
        self._tx = TransactionTracker(start.binlog.file, start.binlog.pos, skip=start.binlog.row)
        first = self.physical_start()
        self._file = first.file
        self._replaying = (first.file, first.pos) != (start.binlog.file, start.binlog.pos)
        # current transaction group
        self._explicit = False  # BEGIN ... COMMIT (queries inside do not end it)
        self._xa_group: list[HeldChange] | None = None  # changes of a group that ends in XA PREPARE
        self._group_start = BinlogPosition(self._file, first.pos)
        self._replay_group: PreparedXa | None = None  # while replaying: the pending group being re-read
        #: events of a group that may still be rolled back (it changed a non-transactional table,
        #: or set a savepoint), handed out at its end; None: events go out as they come
        self._held: list[DataChangeEvent] | None = None
        self._savepoints: list[tuple[str, int]] = []  # (name, index into the held changes)

    # -- positions --------------------------------------------------------------------------
    def physical_start(self) -> BinlogPosition:
        """Where the connection must start: the resume point, or the first pending XA group before it."""
        first = self._start
        for x in self._xa.pending():
            if x.sort_key() < (binlog_file_index(first.file), first.pos):
                first = BinlogPosition(x.file, x.pos)
        return BinlogPosition(first.file, first.pos)

    def position(self) -> SourcePosition:
        """Where a new connection must resume so that nothing handed out is repeated or lost."""
        if self._replaying:
            return SourcePosition(self._start, None, self._xa.pending())
        return SourcePosition(self._tx.position(), None, self._xa.pending())

    def _progress(self, next_pos: int) -> None:
        self._put(("progress", Progress(self.position(), self._tx.file, next_pos)))

    # -- dispatch ---------------------------------------------------------------------------
    def handle(self, ev: Any) -> None:
        """Handle one event. Raises BinlogEventError subclasses (see module doc) or SourceError."""
        code = int(ev.packet.event_type)
        rule = rule_for(code)
        next_pos = int(ev.packet.log_pos or 0)
        start_pos = next_pos - int(ev.packet.event_size) if next_pos else 0
        if code == 0x04:  # ROTATE_EVENT
            self._on_rotate(str(ev.next_binlog), int(ev.position))
            return
        if rule.action is Action.STOP:
            raise UnsupportedBinlogEventError(event_type=rule.name, file=self._file, pos=start_pos, reason=rule.why)
        if code in (0x1B, 0x29):  # heartbeats
            if not self._tx.in_tx and not self._replaying:
                self._progress(next_pos or self._tx.tx_start)
            return
        if next_pos == 0:  # artificial event sent at connection start
            return
        if self._replaying and (binlog_file_index(self._file), start_pos) >= (binlog_file_index(self._start.file), self._start.pos):
            self._end_replay()
        if getattr(ev, "table_map_missing", False):
            raise UnsupportedBinlogEventError(
                event_type=rule.name, file=self._file, pos=start_pos,
                reason="rows event without a preceding table-map event (the reader started inside a transaction?)",
            )
        if self._replaying:
            self._replay(ev, code, start_pos)
            return
        if rule.action is Action.IGNORE:
            if not self._tx.in_tx:
                self._tx.end(next_pos)
                self._progress(next_pos)
            return
        self._deliver(ev, code, rule.name, start_pos, next_pos)

    def _on_rotate(self, file: str, pos: int) -> None:
        self._file = file
        self._tracker.clear_table_ids()
        if not self._replaying:
            self._tx.rotate(file, pos)
            self._progress(pos)

    def _end_replay(self) -> None:
        self._replaying = False
        if self._file != self._tx.file:
            self._tx.rotate(self._file, 4)

    # -- replay of prepared XA groups before the resume point -------------------------------
    def _replay(self, ev: Any, code: int, start_pos: int) -> None:
        RowsEvent, TableMapEvent, XAPrepareEvent = _LIB.RowsEvent, _LIB.TableMapEvent, _LIB.XAPrepareEvent
        if code in (0xA2, 0x21, 0x22):  # a group starts
            self._replay_group = self._xa.at(self._file, start_pos)
            self._xa_group = [] if self._replay_group is not None else None
            self._savepoints = []
            return
        if isinstance(ev, TableMapEvent):
            self._on_table_map(ev)
            return
        if self._replay_group is None or self._xa_group is None:
            return  # handed out before the resume point
        if isinstance(ev, RowsEvent):
            schema = self._rows_schema(ev, start_pos)
            if schema is not None:
                self._xa_group.extend(HeldChange(schema.table_id, op, b, a, schema.schema) for op, b, a in self._rows(ev, schema))
        elif isinstance(ev, _LIB.QueryEvent) and classify(_text(getattr(ev, "query", ""))) is StatementKind.SAVEPOINT:
            self._on_savepoint(_text(ev.query))
        elif isinstance(ev, XAPrepareEvent):
            self._xa.hold(self._replay_group, self._xa_group)
            self._replay_group, self._xa_group = None, None
            self._savepoints = []

    # -- normal reading ---------------------------------------------------------------------
    def _deliver(self, ev: Any, code: int, name: str, start_pos: int, next_pos: int) -> None:
        lib = _LIB
        QueryEvent, XAPrepareEvent, XidEvent = lib.QueryEvent, lib.XAPrepareEvent, lib.XidEvent
        RowsEvent, TableMapEvent = lib.RowsEvent, lib.TableMapEvent
        if code == 0xA2:  # MariaDB GTID
            flags = int(getattr(ev, "flags", 0) or 0)
            self._begin(start_pos, explicit=not flags & _FL_STANDALONE, xa=bool(flags & _FL_PREPARED_XA))
            if not flags & (_FL_STANDALONE | _FL_TRANSACTIONAL | _FL_PREPARED_XA) and self._held is None:
                # a mixed group: MariaDB logs its rolled-back rows too, then ROLLBACK [TO sp]
                self._held = []
        elif code in (0x21, 0x22):  # MySQL GTID / anonymous GTID: BEGIN or a DDL follows
            self._begin(start_pos, explicit=False, xa=False)
        elif isinstance(ev, QueryEvent):
            self._on_query(ev, name, start_pos, next_pos)
        elif isinstance(ev, XidEvent):
            if self._xa_group is not None:
                raise UnsupportedBinlogEventError(event_type=name, file=self._file, pos=start_pos,
                                                  reason="XA transaction ended by COMMIT instead of XA PREPARE")
            self._end(next_pos)
        elif isinstance(ev, XAPrepareEvent):
            self._on_xa_prepare(ev, name, start_pos, next_pos)
        elif isinstance(ev, TableMapEvent):
            self._on_table_map(ev)
        elif isinstance(ev, RowsEvent):
            schema = self._rows_schema(ev, start_pos)
            if schema is None:
                return  # another table: deliberately ignored
            if self._xa_group is not None:
                self._xa_group.extend(HeldChange(schema.table_id, op, b, a, schema.schema) for op, b, a in self._rows(ev, schema))
                return
            ts_ms = int(ev.timestamp) * 1000
            if self.min_ts_ms:
                if ts_ms < self.min_ts_ms:  # before the startup timestamp: counted, not handed out
                    for _ in range(len(ev.rows)):
                        self._tx.emit()
                    return
                self.min_ts_ms = 0
            for op, before, after in self._rows(ev, schema):
                if self._tx.emit():
                    self._emit(schema.table_id, op, before, after, schema.schema, ts_ms)
        elif not self._tx.in_tx:  # format description
            self._end(next_pos)

    def _begin(self, start_pos: int, *, explicit: bool, xa: bool) -> None:
        """A group starts (GTID event, BEGIN, XA START, a DDL); inside a group, flags accumulate."""
        if not self._tx.in_tx:
            self._group_start = BinlogPosition(self._file, start_pos)
            self._explicit, self._xa_group = False, None
            self._held, self._savepoints = None, []
        self._tx.begin(start_pos)
        self._explicit = self._explicit or explicit
        if xa and self._xa_group is None:
            self._xa_group = []

    def _end(self, next_pos: int) -> None:
        held, self._held, self._savepoints = self._held, None, []
        for event in held or ():
            self._put(("event", event))
        self._tx.end(next_pos)
        self._explicit = False
        self._xa_group = None
        self._progress(next_pos)

    def _emit(self, table: TableId, op: Op, before: Any, after: Any, schema: Any, ts_ms: int) -> None:
        pending = self._xa.pending() if self._xa.has_pending else ()
        tx = self._tx
        if pending:
            position = SourcePosition(tx.position(), None, pending).to_dict()
        else:  # the common case, without building a SourcePosition (same dict as its to_dict)
            position = {"phase": "binlog", "file": tx.file, "pos": tx.tx_start, "row": tx.emitted}
        event = DataChangeEvent(table, op, before, after, schema, ts_ms, position)
        if self._held is not None:
            self._held.append(event)
        else:
            self._put(("event", event))

    # -- savepoints and rollbacks (MariaDB logs the rolled-back rows of a mixed transaction) ----
    def _transactional(self, table: TableId) -> bool:
        hint = self._tracker.current(table)
        return hint.transactional if hint is not None else True

    def _on_savepoint(self, query: str) -> None:
        """``SAVEPOINT sp`` marks the held changes; ``ROLLBACK TO sp`` drops the changes of
        transactional tables after the mark (a non-transactional table's stayed, as in MySQL) and
        the later marks; ``RELEASE SAVEPOINT sp`` forgets the mark and the later ones."""
        action = savepoint_action(query)
        if action is None:
            return
        verb, name = action
        held: list[Any] | None = self._xa_group if self._xa_group is not None else self._held
        if held is None:
            if verb != "set":
                return  # a group of transactional tables only: nothing rolled back was logged
            held = self._held = []  # MySQL (no group flags): hold from the first savepoint on
        names = [n for n, _ in self._savepoints]
        if verb == "set":
            if name in names:  # a savepoint of the same name replaces the older one
                del self._savepoints[names.index(name)]
            self._savepoints.append((name, len(held)))
            return
        if name not in names:
            log.warning("'%s' names a savepoint set before the reader's start; ignored", describe(query))
            return
        i = len(names) - 1 - names[::-1].index(name)
        mark = self._savepoints[i][1]
        if verb == "release":
            del self._savepoints[i:]
            return
        held[mark:] = [c for c in held[mark:] if not self._transactional(c.table)]
        del self._savepoints[i + 1:]

    def _on_rollback(self) -> None:
        """A logged ROLLBACK: only the changes of non-transactional tables stayed."""
        held: list[Any] | None = self._xa_group if self._xa_group is not None else self._held
        if held is not None:
            held[:] = [c for c in held if not self._transactional(c.table)]

    def _on_query(self, ev: Any, name: str, start_pos: int, next_pos: int) -> None:
        query = _text(getattr(ev, "query", ""))
        kind = classify(query)
        default_db = _text(ev.schema) if getattr(ev, "schema", None) else None
        if kind is StatementKind.BEGIN:
            self._begin(start_pos, explicit=True, xa=False)
        elif kind in (StatementKind.COMMIT, StatementKind.ROLLBACK):
            if kind is StatementKind.ROLLBACK:
                self._on_rollback()  # the transactional tables' rows logged in the group go
            self._end(next_pos)
        elif kind is StatementKind.XA_START:
            self._begin(start_pos, explicit=True, xa=True)
        elif kind is StatementKind.SAVEPOINT:
            self._on_savepoint(query)
        elif kind in (StatementKind.XA_END, StatementKind.XA_PREPARE):
            pass  # inside the group; the prepare itself is the XA_PREPARE_LOG_EVENT
        elif kind in (StatementKind.XA_COMMIT, StatementKind.XA_ROLLBACK):
            self._on_xa_outcome(ev, kind, query, name, start_pos, next_pos)
        elif kind is StatementKind.DML:
            table = self._statement_table(query, default_db)
            if table is not None:
                raise StatementFormatError(event_type=name, file=self._file, pos=start_pos, table=str(table),
                                           statement=describe(query))
            if not self._explicit:
                self._end(next_pos)
        elif kind is StatementKind.ACCOUNT:
            if not self._explicit:
                self._end(next_pos)
        else:  # DDL: its own group
            if not self._tx.in_tx:
                self._begin(start_pos, explicit=False, xa=False)
            self._on_ddl(ev, query, default_db)
            if not self._explicit:
                self._end(next_pos)

    def _statement_table(self, query: str, default_db: str | None) -> TableId | None:
        """The captured table a statement-logged change may touch (its target first), else None."""
        target = dml_target(query, default_db)
        if target is not None and self._captured(target):
            return target
        for t in mentioned_tables(query, default_db):
            if self._captured(t):
                return t
        return None

    def _on_xa_prepare(self, ev: Any, name: str, start_pos: int, next_pos: int) -> None:
        changes = self._xa_group if self._xa_group is not None else []
        if ev.one_phase:  # MySQL: XA COMMIT ... ONE PHASE ends the group
            ts_ms = int(ev.timestamp) * 1000
            for c in changes:
                if self._tx.emit():
                    self._emit(c.table, c.op, c.before, c.after, c.schema, ts_ms)
        else:
            xid = xid_key(bytes(ev.xid_gtrid), bytes(ev.xid_bqual), int(ev.xid_format_id))
            self._xa.hold(PreparedXa(self._group_start.file, self._group_start.pos, xid), changes)
        self._end(next_pos)

    def _on_xa_outcome(self, ev: Any, kind: StatementKind, query: str, name: str, start_pos: int, next_pos: int) -> None:
        xid = xa_id(query)
        if xid is None:
            raise UnsupportedBinlogEventError(event_type=name, file=self._file, pos=start_pos,
                                              reason=f"cannot parse the XID of '{describe(query)}'")
        if kind is StatementKind.XA_COMMIT:
            changes = self._xa.changes(xid)
            if changes is None:
                raise XaTransactionError(
                    "XA COMMIT of a transaction whose prepared changes the reader does not hold (prepared before "
                    "the pipeline's start position?): re-snapshot the tables it changed",
                    xid=xid, event_type=name, file=self._file, pos=start_pos,
                )
            ts_ms = int(ev.timestamp) * 1000
            for c in changes:
                if self._tx.emit():
                    self._emit(c.table, c.op, c.before, c.after, c.schema, ts_ms)
        self._xa.forget(xid)  # XA ROLLBACK: the held changes are dropped, never published
        self._end(next_pos)

    def _on_table_map(self, ev: Any) -> None:
        table_id = TableId(_text(ev.schema), _text(ev.table))
        if self._captured(table_id):
            self._tracker.on_table_map(ev)

    def _on_ddl(self, ev: Any, query: str, default_db: str | None) -> None:
        truncated = parse_truncate(query, default_db)
        self._tracker.invalidate(None)
        if truncated is None or not self._captured(truncated):
            return
        if self._tx.emit():
            current = self._tracker.current(truncated)
            self._emit(truncated, Op.TRUNCATE, None, None, current.schema if current is not None else None,
                       int(ev.timestamp) * 1000)

    # -- rows ----------------------------------------------------------------------------------
    def _rows_schema(self, ev: Any, start_pos: int) -> TableSchema | None:
        """The schema of a captured table's rows event (None for other tables); checks full images."""
        schema = self._tracker.for_rows_event(ev)
        if schema is None or not self._captured(schema.table_id):
            return None
        WriteRowsEvent = _LIB.WriteRowsEvent
        count = int(ev.number_of_columns)
        full = _full_bitmap(max(count, len(schema.columns)))
        bitmap2 = getattr(ev, "columns_present_bitmap2", None)
        if bytes(ev.columns_present_bitmap) == full and (bitmap2 is None or bytes(bitmap2) == full):
            return schema  # full images (the common case)
        images = [("after" if isinstance(ev, WriteRowsEvent) else "before", ev.columns_present_bitmap)]
        if bitmap2 is not None:
            images.append(("after", bitmap2))
        names = [c.name for c in schema.columns]
        for image, bitmap in images:
            gone = missing_columns(bytes(bitmap), max(count, len(names)))
            if gone:
                raise RowImageError(
                    event_type=rule_for(int(ev.packet.event_type)).name, file=self._file, pos=start_pos,
                    table=str(schema.table_id), image=image,
                    missing=[names[i] if i < len(names) else f"#{i + 1}" for i in gone],
                )
        return schema

    def _rows(self, ev: Any, schema: TableSchema) -> list[tuple[Op, Any, Any]]:
        fast = _compiled_rows(ev, schema)
        if fast is not None:
            return fast
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        cols = schema.columns
        out: list[tuple[Op, Any, Any]] = []
        for row in ev.rows:
            if isinstance(ev, UpdateRowsEvent):
                out.append((Op.UPDATE, _values(cols, row["before_values"], row.get("before_none_sources", {})),
                            _values(cols, row["after_values"], row.get("after_none_sources", {}))))
            elif isinstance(ev, WriteRowsEvent):
                out.append((Op.CREATE, None, _values(cols, row["values"], row.get("none_sources", {}))))
            elif isinstance(ev, DeleteRowsEvent):
                out.append((Op.DELETE, _values(cols, row["values"], row.get("none_sources", {})), None))
        return out


#: rows events read by the compiled row decoder: exact class -> (images per row, op); subclasses
#: (MariaDB's compressed events) and PARTIAL_UPDATE_ROWS_EVENT stay with the library.
_COMPILED: dict[type, tuple[int, Op]] = {}
_ROWS_EVENT_TYPES = frozenset({23, 24, 25, 30, 31, 32})  # WRITE/UPDATE/DELETE_ROWS_EVENT V1 and V2
_UNREADABLE = (ValueError, IndexError, KeyError, TypeError, ArithmeticError, OverflowError, struct.error)


def _compiled_rows(ev: Any, schema: TableSchema) -> list[tuple[Op, Any, Any]] | None:
    """The rows of a full-image rows event read by :mod:`.row_decoder` (None: the library reads
    them; an event the decoder cannot read is left unread for the library, whose result stands)."""
    if not _COMPILED:
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        _COMPILED.update({WriteRowsEvent: (1, Op.CREATE), UpdateRowsEvent: (2, Op.UPDATE),
                          DeleteRowsEvent: (1, Op.DELETE)})
        for cls, per_image in _replication_fixes.fast_rows_classes().items():  # their lean subclasses
            _COMPILED[cls] = (per_image, Op.UPDATE if per_image == 2 else
                              (Op.CREATE if issubclass(cls, WriteRowsEvent) else Op.DELETE))
    kind = _COMPILED.get(type(ev))
    if kind is None or int(ev.event_type) not in _ROWS_EVENT_TYPES:
        return None
    decoder = decoder_for(ev.columns, schema.columns)
    if decoder is None or int(ev.number_of_columns) != decoder.columns:
        return None
    span = rows_bytes(ev)
    if span is None:
        return None
    per_row, op = kind
    try:
        images = decoder.images(span[0], span[1], span[2], per_row)
    except _UNREADABLE:
        return None
    if op is Op.CREATE:
        return [(op, None, a) for a in images]
    if op is Op.DELETE:
        return [(op, b, None) for b in images]
    return [(op, images[i], images[i + 1]) for i in range(0, len(images), 2)]


#: fast paths of _values: binlog values that are already the changelake value.
_AS_IS_INT, _AS_IS_STR, _RSTRIP = 1, 2, 3
_PLANS: dict[int, tuple[tuple[Any, ...], tuple[tuple[str, int, Any], ...]]] = {}


def _plan(cols: tuple[Any, ...]) -> tuple[tuple[str, int, Any], ...]:
    """Per column: (name, fast path, column). Signed integers other than TINYINT(1) arrive as
    the final int, VARCHAR/TEXT/ENUM as the final str, CHAR as str with trailing spaces to drop;
    everything else goes through :func:`values.convert`."""
    hit = _PLANS.get(id(cols))  # by identity: a schema's columns tuple is shared by its rows
    if hit is not None and hit[0] is cols:
        return hit[1]
    out = []
    for c in cols:
        fast = 0
        if c.kind in ("smallint", "mediumint", "int", "bigint") and not c.unsigned:
            fast = _AS_IS_INT
        elif c.kind == "tinyint" and not c.unsigned and c.width != 1:
            fast = _AS_IS_INT
        elif c.kind in ("varchar", "text", "enum"):
            fast = _AS_IS_STR
        elif c.kind == "char":
            fast = _RSTRIP
        out.append((c.name, fast, c))
    plan = tuple(out)
    if len(_PLANS) > 10_000:
        _PLANS.clear()
    _PLANS[id(cols)] = (cols, plan)
    return plan


def _values(cols: tuple[Any, ...], raw: dict[str, Any], none_sources: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        for name, fast, col in _plan(cols):
            v = raw.get(name)
            if fast == _AS_IS_INT and type(v) is int:
                out[name] = v
            elif fast == _AS_IS_STR and type(v) is str:
                out[name] = v
            elif fast == _RSTRIP and type(v) is str:
                out[name] = v.rstrip(" ")
            else:
                out[name] = convert(col, v, from_binlog=True, none_source=none_sources.get(name))
    except ValueError as exc:
        raise SourceError(str(exc)) from exc
    return out
