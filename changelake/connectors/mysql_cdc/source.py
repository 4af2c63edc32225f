"""MySqlSource: snapshot + binlog change capture of MySQL/MariaDB tables, as Flink CDC's MySQL source.

Example::

    source = MySqlSource({"hostname": "127.0.0.1", "port": "3306", "username": "cdc",
                          "password": secret, "tables": "shop.\\\\.*", "server-id": "5400-5404"})
    source.open()
    try:
        while not source.caught_up():
            for event in source.poll(max_events=1000, timeout_s=1.0):
                sink.write(event)               # event.position: store it with the data
    finally:
        source.close()

Restart with ``MySqlSource(options, start_position=<last stored event.position>)``: the source
continues exactly after that event (snapshot progress or binlog transaction + row).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

from changelake.changelog.event import DataChangeEvent
from changelake.changelog.rowkind import RETRACT, RowKind
from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError, SourceError
from changelake.connectors.mysql_cdc.binlog import BinlogReader, Progress, is_connection_loss
from changelake.connectors.mysql_cdc.errors import BinlogPurgedError, ServerIdClashError
from changelake.connectors.mysql_cdc.options import MySqlSourceOptions, StartupMode
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SnapshotProgress, SourcePosition, binlog_file_index
from changelake.connectors.mysql_cdc.preflight import (
    check_binlog_settings,
    choose_server_id,
    read_variables,
    used_server_ids,
)
from changelake.connectors.mysql_cdc.schema_tracker import SchemaTracker, TableSchema, list_tables, load_table_schema
from changelake.connectors.mysql_cdc.snapshot import SnapshotReader, text_connection

__all__ = ["MySqlSource"]

log = logging.getLogger(__name__)


class MySqlSource:
    """Change events of the captured tables: an initial snapshot (``op`` r), then the binlog (c/u/d/t).

    Args:
        options: validated options, or raw option strings (validated by the factory).
        start_position: a position stored from an earlier run (``event.position`` of the last
            event written); None starts as ``scan.startup.mode`` says.

    Events (:class:`~changelake.changelog.event.DataChangeEvent`) carry the table, the op,
    before/after rows of Python values (see :mod:`~changelake.connectors.mysql_cdc.values`), the
    table schema at the event, ``ts_ms`` (commit time in ms from the binlog header, second
    resolution; 0 for snapshot rows) and ``position`` (JSON-serialisable, the position *after* the
    event). Changelog mode: all kinds (+I, -U, +U, -D), as Flink CDC's MySQL source.
    """

    #: row kinds this source produces (Flink's ChangelogMode.all()).
    changelog_mode: frozenset[RowKind] = RETRACT

    def __init__(self, options: MySqlSourceOptions | Mapping[str, Any], start_position: Mapping[str, Any] | None = None) -> None:
        if not isinstance(options, MySqlSourceOptions):
            from changelake.connectors.mysql_cdc.factory import validate_options

            options = validate_options(options)
        self.options = options
        self._start = SourcePosition.from_dict(start_position) if start_position else None
        self._ctl: Any = None
        self._snapshot: SnapshotReader | None = None
        self._reader: BinlogReader | None = None
        self._position: SourcePosition | None = self._start
        self._consumed: tuple[tuple[str, int], int] | None = None
        self._target: tuple[tuple[str, int], int] | None = None
        self._finished = False
        self._server_id: int | None = None
        self._tables: list[TableId] = []
        self._hint_conn: Any = None

    def __repr__(self) -> str:
        return f"MySqlSource(options={self.options!r}, position={self.position!r})"

    # -- properties ----------------------------------------------------------------------------
    @property
    def position(self) -> dict[str, Any] | None:
        """The position after the last event returned (or progress seen), JSON-serialisable."""
        return self._position.to_dict() if self._position else None

    @property
    def server_id(self) -> int | None:
        """The replica server id taken from the ``server-id`` range (after :meth:`open`)."""
        return self._server_id

    @property
    def binlog_connections(self) -> int:
        """Binlog connections made so far by the running reader (1 + reconnects; 0 before the binlog phase)."""
        return self._reader.connections if self._reader is not None else 0

    @property
    def captured_tables(self) -> list[TableId]:
        """Tables matched by ``tables`` minus ``tables.exclude`` at :meth:`open`."""
        return list(self._tables)

    def is_captured(self, table_id: TableId) -> bool:
        """True if ``tables`` selects the table and ``tables.exclude`` does not."""
        if not self.options.tables.matches(table_id):
            return False
        return not (self.options.tables_exclude and self.options.tables_exclude.matches(table_id))

    # -- lifecycle ------------------------------------------------------------------------------
    def open(self) -> None:
        """Check the server, choose a server id, and start the snapshot or the binlog reader.

        Raises:
            BinlogSettingsError: the binlog is not row-based with full images/metadata.
            ServerIdClashError: every id of ``server-id`` is in use by another binlog client.
            OptionValidationError: ``tables`` (or ``tables.exclude``) leaves no table.
            BinlogPurgedError: the stored / requested binlog file is no longer on the server.
        """
        conn_kwargs = self.options.connection_kwargs()
        try:
            self._ctl = text_connection(conn_kwargs)
        except Exception as exc:  # pymysql errors carry no password
            raise SourceError(
                f"cannot connect to MySQL at {self.options.hostname}:{self.options.port} as {self.options.username!r}: {exc}"
            ) from exc
        variables = read_variables(self._ctl)
        check_binlog_settings(variables)
        own = int(variables["server_id"]) if variables.get("server_id") else None
        self._server_id = self._choose_server_id(own)
        self._tables = self._find_tables()

        start = self._start
        mode = self.options.scan_startup_mode
        if start is not None and start.snapshot is not None:
            self._check_binlog_exists(start.binlog)
            self._start_snapshot(start.snapshot, start.binlog)
        elif start is not None:
            self._check_binlog_exists(start.binlog)
            for prepared in start.xa_prepared:
                self._check_binlog_exists(BinlogPosition(prepared.file, prepared.pos))
            self._start_binlog(start)
        elif mode in (StartupMode.INITIAL, StartupMode.SNAPSHOT):
            self._start_snapshot(SnapshotProgress(tuple(str(t) for t in self._tables)), None)
        elif mode is StartupMode.LATEST_OFFSET:
            self._start_binlog(self._master_status())
        else:
            assert self.options.specific_offset_file and self.options.specific_offset_pos is not None
            pos = BinlogPosition(self.options.specific_offset_file, self.options.specific_offset_pos)
            self._check_binlog_exists(pos)
            self._start_binlog(pos)

    def close(self) -> None:
        """Stop reading and close every connection (idempotent)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._snapshot is not None:
            self._snapshot.close()
            self._snapshot = None
        for conn in (self._ctl, self._hint_conn):
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - closing a dead connection
                    pass
        self._ctl = self._hint_conn = None

    def __enter__(self) -> "MySqlSource":
        self.open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- reading --------------------------------------------------------------------------------
    def poll(self, max_events: int = 1000, timeout_s: float = 1.0) -> list[DataChangeEvent]:
        """Up to ``max_events`` change events, waiting at most about ``timeout_s`` seconds.

        Raises:
            SourceError: the binlog reader failed: BinlogConnectionLostError (no connection within
                ``connect.timeout``), RowImageError / StatementFormatError /
                UnsupportedBinlogEventError / XaTransactionError (an event it must not skip),
                or an undecodable value.
        """
        if self._snapshot is not None:
            events = self._snapshot.read(max_events)
            if events:
                self._position = SourcePosition.from_dict(events[-1].position)
            if self._snapshot.done:
                binlog_pos = self._snapshot.binlog_position
                assert binlog_pos is not None
                self._snapshot.close()
                self._snapshot = None
                self._position = SourcePosition(binlog_pos)
                if self.options.scan_startup_mode is StartupMode.SNAPSHOT:
                    self._finished = True
                else:
                    self._start_binlog(binlog_pos)
            if events:
                return events
        if self._reader is None:
            return []
        out: list[DataChangeEvent] = []
        for kind, item in self._reader.take(max_events, timeout_s):
            if kind == "event":
                out.append(item)
                self._position = SourcePosition.from_dict(item.position)
            elif kind == "progress":
                assert isinstance(item, Progress)
                self._position = item.position
                self._consumed = (binlog_file_index(item.file), item.next_pos)
        return out

    def caught_up(self) -> bool:
        """True once the reader has reached the binlog end that existed at the last check.

        During the snapshot: False. After a ``snapshot``-mode snapshot: True. Otherwise the
        server's current end (``SHOW MASTER STATUS``) becomes the target when not yet reached;
        True when everything up to the target has been returned by :meth:`poll`.
        """
        if self._finished:
            return True
        if self._snapshot is not None or self._reader is None:
            return False
        if self._target is None:
            try:
                end = self._master_status()
            except Exception as exc:  # noqa: BLE001 - classified
                if not is_connection_loss(exc):
                    raise
                # the server is away: the binlog reader reconnects, or fails after connect.timeout
                log.warning("cannot read the binlog end from the server (%s); not caught up yet", exc)
                return False
            self._target = (binlog_file_index(end.file), end.pos)
        if self._consumed is not None and self._consumed >= self._target:
            self._target = None
            return True
        return False

    # -- internals ------------------------------------------------------------------------------
    def _find_tables(self) -> list[TableId]:
        everything = list_tables(self._ctl)
        selected = [t for t in everything if self.options.tables.matches(t)]
        if not selected:
            raise OptionValidationError(f"Cannot find any table by the option 'tables' = {self.options.tables.text}", option="tables")
        if self.options.tables_exclude is not None:
            selected = [t for t in selected if not self.options.tables_exclude.matches(t)]
            if not selected:
                raise OptionValidationError(
                    f"Cannot find any table with by the option 'tables.exclude' = {self.options.tables_exclude.text}",
                    option="tables.exclude",
                )
        return selected

    def _choose_server_id(self, own: int | None, grace_s: float = 3.0) -> int:
        # A reader that just stopped (or was killed) stays registered until the server notices
        # the closed connection (about one heartbeat): retry briefly before reporting a clash.
        deadline = time.monotonic() + grace_s
        while True:
            try:
                return choose_server_id(self.options.server_id, self._used_server_ids(), own)
            except ServerIdClashError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.3)

    def _used_server_ids(self) -> list[int]:
        try:
            return used_server_ids(self._ctl)
        except Exception as exc:  # noqa: BLE001 - e.g. the user may not run SHOW SLAVE HOSTS
            log.warning("cannot list replicas with SHOW SLAVE HOSTS (%s); server-id clashes are not detected", exc)
            return []

    def _master_status(self) -> BinlogPosition:
        self._ctl = _alive(self._ctl, self.options.connection_kwargs())
        with self._ctl.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
        if not row:
            raise SourceError("SHOW MASTER STATUS returned nothing: binary logging is off")
        return BinlogPosition(str(row[0]), int(row[1]))

    def _check_binlog_exists(self, pos: BinlogPosition) -> None:
        with self._ctl.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            sizes = {str(r[0]): int(r[1]) for r in cur.fetchall()}
        files = list(sizes)
        if pos.file not in sizes:
            raise BinlogPurgedError(pos.file, pos.pos, files)
        if pos.pos > sizes[pos.file]:
            raise SourceError(
                f"The binlog position {pos.file}:{pos.pos} lies beyond the end of that file ({sizes[pos.file]} bytes): "
                "it does not belong to this server's binlog (was the server or its binlog reset?). To re-snapshot, "
                "delete the pipeline's stored offsets (or use a new pipeline name) and start with "
                "'scan.startup.mode' = 'initial'."
            )

    def _start_snapshot(self, progress: SnapshotProgress, binlog_pos: BinlogPosition | None) -> None:
        self._snapshot = SnapshotReader(
            self.options.connection_kwargs(), progress, self.options.chunk_size, self.options.snapshot_fetch_size, binlog_pos
        )
        pos = self._snapshot.open()
        self._position = SourcePosition(pos, progress)

    def _start_binlog(self, start: BinlogPosition | SourcePosition) -> None:
        pos = start.binlog if isinstance(start, SourcePosition) else start
        conn_kwargs = self.options.connection_kwargs()

        # The hints loader runs in the reader thread; give it its own connection.
        self._hint_conn = text_connection(conn_kwargs)

        def thread_hints(table_id: TableId) -> TableSchema | None:
            self._hint_conn = _alive(self._hint_conn, conn_kwargs)
            try:
                return load_table_schema(self._hint_conn, table_id)
            except SourceError:  # the table is gone: decode from the table-map alone
                return None

        assert self._server_id is not None
        self._reader = BinlogReader(
            conn_kwargs, self._server_id, start, self.is_captured, SchemaTracker(thread_hints),
            heartbeat_s=self.options.heartbeat_interval.total_seconds(),
            connect_timeout_s=self.options.connect_timeout.total_seconds(),
        )
        self._reader.start()
        if self._position is None or self._position.snapshot is not None:
            self._position = start if isinstance(start, SourcePosition) else SourcePosition(pos)


def _alive(conn: Any, conn_kwargs: dict[str, Any]) -> Any:
    """``conn`` if it still answers, else a new text connection (session settings re-applied)."""
    try:
        conn.ping()
        return conn
    except Exception:  # noqa: BLE001 - any failure: reconnect
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass
        return text_connection(conn_kwargs)
