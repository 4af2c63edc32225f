"""Binlog reader: mysql-replication in a background thread turning binlog events into DataChangeEvents,
in this process (:class:`BinlogReader`) or in a child process (:class:`ProcessBinlogReader`, below).

The reader streams with file/position (``resume_stream=True``; ``is_mariadb`` left unset, which
is for MariaDB GTID positions) in *blocking* mode with a server heartbeat, so it stays registered
in ``SHOW SLAVE HOSTS`` (the server-id clash check relies on that) and wakes up at least once per
heartbeat to notice :meth:`BinlogReader.close`. After the library's first event the thread reads
the stream's packets itself (:func:`stream_events`: in chunks, no ``fetchone`` per packet).
Decoded items go to :meth:`BinlogReader.take`, which returns within its timeout, through a
bounded queue of batches: the thread hands over what it decoded every ``batch_items`` items and
whenever it is about to wait for the server (so a batch never holds an item back), one queue
``put`` per batch instead of one per item.

Every event reaches :class:`~changelake.connectors.mysql_cdc.binlog.event_handler.EventHandler`
(nothing is filtered inside mysql-replication) and is handled as
:mod:`~changelake.connectors.mysql_cdc.binlog.event_policy` says: delivered, deliberately ignored, or
refused with a named error. Positions follow :mod:`~changelake.connectors.mysql_cdc.positions`.

Connection loss (server restart, network, a read silent for ``read_timeout_s``) is retried with
exponential back-off (0.5 s doubling up to 5 s) for up to ``connect_timeout_s`` (what counts as a
loss: :func:`~changelake.connectors.mysql_cdc.connection.is_connection_loss`); each new
connection resumes at the handler's position (transaction start + rows handed out, plus prepared
XA groups), so nothing is lost or repeated. Past that time :meth:`BinlogReader.take` raises
:class:`~changelake.connectors.mysql_cdc.errors.BinlogConnectionLostError`. mysql-replication's
own silent reconnect is disabled (it resumes in the middle of a transaction, after its table maps).

Query text is classified by :mod:`~changelake.connectors.mysql_cdc.schema.statements` and never logged,
published or put into an error (account statements may carry passwords).

In a worker process (decoding runs beside the writer instead of sharing its GIL),
:class:`ProcessBinlogReader` has the interface of :class:`BinlogReader` (``start``, ``take``,
``close``, ``connections``) and runs an unchanged ``BinlogReader`` (same
event policy, positions, reconnects, refusals) in a child process started with ``spawn``. The
child sends what its ``take()`` returns, in batches, through a pipe; items are pickled once per
batch (a schema shared by a batch's events is written once), a change event as the tuple of its
fields (:func:`_to_wire`, rebuilt by :func:`_from_wire`): pickling a ``DataChangeEvent`` goes
through ``__reduce_ex__`` and its instance dict, a tuple does not (2,000 sysbench events, quiet
machine: 3.8 → 1.4 µs per event to pickle, convert included, 3.6 → 2.7 µs to unpickle and rebuild). The pipe's buffer bounds what is in
flight: a slow writer blocks the child's ``send``, so memory stays bounded.

Errors raised in the child (a refused event, a lost connection) are sent as the next item and
raised by :meth:`take` after the items before them, as with the thread reader; connector errors
pickle with their fields (see :class:`~changelake.connectors.errors.ConnectorError`), other
exceptions arrive as :class:`~changelake.connectors.errors.SourceError` naming the type and text.
If the child dies, :meth:`take` raises SourceError with its exit code. If the parent dies
(``kill -9``), the child notices within 0.1 s (it watches its parent's pid) and exits, closing
its binlog connection, so that the restarted pipeline may register the same server id.

Why a process: a profile of Pipeline 1 (py-spy, sysbench binlog) shows the binlog thread
(socket, mysql-replication's row parsing, value conversion) at about two thirds of the CPU and the
Kafka writer (JSON encoding, produce) at one third, serialised by the GIL.
"""

from __future__ import annotations

import collections
import logging
import multiprocessing
import queue
import signal
import threading
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Iterator

from changelake.changelog.event import DataChangeEvent
from changelake.changelog.schema import TableId
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.binlog import _replication_fixes
from changelake.connectors.mysql_cdc.binlog import row_decoder
from changelake.connectors.mysql_cdc.binlog.compression import CompressedPayloadError
from changelake.connectors.mysql_cdc.connection import close_quietly, is_connection_loss, text_connection
from changelake.connectors.mysql_cdc.errors import BinlogConnectionLostError, UnsupportedBinlogEventError
from changelake.connectors.mysql_cdc.binlog.event_handler import EventHandler, Progress, missing_columns, parse_truncate
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SourcePosition
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker, TableSchema, load_table_schema

__all__ = ["BinlogReader", "ProcessBinlogReader", "ReaderConfig", "Progress", "parse_truncate", "missing_columns"]

log = logging.getLogger(__name__)


class _StreamLost(ConnectionError):
    """mysql-replication tried to reconnect by itself; the reader reconnects instead."""


class _StreamEnded(ConnectionError):
    """The server ended the binlog stream (EOF packet) without being asked to."""



# -- the stream's packets, read in chunks ---------------------------------------------------------

#: PyMySQL's MAX_PACKET_LEN: a payload of this many bytes continues in the next packet
_MAX_PACKET = 0xFFFFFF
_ROTATE, _FORMAT_DESCRIPTION, _TABLE_MAP = 0x04, 0x0F, 0x13
_PREFIX = "_BinLogStreamReader__"


def _private(stream: Any, name: str) -> Any:
    try:
        return getattr(stream, _PREFIX + name)
    except AttributeError:
        raise RuntimeError(f"mysql-replication's BinLogStreamReader has no {name!r}: the binlog reader reads "
                           f"the attributes of pymysqlreplication 1.0.x") from None


def _fast_path(stream: Any) -> bool:
    """True when :func:`events` may read this stream reader's packets itself."""
    allowed = _private(stream, "allowed_events")
    return (row_decoder.framing_enabled and row_decoder._library_wrapper is not None
            and row_decoder.FramedWriteRows in allowed
            and _private(stream, "only_tables") is None and _private(stream, "ignored_tables") is None
            and _private(stream, "only_schemas") is None and _private(stream, "ignored_schemas") is None
            and not _private(stream, "verify_checksum") and not stream.end_log_pos and not stream.skip_to_timestamp)


def stream_events(stream: Any, idle: Callable[[], None], chunk: int = 1 << 18) -> Iterator[Any]:
    """The events of a ``BinLogStreamReader`` (as iterating it yields them), ``idle()`` called
    before each read that may block.

    The events are read from the socket in chunks, instead of one
    ``BinLogStreamReader.fetchone`` (and PyMySQL ``_read_packet``) per packet.

    After mysql-replication has connected and framed the first event (the stream reader's own
    ``fetchone``: register as a replica, heartbeat, ``COM_BINLOG_DUMP``), :func:`stream_events` reads the
    stream connection's bytes itself, up to ``chunk`` bytes per read from PyMySQL's buffered socket
    file (``read1``: what is buffered, else one ``recv``), and splits them into MySQL packets as
    PyMySQL's ``Connection._read_packet`` does (3-byte little-endian length and a sequence number
    checked against the expected one; a payload of 2^24-1 bytes continues in the next packet; an
    error packet raises PyMySQL's error; a broken or silent connection raises PyMySQL's
    ``OperationalError`` 2013, *Lost connection*). Each OK packet is then what ``fetchone`` makes of
    it: rows events, table maps, MariaDB GTID and XID events framed by
    :func:`~.row_decoder.frame_packet` (the install_framer framing), every other packet by the
    library's ``BinLogPacketWrapper`` with ``fetchone``'s own bookkeeping (``log_pos`` and
    ``log_file`` of rotate events, the table map reset on a rotate with a timestamp, the format
    description's server version and post-header lengths, the library's table maps); an EOF packet
    closes the stream and ends the iteration, as ``fetchone`` returns None.

    Before it would block on the socket (no whole packet left in what was read) it calls ``idle()``:
    the reader hands its buffered items to the consumer there, so that batching never holds an item
    back while the server has nothing more to send.

    Only for a stream reader that the binlog reader made (``only_events`` with the framed classes, no
    table/schema filter, no ``end_log_pos`` or ``skip_to_timestamp``, no checksum verification);
    any other falls back to the library's own iteration (with ``idle()`` before each event).
    ``tests/integration/mysql_cdc/test_mysql_cdc_packet_stream.py`` compares both readings of one
    binlog event by event.

    Raises:
        pymysql.err.OperationalError: 2013 when the connection breaks, ends or stays silent past
            its read timeout (the socket error is the cause), or the server's error packet.
        pymysql.err.InternalError: a packet out of sequence.
    """
    import pymysql
    from pymysql.protocol import MysqlPacket

    idle()
    first = stream.fetchone()  # the library connects and frames the first event
    if first is None:
        return
    yield first
    if not _fast_path(stream):
        while True:
            idle()
            ev = stream.fetchone()
            if ev is None:
                return
            yield ev
    conn = stream._stream_connection
    rfile = conn._rfile
    encoding = conn.encoding
    library = row_decoder._library_wrapper
    frame_packet = row_decoder.frame_packet
    framed_kinds = row_decoder.FRAMED_CODES
    framed_rows = row_decoder.FramedRows
    allowed = _private(stream, "allowed_events")
    use_checksum = bool(_private(stream, "use_checksum"))

    def library_args() -> tuple[Any, ...]:  # fetchone's arguments after the packet and the table map
        return (stream._ctl_connection, stream.mysql_version, _private(stream, "use_checksum"),
                _private(stream, "allowed_events_in_packet"), _private(stream, "only_tables"),
                _private(stream, "ignored_tables"), _private(stream, "only_schemas"),
                _private(stream, "ignored_schemas"), _private(stream, "freeze_schema"),
                _private(stream, "ignore_decode_errors"), _private(stream, "verify_checksum"),
                _private(stream, "optional_meta_data"), _private(stream, "enable_logging"),
                _private(stream, "use_column_name_cache"), _private(stream, "post_header_lengths"))

    args = library_args()
    post_header_lengths = args[14]
    table_map = stream.table_map
    seq = conn._next_seq_id
    buf, pos = b"", 0
    parts: list[bytes] = []  # a payload of 2^24-1 bytes and more, until its last packet
    while True:
        n = len(buf)
        if pos + 4 <= n:
            length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
            end = pos + 4 + length
        else:
            length, end = -1, -1
        if end < 0 or end > n:  # no whole packet left: read more
            buf, pos = buf[pos:], 0
            idle()
            want = end - n if end > n and end - n > chunk else chunk
            try:
                more = rfile.read(want) if want > chunk else rfile.read1(want)
            except OSError as exc:
                conn._force_close()
                raise pymysql.err.OperationalError(2013, f"Lost connection to MySQL server during query ({exc})") from exc
            if not more:
                conn._force_close()
                raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
            buf = buf + more if buf else more
            continue
        if buf[pos + 3] != seq:
            got = buf[pos + 3]
            conn._force_close()
            if got == 0:  # MariaDB sends an error packet with sequence 0 when it shuts down
                raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
            raise pymysql.err.InternalError(f"Packet sequence number wrong - got {got} expected {seq}")
        seq = (seq + 1) % 256
        data = buf[pos + 4:end]
        pos = end
        if length == _MAX_PACKET:
            parts.append(data)
            continue
        if parts:
            parts.append(data)
            data = b"".join(parts)
            parts = []
        conn._next_seq_id = seq
        head = data[0] if data else -1
        if head == 0xFF:
            MysqlPacket(data, encoding).raise_for_error()
        if head == 0xFE and len(data) < 9:  # EOF: the server ended the stream (fetchone returns None)
            stream.close()
            return
        if head != 0 or len(data) < 7:
            continue  # not an OK packet (fetchone skips it)
        code = data[5]
        if code in framed_kinds:
            ev = frame_packet(data, table_map, use_checksum, post_header_lengths)
            if ev is not None:
                if ev.log_pos:
                    stream.log_pos = ev.log_pos
                if isinstance(ev, framed_rows):  # the library's reading of the same packet (test oracle)
                    ev._library_args = (data, table_map, args)
                yield ev
                continue
        wrapped = library(MysqlPacket(data, encoding), table_map, *args)
        event = wrapped.event
        if wrapped.event_type == _ROTATE:
            stream.log_pos = event.position
            stream.log_file = event.next_binlog
            if wrapped.timestamp != 0:  # fetchone: table ids are not kept across a rotate
                table_map = stream.table_map = {}
        elif wrapped.log_pos:
            stream.log_pos = wrapped.log_pos
        if wrapped.event_type == _FORMAT_DESCRIPTION and event is not None:
            stream.mysql_version = event.mysql_version
            setattr(stream, _PREFIX + "post_header_lengths", event.post_header_len)
            args = library_args()
            post_header_lengths = args[14]
        if wrapped.event_type == _TABLE_MAP and event is not None:
            table_map[event.table_id] = event.get_table()
        if event is None or event.__class__ not in allowed:
            continue
        yield event


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
        queue_size: decoded items buffered ahead of :meth:`take` (in batches of up to
            ``batch_items``: ``queue_size // batch_items`` batches).
        connect_timeout_s: how long to keep reconnecting after a connection loss, seconds.
        read_timeout_s: a connection silent for this long (no event, no heartbeat) counts as lost.
        linger_s: after the first item, :meth:`take` waits up to this long (seconds) for more
            before returning fewer than ``max_items`` (as Kafka's ``linger.ms``).
        min_ts_ms: ``timestamp`` startup mode: changes with an older binlog timestamp (ms since the
            epoch) are skipped until the first one at or after it.
        existing: the captured tables that exist at ``start`` (a ``DROP DATABASE`` read later
            drops those of its database; see ``EventHandler``).
        batch_items: items the reader thread hands over at once at most (sooner when it is about
            to wait for the server).
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
        batch_items: int = 500,
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
        self._batch_items = max(1, batch_items)
        self._queue: "queue.Queue[list[tuple[str, Any]]]" = queue.Queue(maxsize=max(1, queue_size // self._batch_items))
        self._pending: list[tuple[str, Any]] = []  # decoded by the thread, not yet handed over
        self._buffer: collections.deque[tuple[str, Any]] = collections.deque()  # handed over, not yet taken
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
        self._buffer.clear()

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
        deadline = time.monotonic() + max(0.0, timeout_s)
        linger_until: float | None = None
        buf = self._buffer
        while len(out) < max_items:
            if not buf:
                # wait for the first item until the timeout; after it, up to linger_s for more
                # (larger batches: fewer commits, each of which waits for the broker)
                try:
                    buf.extend(self._queue.get_nowait())
                    continue
                except queue.Empty:
                    pass
                now = time.monotonic()
                if linger_until is None and out:
                    linger_until = min(deadline, now + self._linger_s)
                remaining = (linger_until if linger_until is not None else deadline) - now
                if remaining <= 0:
                    break
                try:
                    buf.extend(self._queue.get(timeout=remaining))
                except queue.Empty:
                    break
                continue
            if buf[0][0] == "error":
                if out:  # hand out what came before the failure first; it stays the next thing take() returns
                    break
                raise buf.popleft()[1]
            out.append(buf.popleft())
        return out

    # -- reader thread --------------------------------------------------------------------------
    def _put(self, item: tuple[str, Any]) -> None:
        """The handler's output: kept until ``batch_items`` items are there or the stream waits."""
        pending = self._pending
        pending.append(item)
        if len(pending) >= self._batch_items:
            self._flush()

    def _put_now(self, item: tuple[str, Any]) -> None:
        self._pending.append(item)
        self._flush()

    def _flush(self) -> None:
        """Hand the pending items over as one batch (waits while the queue is full, until close)."""
        batch = self._pending
        if not batch:
            return
        self._pending = []
        while not self._stop.is_set():
            try:
                self._queue.put(batch, timeout=0.2)
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
                for ev in stream_events(self._open_stream(handler.physical_start()), self._flush):
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
                self._flush()  # what was decoded before the loss or failure goes first
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
                    self._put_now(("error", err))
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
        self._put_now(("error", err))


# -- the reader in a child process ----------------------------------------------------------

@dataclass(frozen=True)
class ReaderConfig:
    """What the child needs to build its BinlogReader (all picklable)."""

    connection: dict[str, Any]
    server_id: int
    start: SourcePosition
    captured: Callable[[TableId], bool]
    include_comments: bool
    tinyint1_as_boolean: bool
    heartbeat_s: float
    connect_timeout_s: float
    min_ts_ms: int
    #: the captured tables that exist at ``start`` (BinlogReader's ``existing``)
    existing: frozenset[TableId] = frozenset()
    #: definitions read before the reader starts (the snapshot's; SchemaTracker's ``known``)
    schemas: tuple[Any, ...] = ()


def _die_with_parent(interval_s: float = 0.1) -> None:  # pragma: no cover - runs in the child
    """Exit at once (``os._exit``: the binlog socket closes, the server drops the replica and its
    server id) when the parent process is gone, checked every ``interval_s`` seconds by a daemon
    thread: after a ``kill -9`` of the pipeline the child must not keep the server id, or the
    restarted pipeline is refused (ServerIdClashError). Watching the parent's pid, not
    ``PR_SET_PDEATHSIG``, which fires when the parent *thread* that started the child ends."""
    import os

    started_by = multiprocessing.parent_process()
    parent = started_by.pid if started_by is not None and started_by.pid else os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _child_main(conn: Any, cfg: ReaderConfig) -> None:  # pragma: no cover - runs in the child
    # The parent stops the child with SIGTERM (close -> terminate). An ignored signal stays ignored
    # across exec, and a parent may ignore SIGTERM: Dagster maps SIGTERM to SIGINT's handler, which is
    # SIG_IGN in a process a shell started in the background. The child would then outlive every
    # close by its 10 s join, until SIGKILL. Only an inherited SIG_IGN is reset: a handler installed
    # in this process before (bench/profile_pipeline1.py's, which dumps the worker's profile) stays.
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()

    state: dict[str, Any] = {"conn": None}

    def hints(table_id: TableId) -> TableSchema | None:
        c = state["conn"]
        try:
            if c is None:
                raise ConnectionError
            c.ping()
        except Exception:  # noqa: BLE001 - (re)connect
            c = state["conn"] = text_connection(cfg.connection)
        try:
            return load_table_schema(c, table_id, include_comments=cfg.include_comments,
                                     tinyint1_as_boolean=cfg.tinyint1_as_boolean)
        except SourceError:
            return None

    reader = BinlogReader(cfg.connection, cfg.server_id, cfg.start, cfg.captured, SchemaTracker(hints, cfg.schemas),
                          heartbeat_s=cfg.heartbeat_s, connect_timeout_s=cfg.connect_timeout_s,
                          min_ts_ms=cfg.min_ts_ms, linger_s=0.02, existing=cfg.existing)
    reader.start()
    try:
        while True:
            try:
                items = reader.take(2000, 0.5)
            except Exception as exc:  # noqa: BLE001 - handed to the parent, which raises it
                conn.send((reader.connections, [("error", _picklable(exc))]))
                return
            if items:
                conn.send((reader.connections, _to_wire(_last_progress_only(items))))  # BrokenPipeError when the parent is gone
    except (BrokenPipeError, EOFError, OSError):
        return
    finally:
        reader.close()
        if state["conn"] is not None:
            try:
                state["conn"].close()
            except Exception:  # noqa: BLE001
                pass


def _last_progress_only(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The batch without its progress items except the last one: the source keeps only the
    latest progress (its position, unless an event comes after it, and the server position
    reached), so the batch ends in the same state with fewer items to pickle."""
    last = max((i for i, item in enumerate(items) if item[0] == "progress"), default=-1)
    return [item for i, item in enumerate(items) if item[0] != "progress" or i == last]


#: the fields of a DataChangeEvent, in order (the wire tuple's, after its kind)
_EVENT_FIELDS = ("table", "op", "before", "after", "schema", "ts_ms", "position", "transaction", "schema_change")
if tuple(f.name for f in fields(DataChangeEvent)) != _EVENT_FIELDS or hasattr(DataChangeEvent, "__post_init__"):
    raise ImportError("DataChangeEvent's fields changed: update reader._to_wire / _from_wire")
_new_event, _set_attribute = object.__new__, object.__setattr__


def _to_wire(items: list[tuple[str, Any]]) -> list[tuple[Any, ...]]:
    """A batch for the pipe: each ``("event", DataChangeEvent)`` as ``("ev", table, op, before,
    after, schema, ts_ms, position, transaction, schema_change)``, other items as they are."""
    out: list[tuple[Any, ...]] = []
    append = out.append
    for item in items:
        if item[0] == "event" and type(item[1]) is DataChangeEvent:
            d = item[1].__dict__
            append(("ev", d["table"], d["op"], d["before"], d["after"], d["schema"], d["ts_ms"], d["position"],
                    d["transaction"], d["schema_change"]))
        else:
            append(item)
    return out


def _from_wire(items: list[tuple[Any, ...]]) -> list[tuple[str, Any]]:
    """The batch :func:`_to_wire` made, with its DataChangeEvents rebuilt (``object.__new__`` and
    the instance dict: the object the frozen ``__init__`` makes, without its ``__setattr__`` calls)."""
    out: list[tuple[str, Any]] = []
    append = out.append
    for t in items:
        if t[0] == "ev":
            event = _new_event(DataChangeEvent)
            _set_attribute(event, "__dict__", {"table": t[1], "op": t[2], "before": t[3], "after": t[4], "schema": t[5],
                                               "ts_ms": t[6], "position": t[7], "transaction": t[8],
                                               "schema_change": t[9]})
            append(("event", event))
        else:
            append(t)
    return out


#: Linux's ``F_SETPIPE_SZ`` / ``F_GETPIPE_SZ`` (fcntl.h; Python's ``fcntl`` names them from 3.10 on some builds only).
_F_SETPIPE_SZ, _F_GETPIPE_SZ = 1031, 1032


def _widen_pipe(fd: int, wanted: int = 4 << 20) -> int:
    """Grow the pipe's kernel buffer from Linux's 64 KiB towards ``wanted`` bytes (capped by
    ``/proc/sys/fs/pipe-max-size``, 1 MiB by default); the size in effect, or 0 where pipes cannot
    be resized (not Linux). A batch of 2,000 sysbench events pickles to about 1 MB: with a 64 KiB
    pipe the pump thread needs ~16 reads per batch, and after each read it waits for the GIL that
    the writer thread holds (up to ``sys.getswitchinterval()``, 5 ms), while the child blocks in
    ``write``. Measured with cProfile under load: the child spent 42 % of its time blocked in the
    pipe write and the parent 21 % waiting for batches, both at once."""
    try:
        import fcntl

        try:
            limit = int(open("/proc/sys/fs/pipe-max-size").read())
        except (OSError, ValueError):
            limit = 1 << 20
        fcntl.fcntl(fd, _F_SETPIPE_SZ, min(wanted, limit))
        return int(fcntl.fcntl(fd, _F_GETPIPE_SZ))
    except (ImportError, OSError):
        return 0


def _picklable(exc: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any exception that does not survive pickling
        return SourceError(f"binlog reader failed: {type(exc).__name__}: {exc}")


class ProcessBinlogReader:
    """A BinlogReader in a child process (see module doc).

    A pump thread moves the child's batches from the pipe into a bounded queue (``queue_batches``
    batches of up to 2000 items), so that the child keeps decoding while the writer encodes and
    commits; when the queue is full the pump, and through the pipe the child, waits.

    Args:
        config: the child's reader settings.
        linger_s: after the first item, :meth:`take` waits up to this long (seconds) for more
            before returning fewer than ``max_items`` (as Kafka's ``linger.ms``).
        queue_batches: batches buffered ahead of :meth:`take`.
    """

    def __init__(self, config: ReaderConfig, linger_s: float = 0.1, queue_batches: int = 20) -> None:
        self._config = config
        self._linger_s = linger_s
        self._proc: Any = None
        self._conn: Any = None
        self._pump: threading.Thread | None = None
        self._stop = threading.Event()
        self._batches: "queue.Queue[list[tuple[str, Any]]]" = queue.Queue(maxsize=queue_batches)
        self._buffer: collections.deque[tuple[str, Any]] = collections.deque()
        self.server_id = config.server_id
        #: connections the child made to the binlog (1 + reconnects), as BinlogReader.connections.
        self.connections = 0

    def start(self) -> None:
        """Start the child process (it connects, reads and reconnects by itself) and the pump."""
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=False)
        _widen_pipe(parent.fileno())
        self._proc = ctx.Process(target=_child_main, args=(child, self._config),
                                 name=f"mysql-cdc-binlog-{self.server_id}", daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self._pump = threading.Thread(target=self._run_pump, name=f"mysql-cdc-pump-{self.server_id}", daemon=True)
        self._pump.start()

    def _run_pump(self) -> None:
        conn = self._conn
        while not self._stop.is_set():
            try:
                if not conn.poll(0.2):
                    continue
                connections, wire = conn.recv()
                items = _from_wire(wire)
            except (EOFError, OSError) as exc:
                if self._stop.is_set():
                    return
                code = self._proc.exitcode if self._proc is not None else None
                err = SourceError(f"the binlog reader process (server id {self.server_id}) exited (exit code {code})")
                err.__cause__ = exc
                items, connections = [("error", err)], self.connections
            self.connections = connections
            while not self._stop.is_set():
                try:
                    self._batches.put(items, timeout=0.2)
                    break
                except queue.Full:
                    continue
            if items and items[-1][0] == "error":
                return

    def close(self) -> None:
        """Stop the child, the pump and the pipe (idempotent)."""
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
            self._proc.join(timeout=10)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(timeout=5)
            self._proc = None
        if self._pump is not None:
            self._pump.join(timeout=5)
            self._pump = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._buffer.clear()

    def take(self, max_items: int, timeout_s: float) -> list[tuple[str, Any]]:
        """As :meth:`BinlogReader.take`: up to ``max_items`` items, waiting at most ``timeout_s``
        for the first and then at most ``linger_s`` for more. Raises the child's error after the
        items that came before it.

        Raises:
            SourceError: the child's error (BinlogEventError subclasses, BinlogConnectionLostError),
                or the child process exited.
        """
        out: list[tuple[str, Any]] = []
        deadline = time.monotonic() + max(0.0, timeout_s)
        linger_until: float | None = None
        buf = self._buffer
        while len(out) < max_items:
            if not buf:
                now = time.monotonic()
                if out and linger_until is None:
                    linger_until = min(deadline, now + self._linger_s)
                wait = (linger_until if linger_until is not None else deadline) - now
                try:
                    buf.extend(self._batches.get(timeout=wait) if wait > 0 else self._batches.get_nowait())
                except queue.Empty:
                    break
                continue
            item = buf[0]
            if item[0] == "error":
                if out:
                    break  # hand out what came before the failure first
                raise item[1]  # stays at the front: the next take() raises it again
            out.append(buf.popleft())
        return out
