"""Binlog reader: mysql-replication in a background thread, turning row events into DataChangeEvents.

The reader streams with file/position (``resume_stream=True``; ``is_mariadb`` left unset, which
is for MariaDB GTID positions) in *blocking* mode with a server heartbeat, so it stays registered
in ``SHOW SLAVE HOSTS`` (the server-id clash check relies on that) and wakes up at least once per
heartbeat to notice :meth:`BinlogReader.close`. Decoded items go through a bounded queue to
:meth:`BinlogReader.take`, which returns within its timeout.

Positions follow :mod:`changelake.connectors.mysql_cdc.positions`: each event carries the start of
its transaction plus the number of rows emitted from it so far; a reader started at
``BinlogPosition(file, pos, row=n)`` skips the first ``n`` rows of that transaction.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import TableId
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc import _replication_fixes
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SourcePosition, TransactionTracker
from changelake.connectors.mysql_cdc.schema_tracker import SchemaTracker, TableSchema
from changelake.connectors.mysql_cdc.values import convert

__all__ = ["BinlogReader", "Progress", "parse_truncate"]

log = logging.getLogger(__name__)

_IDENT = r"(?:`((?:[^`]|``)+)`|([\w$]+))"
_TRUNCATE = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*TRUNCATE\s+(?:TABLE\s+)?" + _IDENT + r"(?:\s*\.\s*" + _IDENT + r")?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)


def parse_truncate(query: str, default_db: str | None) -> TableId | None:
    """The table of a ``TRUNCATE [TABLE] [db.]t`` statement, or None for any other statement."""
    m = _TRUNCATE.match(query)
    if not m:
        return None
    first = (m.group(1) or "").replace("``", "`") or m.group(2)
    second = (m.group(3) or "").replace("``", "`") or m.group(4)
    if second:
        return TableId(first, second)
    return TableId(default_db, first) if default_db else None


@dataclass(frozen=True)
class Progress:
    """Reader progress outside transactions: resume position and the server position reached."""

    position: BinlogPosition
    file: str
    next_pos: int


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


class BinlogReader:
    """Stream the binlog from ``start`` and decode captured tables' changes.

    Args:
        connection: PyMySQL connection kwargs (host, port, user, password, connect_timeout).
        server_id: replica server id to register with (must be unique on the server).
        start: where to begin (transaction start + rows to skip).
        captured: ``f(TableId) -> bool``, True for tables whose changes are emitted.
        tracker: schema tracker (table-map events -> schemas).
        heartbeat_s: heartbeat period asked from the server, seconds (capped at 1 s so that
            :meth:`close` returns promptly).
        queue_size: decoded items buffered ahead of :meth:`take`.
    """

    def __init__(
        self,
        connection: dict[str, Any],
        server_id: int,
        start: BinlogPosition,
        captured: Callable[[TableId], bool],
        tracker: SchemaTracker,
        heartbeat_s: float = 1.0,
        queue_size: int = 20000,
    ) -> None:
        self._connection = connection
        self.server_id = server_id
        self._start = start
        self._captured = captured
        self._tracker = tracker
        self._heartbeat_s = max(0.1, min(heartbeat_s, 1.0))
        self._queue: "queue.Queue[tuple[str, Any]]" = queue.Queue(maxsize=queue_size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: Any = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Connect and start the reader thread."""
        _replication_fixes.apply()
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import (
            FormatDescriptionEvent,
            GtidEvent,
            HeartbeatLogEvent,
            MariadbBinLogCheckPointEvent,
            MariadbGtidEvent,
            MariadbGtidListEvent,
            QueryEvent,
            RotateEvent,
            XidEvent,
        )
        from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

        settings = dict(self._connection)
        self._stream = BinLogStreamReader(
            connection_settings=settings,
            server_id=self.server_id,
            blocking=True,
            resume_stream=True,
            log_file=self._start.file,
            log_pos=self._start.pos,
            slave_heartbeat=self._heartbeat_s,
            report_slave=("changelake-cdc", "", "", 0),
            only_events=[
                WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, TableMapEvent, QueryEvent, XidEvent, RotateEvent,
                MariadbGtidEvent, GtidEvent, HeartbeatLogEvent, FormatDescriptionEvent, MariadbGtidListEvent,
                MariadbBinLogCheckPointEvent,
            ],
        )
        self._thread = threading.Thread(target=self._run, name=f"mysql-cdc-binlog-{self.server_id}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread and the connections (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            # unblock a full queue
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=self._heartbeat_s * 5 + 5)
            self._thread = None
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception:  # noqa: BLE001 - closing a dead connection
                pass
            self._stream = None

    # -- consumer side ------------------------------------------------------------------------
    def take(self, max_items: int, timeout_s: float) -> list[tuple[str, Any]]:
        """Up to ``max_items`` decoded items, waiting at most ``timeout_s`` seconds for the first.

        Items are ``("event", DataChangeEvent)`` and ``("progress", Progress)``.

        Raises:
            SourceError: the reader thread failed (the cause is chained).
        """
        out: list[tuple[str, Any]] = []
        deadline = time.monotonic() + max(0.0, timeout_s)
        while len(out) < max_items:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=remaining) if remaining > 0 and not out else self._queue.get_nowait()
            except queue.Empty:
                break
            if item[0] == "error":
                raise item[1]
            out.append(item)
        return out

    # -- reader thread --------------------------------------------------------------------------
    def _put(self, item: tuple[str, Any]) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        tracker = TransactionTracker(self._start.file, self._start.pos, skip=self._start.row)
        try:
            for ev in self._stream:
                if self._stop.is_set():
                    break
                self._handle(ev, tracker)
        except Exception as exc:  # noqa: BLE001 - handed to the consumer
            if not self._stop.is_set():
                err = exc if isinstance(exc, SourceError) else SourceError(
                    f"binlog reader (server id {self.server_id}) failed at {tracker.position()}: {exc}"
                )
                if err is not exc:
                    err.__cause__ = exc
                self._put(("error", err))

    def _handle(self, ev: Any, tx: TransactionTracker) -> None:
        from pymysqlreplication.event import GtidEvent, HeartbeatLogEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
        from pymysqlreplication.row_event import RowsEvent, TableMapEvent

        next_pos = int(ev.packet.log_pos or 0)
        start_pos = next_pos - int(ev.packet.event_size) if next_pos else 0
        if isinstance(ev, RotateEvent):
            tx.rotate(str(ev.next_binlog), int(ev.position))
            self._tracker.clear_table_ids()
            self._progress(tx, tx.file, int(ev.position))
            return
        if isinstance(ev, HeartbeatLogEvent):
            if not tx.in_tx:
                self._progress(tx, tx.file, next_pos or tx.tx_start)
            return
        if next_pos == 0:  # artificial event sent at connection start
            return
        if isinstance(ev, (MariadbGtidEvent, GtidEvent)):
            tx.begin(start_pos)
            return
        if isinstance(ev, QueryEvent):
            query = _text(ev.query).strip()
            upper = query.upper()
            if upper == "BEGIN" or upper.startswith("XA START"):
                tx.begin(start_pos)
                return
            if upper == "COMMIT" or upper.startswith("XA COMMIT") or upper == "ROLLBACK":
                tx.end(next_pos)
                self._progress(tx, tx.file, next_pos)
                return
            tx.begin(start_pos)  # a DDL statement is its own transaction
            self._on_ddl(ev, query, tx)
            tx.end(next_pos)
            self._progress(tx, tx.file, next_pos)
            return
        if isinstance(ev, XidEvent):
            tx.end(next_pos)
            self._progress(tx, tx.file, next_pos)
            return
        if isinstance(ev, TableMapEvent):
            table_id = TableId(_text(ev.schema), _text(ev.table))
            if self._captured(table_id):
                self._tracker.on_table_map(ev)
            return
        if isinstance(ev, RowsEvent):
            schema = self._tracker.for_rows_event(ev)
            if schema is None or not self._captured(schema.table_id):
                return
            self._on_rows(ev, schema, tx)
            return
        # format description, GTID list, checkpoint: outside transactions
        if not tx.in_tx:
            tx.end(next_pos)
            self._progress(tx, tx.file, next_pos)

    def _progress(self, tx: TransactionTracker, file: str, next_pos: int) -> None:
        self._put(("progress", Progress(tx.position(), file, next_pos)))

    def _on_ddl(self, ev: Any, query: str, tx: TransactionTracker) -> None:
        default_db = _text(ev.schema) if ev.schema else None
        truncated = parse_truncate(query, default_db)
        self._tracker.invalidate(None)
        if truncated is None or not self._captured(truncated):
            return
        if tx.emit():
            current = self._tracker.current(truncated)
            event = DataChangeEvent(
                table=truncated, op=Op.TRUNCATE, before=None, after=None,
                schema=current.schema if current is not None else None,
                ts_ms=int(ev.timestamp) * 1000, position=SourcePosition(tx.position()).to_dict(),
            )
            self._put(("event", event))

    def _on_rows(self, ev: Any, schema: TableSchema, tx: TransactionTracker) -> None:
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        ts_ms = int(ev.timestamp) * 1000
        cols = schema.columns
        for row in ev.rows:
            if not tx.emit():
                continue
            if isinstance(ev, UpdateRowsEvent):
                before = self._values(cols, row["before_values"], row.get("before_none_sources", {}))
                after = self._values(cols, row["after_values"], row.get("after_none_sources", {}))
                op = Op.UPDATE
            elif isinstance(ev, WriteRowsEvent):
                before, after, op = None, self._values(cols, row["values"], row.get("none_sources", {})), Op.CREATE
            elif isinstance(ev, DeleteRowsEvent):
                before, after, op = self._values(cols, row["values"], row.get("none_sources", {})), None, Op.DELETE
            else:
                continue
            self._put((
                "event",
                DataChangeEvent(schema.table_id, op, before, after, schema.schema, ts_ms,
                                SourcePosition(tx.position()).to_dict()),
            ))

    @staticmethod
    def _values(cols: tuple[Any, ...], raw: dict[str, Any], none_sources: dict[str, Any]) -> dict[str, Any]:
        try:
            return {c.name: convert(c, raw.get(c.name), from_binlog=True, none_source=none_sources.get(c.name)) for c in cols}
        except ValueError as exc:
            raise SourceError(str(exc)) from exc
