"""Binlog reader: mysql-replication in a background thread, turning binlog events into DataChangeEvents.

The reader streams with file/position (``resume_stream=True``; ``is_mariadb`` left unset, which
is for MariaDB GTID positions) in *blocking* mode with a server heartbeat, so it stays registered
in ``SHOW SLAVE HOSTS`` (the server-id clash check relies on that) and wakes up at least once per
heartbeat to notice :meth:`BinlogReader.close`. Decoded items go through a bounded queue to
:meth:`BinlogReader.take`, which returns within its timeout.

Every event reaches :class:`~changelake.connectors.mysql_cdc.binlog.event_handler.EventHandler`
(nothing is filtered inside mysql-replication) and is handled as
:mod:`~changelake.connectors.mysql_cdc.binlog.event_policy` says: delivered, deliberately ignored, or
refused with a named error. Positions follow :mod:`~changelake.connectors.mysql_cdc.positions`.

Connection loss (server restart, network, a read silent for ``read_timeout_s``) is retried with
exponential back-off (0.5 s doubling up to 5 s) for up to ``connect_timeout_s``; each new
connection resumes at the handler's position (transaction start + rows handed out, plus prepared
XA groups), so nothing is lost or repeated. Past that time :meth:`BinlogReader.take` raises
:class:`~changelake.connectors.mysql_cdc.errors.BinlogConnectionLostError`. mysql-replication's
own silent reconnect is disabled (it resumes in the middle of a transaction, after its table maps).

Query text is classified by :mod:`~changelake.connectors.mysql_cdc.schema.statements` and never logged,
published or put into an error (account statements may carry passwords).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Callable, Iterable

from changelake.changelog.schema import TableId
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.binlog import _replication_fixes
from changelake.connectors.mysql_cdc.binlog import row_decoder
from changelake.connectors.mysql_cdc.binlog.compression import CompressedPayloadError
from changelake.connectors.mysql_cdc.errors import BinlogConnectionLostError, UnsupportedBinlogEventError
from changelake.connectors.mysql_cdc.binlog.event_handler import EventHandler, Progress, missing_columns, parse_truncate
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SourcePosition
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker

__all__ = ["BinlogReader", "Progress", "parse_truncate", "missing_columns", "is_connection_loss", "close_quietly"]

log = logging.getLogger(__name__)

#: pymysql / server error codes meaning "the connection is gone, try again": client-side
#: 2003 (cannot connect), 2006 (gone away), 2013 (lost during query), 2055 (lost, system error);
#: server-side 1053 (shutdown in progress), 1927 (connection killed), 1159/1161 (network timeouts).
_RETRYABLE_CODES = frozenset({2003, 2006, 2013, 2055, 1053, 1927, 1159, 1161})


class _StreamLost(ConnectionError):
    """mysql-replication tried to reconnect by itself; the reader reconnects instead."""


class _StreamEnded(ConnectionError):
    """The server ended the binlog stream (EOF packet) without being asked to."""


def close_quietly(closable: Any) -> None:
    """Close a connection or binlog stream that may already be dead; errors are ignored, None is
    nothing to close."""
    if closable is None:
        return
    try:
        closable.close()
    except Exception:  # noqa: BLE001 - closing a dead connection
        pass


def is_connection_loss(exc: BaseException) -> bool:
    """True for errors after which a new connection may succeed (server restart, network)."""
    import pymysql

    if isinstance(exc, (ConnectionError, pymysql.err.InterfaceError)):
        return True
    if isinstance(exc, pymysql.err.OperationalError):
        code = exc.args[0] if exc.args else None
        return code in _RETRYABLE_CODES
    return isinstance(exc, (OSError, EOFError))


class BinlogReader:
    """Stream the binlog from ``start`` and decode captured tables' changes.

    Args:
        connection: PyMySQL connection kwargs (host, port, user, password, connect_timeout).
        server_id: replica server id to register with (must be unique on the server).
        start: where to begin (transaction start + rows to skip, prepared XA groups); a bare
            :class:`BinlogPosition` means no prepared XA.
        captured: ``f(TableId) -> bool``, True for tables whose changes are emitted.
        tracker: schema tracker (table-map events -> schemas).
        heartbeat_s: heartbeat period asked from the server, seconds (capped at 1 s so that
            :meth:`close` returns promptly).
        queue_size: decoded items buffered ahead of :meth:`take`.
        connect_timeout_s: how long to keep reconnecting after a connection loss, seconds.
        read_timeout_s: a connection silent for this long (no event, no heartbeat) counts as lost.
        linger_s: after the first item, :meth:`take` waits up to this long (seconds) for more
            before returning fewer than ``max_items`` (as Kafka's ``linger.ms``).
        min_ts_ms: ``timestamp`` startup mode: changes with an older binlog timestamp (ms since the
            epoch) are skipped until the first one at or after it.
        existing: the captured tables that exist at ``start`` (a ``DROP DATABASE`` read later
            drops those of its database; see ``EventHandler``).
    """

    def __init__(
        self,
        connection: dict[str, Any],
        server_id: int,
        start: SourcePosition | BinlogPosition,
        captured: Callable[[TableId], bool],
        tracker: SchemaTracker,
        heartbeat_s: float = 1.0,
        queue_size: int = 20000,
        connect_timeout_s: float = 30.0,
        read_timeout_s: float = 15.0,
        min_ts_ms: int = 0,
        linger_s: float = 0.1,
        existing: Iterable[TableId] = (),
    ) -> None:
        self._existing = set(existing)  # kept across connections, as the tracker
        self._min_ts_ms = min_ts_ms
        self._linger_s = linger_s
        self._connection = connection
        self.server_id = server_id
        self._start = start if isinstance(start, SourcePosition) else SourcePosition(start)
        self._captured = captured
        self._tracker = tracker
        self._heartbeat_s = max(0.1, min(heartbeat_s, 1.0))
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = max(read_timeout_s, self._heartbeat_s * 4)
        self._queue: "queue.Queue[tuple[str, Any]]" = queue.Queue(maxsize=queue_size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: Any = None
        #: connections made to the binlog (1 + reconnects); for tests and metrics.
        self.connections = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the reader thread (it connects, and reconnects after a loss)."""
        _replication_fixes.apply()
        row_decoder.install_framer()
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
        self._close_stream()

    # -- consumer side ------------------------------------------------------------------------
    def take(self, max_items: int, timeout_s: float) -> list[tuple[str, Any]]:
        """Up to ``max_items`` decoded items, waiting at most ``timeout_s`` seconds for the first
        and then at most ``linger_s`` for more.

        Items are ``("event", DataChangeEvent)``, ``("progress", Progress)`` and
        ``("resnapshot", TableId)`` (an ``ALTER TABLE ... ADD`` column that MySQL filled in the
        existing rows without binlog rows: re-read the table after it) and ``("schemas",
        tuple[TableSchema, ...])`` (the captured tables' definitions at the reader's start, for
        the next reader's tracker: :meth:`EventHandler.warm_up`).

        Raises:
            SourceError: the reader thread failed (a BinlogEventError subclass for a refused
                event, BinlogConnectionLostError when reconnecting gave up; the cause is chained).
        """
        out: list[tuple[str, Any]] = []
        now = time.monotonic()
        deadline = now + max(0.0, timeout_s)
        linger_until: float | None = None
        get, get_nowait = self._queue.get, self._queue.get_nowait
        while len(out) < max_items:
            try:
                item = get_nowait()
            except queue.Empty:
                # wait for the first item until the timeout; after it, up to linger_s for more
                # (larger batches: fewer commits, each of which waits for the broker)
                now = time.monotonic()
                if linger_until is None and out:
                    linger_until = min(deadline, now + self._linger_s)
                remaining = (linger_until if linger_until is not None else deadline) - now
                if remaining <= 0:
                    break
                try:
                    item = get(timeout=remaining)
                except queue.Empty:
                    break
            if item[0] == "error":
                if out:  # hand out what came before the failure first
                    self._queue_front_error(item)
                    break
                raise item[1]
            out.append(item)
        return out

    def _queue_front_error(self, item: tuple[str, Any]) -> None:
        # the failure stays the next thing take() returns (the thread has stopped putting)
        with self._queue.mutex:
            self._queue.queue.appendleft(item)

    # -- reader thread --------------------------------------------------------------------------
    def _put(self, item: tuple[str, Any]) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def _open_stream(self, at: BinlogPosition) -> Any:
        from pymysqlreplication import BinLogStreamReader
        import pymysql

        made = {"stream": 0}

        def connect(**kwargs: Any) -> Any:
            if kwargs.get("db") != "information_schema":  # the binlog connection, not the control one
                made["stream"] += 1
                if made["stream"] > 1:
                    raise _StreamLost("binlog connection lost")
            return pymysql.connect(**kwargs)

        settings = dict(self._connection)
        settings["read_timeout"] = self._read_timeout_s
        self.connections += 1
        self._stream = BinLogStreamReader(
            connection_settings=settings,
            server_id=self.server_id,
            blocking=True,
            resume_stream=True,
            log_file=at.file,
            log_pos=at.pos,
            slave_heartbeat=self._heartbeat_s,
            report_slave=("changelake-cdc", "", "", 0),
            only_events=[*_replication_fixes.event_classes(), *row_decoder.framed_classes()],
            filter_non_implemented_events=False,
            pymysql_wrapper=connect,
            enable_logging=False,
        )
        return self._stream

    def _close_stream(self) -> None:
        close_quietly(self._stream)
        self._stream = None

    def _run(self) -> None:
        position = self._start
        lost_at: float | None = None
        attempts = 0
        delay = 0.5
        while not self._stop.is_set():
            handler = EventHandler(position, self._captured, self._tracker, self._put, self._min_ts_ms,
                                   existing=self._existing)
            try:
                handler.warm_up()  # the existing tables' schemas, for a drop before any row of them
                for ev in self._open_stream(handler.physical_start()):
                    if self._stop.is_set():
                        return
                    lost_at, attempts, delay = None, 0, 0.5
                    handler.handle(ev)
                if self._stop.is_set():
                    return
                raise _StreamEnded("the server ended the binlog stream")
            except Exception as exc:  # noqa: BLE001 - classified below, handed to the consumer
                if self._stop.is_set():
                    return
                position = handler.position()
                self._min_ts_ms = handler.min_ts_ms
                self._close_stream()
                if not is_connection_loss(exc):
                    self._fail(exc, position)
                    return
                now = time.monotonic()
                lost_at = now if lost_at is None else lost_at
                attempts += 1
                if now - lost_at >= self._connect_timeout_s:
                    err = BinlogConnectionLostError(position=str(position.binlog), attempts=attempts,
                                                    waited_s=now - lost_at, cause=f"{type(exc).__name__}: {exc}")
                    err.__cause__ = exc
                    self._put(("error", err))
                    return
                log.warning("binlog connection (server id %s) lost at %s (%s: %s); reconnecting in %.1f s",
                            self.server_id, position.binlog, type(exc).__name__, exc, delay)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, 5.0)

    def _fail(self, exc: Exception, position: SourcePosition) -> None:
        if isinstance(exc, SourceError):
            err: SourceError = exc
        elif isinstance(exc, CompressedPayloadError):
            err = UnsupportedBinlogEventError(event_type="compressed event", file=position.binlog.file,
                                              pos=position.binlog.pos, reason=f"undecodable compressed payload: {exc}")
        else:
            err = SourceError(f"binlog reader (server id {self.server_id}) failed after {position.binlog}: "
                              f"{type(exc).__name__}: {exc}")
        if err is not exc:
            err.__cause__ = exc
        self._put(("error", err))
