"""MySqlSource: snapshot + binlog change capture of MySQL/MariaDB tables, as Flink CDC's MySQL source.

Example::

    source = find_factory("mysql").create_source(      # or MySqlSource(validate_options({...}))
        {"hostname": "127.0.0.1", "port": "3306", "username": "cdc", "password": secret,
         "tables": "shop.\\\\.*", "server-id": "5400-5404"}, ConnectorContext("orders"))
    source.open()
    try:
        while not source.caught_up():
            for event in source.poll(max_events=1000, timeout_s=1.0):
                sink.write(event)               # event.position: store it with the data
    finally:
        source.close()

Restart with ``MySqlSource(options, start_position=<last stored event.position>)``: the source
continues exactly after that event (snapshot progress or binlog transaction + row).

The snapshot is MariaDB's consistent snapshot (:mod:`~changelake.connectors.mysql_cdc.snapshot.reader`),
or with ``scan.incremental.snapshot.enabled`` Flink CDC's incremental snapshot
(:mod:`~changelake.connectors.mysql_cdc.snapshot.incremental`); after the latter, the binlog is
filtered by the chunks' high watermarks until the largest one is passed
(:mod:`~changelake.connectors.mysql_cdc.snapshot.watermarks`).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from typing import Any, Mapping

from changelake.changelog.event import DROP_TABLE, DataChangeEvent, Op
from changelake.changelog.rowkind import RETRACT, RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import TypeRoot
from changelake.connectors.errors import OptionValidationError, SourceError
from changelake.connectors.mysql_cdc.binlog.reader import BinlogReader, ProcessBinlogReader, Progress, ReaderConfig
from changelake.connectors.mysql_cdc.connection import close_quietly, is_connection_loss, text_connection
from changelake.connectors.mysql_cdc.errors import BinlogPurgedError, ServerIdClashError
from changelake.changelog.side_records import SideRecord
from changelake.connectors.mysql_cdc.binlog.heartbeat import HeartbeatAction, HeartbeatRecords
from changelake.connectors.mysql_cdc.binlog.transactions import TransactionMonitor
from changelake.connectors.mysql_cdc.snapshot.conditions import AdditionalConditionError, parse_conditions, where_clause
from changelake.connectors.mysql_cdc.snapshot.kafka_signals import KafkaSignalChannel
from changelake.connectors.mysql_cdc.snapshot.signals import (
    Signal,
    SignalCaptured,
    collections_shape_error,
    log_signal,
    parse_signal,
    snapshot_tables,
)
from changelake.connectors.mysql_cdc.options import MySqlSourceOptions, StartupMode
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SnapshotProgress, SourcePosition, binlog_file_index
from changelake.connectors.mysql_cdc.binlog.gtid import earliest_position, gtid_start_position, parse_gtid_set, timestamp_start_file
from changelake.connectors.mysql_cdc.metadata import MetadataColumns as _MetadataColumns
from changelake.connectors.mysql_cdc.preflight import (
    check_binlog_settings,
    check_privileges,
    check_server_time_zone,
    choose_server_id,
    read_variables,
    used_server_ids,
)
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker, TableSchema, list_tables, load_table_schema
from changelake.connectors.mysql_cdc.selectors import CapturedTables
from changelake.connectors.mysql_cdc.snapshot.incremental import IncrementalSnapshotReader, new_progress
from changelake.connectors.mysql_cdc.snapshot.reader import SnapshotReader
from changelake.connectors.mysql_cdc.snapshot.watermarks import WatermarkFilter, marks_from_json

__all__ = ["MySqlSource"]

log = logging.getLogger(__name__)

#: column types whose non-NULL MySQL values this source may give as None: zero and partial dates
#: (``0000-00-00``, ``2024-01-00``) of DATE, DATETIME and TIMESTAMP (:mod:`.values`,
#: ``binlog/row_decoder.py``), which MariaDB's default ``sql_mode`` accepts in a primary key
_MAY_READ_AS_NONE = frozenset({TypeRoot.DATE, TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ})


class MySqlSource:
    """Change events of the captured tables: an initial snapshot (``op`` r), then the binlog (c/u/d/t).

    Args:
        options: validated options (:func:`~changelake.connectors.mysql_cdc.factory.validate_options`
            builds them from raw option strings).
        start_position: a position stored from an earlier run (``event.position`` of the last
            event written); None starts as ``scan.startup.mode`` says.

    Events (:class:`~changelake.changelog.event.DataChangeEvent`) carry the table, the op,
    before/after rows of Python values (see :mod:`~changelake.connectors.mysql_cdc.values`), the
    table schema at the event, ``ts_ms`` (commit time in ms from the binlog header, second
    resolution; 0 for snapshot rows) and ``position`` (JSON-serialisable, the position *after* the
    event). Changelog mode: all kinds (+I, -U, +U, -D), as Flink CDC's MySQL source.

    Keys (:class:`~changelake.connectors.base.GuaranteesKeys`): every change event carries its
    table's schema (the snapshot readers' and the binlog table map's, ``metadata.list`` columns
    appended), and its rows are whole: the snapshot selects every column, and the binlog reader
    refuses a row image that is not FULL (``BinlogSettingsError`` at :meth:`open` for
    ``binlog_row_image`` != FULL, ``RowImageError`` for a rows event whose image lacks a column).
    MySQL and MariaDB make every primary-key column NOT NULL, so a key value is missing only where
    this source reads a non-NULL value as None: a zero or partial date in a DATE, DATETIME or
    TIMESTAMP key column. A poll that returned an event of a table with such a key column is
    not vouched for (``last_poll_keyed`` False: the stage checks its keys and refuses the NULL).
    A TRUNCATE / DROP TABLE whose table definition the binlog reader cannot know (the table gone
    from information_schema before the reader got there, no table map of it read since it was
    created) gets the schema of the last event of its table this source emitted, whatever the
    pipeline's stage: what the stage gave it in the default set-up; with a transform, the rule
    now transforms that schema instead of the stage taking the last one it wrote for the table.
    """

    #: row kinds this source produces (Flink's ChangelogMode.all()).
    changelog_mode: frozenset[RowKind] = RETRACT

    def __init__(self, options: MySqlSourceOptions, start_position: Mapping[str, Any] | None = None, *,
                 pipeline: str | None = None) -> None:
        self.options = options
        self._start = SourcePosition.from_dict(start_position) if start_position else None
        tables = start_position.get("tables") if start_position else None
        self._start_tables: tuple[str, ...] | None = tuple(str(t) for t in tables) if isinstance(tables, list) else None
        self._ctl: Any = None
        self._snapshot: SnapshotReader | IncrementalSnapshotReader | None = None
        #: binlog phase after an incremental snapshot: Flink CDC's shouldEmit by chunk high watermarks.
        self._filter: WatermarkFilter | None = None
        #: tables whose existing rows an ``ADD COLUMN ... DEFAULT x`` just filled: re-read once the
        #: position is past that statement (:meth:`_start_signal_snapshot`).
        self._refill: list[str] = []
        self._reader: BinlogReader | ProcessBinlogReader | None = None
        self._position: SourcePosition | None = self._start
        self._consumed: tuple[tuple[str, int], int] | None = None
        self._target: tuple[tuple[str, int], int] | None = None
        self._finished = False
        self._server_id: int | None = None
        self._tables: list[TableId] = []
        #: tables whose changes this pipeline has delivered or snapshotted (``db.table``), kept in
        #: :attr:`position` so that a later run can tell newly added tables apart.
        self._known: set[str] = set()
        #: the definitions the last snapshot read and the binlog readers' warm-ups found: the next
        #: reader's last-known schemas of tables dropped before it starts (SchemaTracker ``known``)
        self._snapshot_schemas: dict[str, TableSchema] = {}
        self._known_ids: set[TableId] = set()
        self._captured = CapturedTables(options.tables, options.tables_exclude)
        #: Debezium's signal.data.collection: its rows are read from the binlog too (signals.py)
        self._signal_table = (TableId.parse(options.signal_data_collection)
                              if options.signal_data_collection and "source" in options.signal_enabled_channels else None)
        #: a running ad-hoc (signalled) snapshot: {"id": signal id, "conditions": {db.t: [filter, ...]}};
        #: part of the position while it runs, so that a restart resumes it with its filters
        raw_adhoc = start_position.get("adhoc_snapshot") if start_position else None
        self._adhoc: dict[str, Any] | None = (dict(raw_adhoc) if isinstance(raw_adhoc, Mapping) and self._start is not None
                                              and self._start.snapshot is not None else None)
        #: while an ad-hoc snapshot runs: a binlog reader from the signal point that looks for stop-snapshot rows
        self._signal_watch: BinlogReader | ProcessBinlogReader | None = None
        #: Debezium's Kafka signaling channel; its next offset is part of the position (``signal_offset``)
        self._kafka_signals: KafkaSignalChannel | None = None
        if "kafka" in options.signal_enabled_channels:
            if not pipeline:
                raise OptionValidationError("the Kafka signaling channel needs the pipeline name (the signal records' key)",
                                            option="signal.enabled.channels")
            stored = start_position.get("signal_offset") if start_position else None
            assert options.signal_kafka_bootstrap_servers is not None  # validate_options
            self._kafka_signals = KafkaSignalChannel(
                options.signal_kafka_bootstrap_servers, options.signal_kafka_topic or f"{pipeline}-signal",
                options.signal_kafka_group_id, pipeline, int(stored) if isinstance(stored, int) else None,
                options.signal_kafka_poll_timeout_ms / 1000.0)
        self._reader_captured = (SignalCaptured(self._captured, self._signal_table) if self._signal_table is not None
                                 else self._captured)
        self._resume_after_snapshot: SourcePosition | None = None
        self._metadata = _MetadataColumns(options.metadata_list) if options.metadata_list else None
        self._hint_conn: Any = None
        self._heartbeat = (HeartbeatAction(options.heartbeat_action_query, options.heartbeat_interval.total_seconds(),
                                           options.connection_kwargs()) if options.heartbeat_action_query else None)
        #: Debezium's provide.transaction.metadata / heartbeat.interval.ms (take_side_records)
        self._tx_monitor = TransactionMonitor() if options.provide_transaction_metadata else None
        if self._tx_monitor is not None and self._start is not None:
            raw_tx = start_position.get("transaction") if start_position else None
            b = self._start.binlog
            self._tx_monitor.restore(raw_tx if isinstance(raw_tx, Mapping) else None, b.file, b.pos, b.row)
        self._heartbeats = HeartbeatRecords(options.heartbeat_interval_ms / 1000.0) if options.heartbeat_interval_ms > 0 else None
        self._side: list[SideRecord] = []
        #: after an incremental snapshot: chunks, backfills (chunks whose watermarks differed),
        #: backfilled_changes, peak_buffered_rows, parallelism (for logs and tests).
        self.snapshot_stats: dict[str, int] = {}
        #: GuaranteesKeys: the last poll's events need no key check nor schema (see the class doc)
        self.last_poll_keyed = True
        #: the schema of the last event emitted per table (a schema-less TRUNCATE / DROP TABLE's)
        self._emitted_schemas: dict[TableId, Schema] = {}
        #: per schema (by id): True when no key column may be read as None (``_MAY_READ_AS_NONE``)
        self._keys_never_none: dict[int, tuple[Schema, bool]] = {}
        #: set for good by a change event without schema (none is emitted): no poll is vouched for
        self._unkeyed = False

    def __repr__(self) -> str:
        return f"MySqlSource(options={self.options!r}, position={self.position!r})"

    # -- properties ----------------------------------------------------------------------------
    @property
    def position(self) -> dict[str, Any] | None:
        """The position after the last event returned (or progress seen), JSON-serialisable.

        Besides the resume point (see :mod:`~changelake.connectors.mysql_cdc.positions`) it lists
        the captured tables (``"tables": ["db.t", ...]``), which ``scan.newly-added-table.enabled``
        compares with ``tables`` on the next run.
        """
        if self._position is None:
            return None
        out = self._position.to_dict()
        out["tables"] = sorted(self._known)
        tx = self._tx_monitor.state() if self._tx_monitor is not None else None
        if tx is not None:  # an open transaction's counts, so that a restart's END counts every event
            out["transaction"] = tx
        if self._kafka_signals is not None and self._kafka_signals.offset is not None:
            out["signal_offset"] = self._kafka_signals.offset
        if self._adhoc is not None and self._position.snapshot is not None:
            out["adhoc_snapshot"] = self._adhoc
        return out

    def take_side_records(self) -> list[SideRecord]:
        """Debezium's transaction metadata (BEGIN/END, ``provide.transaction.metadata``) and
        heartbeat records (``heartbeat.interval.ms``) of the polls since the last call, in order;
        they belong with :attr:`position` as it is now (see :class:`~changelake.connectors.base.EmitsSideRecords`)."""
        out, self._side = self._side, []
        return out

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
        """True if ``tables`` selects the table and ``tables.exclude`` does not (memoized: the
        binlog reader asks for every table-map and rows event)."""
        return self._captured(table_id)

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
        mode = self.options.scan_startup_mode
        if self.options.server_time_zone:
            check_server_time_zone(self._ctl, self.options.server_time_zone)
        check_privileges(self._ctl, [], needs_snapshot=False, version=variables.get("version", ""), user=self.options.username)
        self._tables = self._find_tables()
        needs_snapshot = (self._start is None and mode in (StartupMode.INITIAL, StartupMode.SNAPSHOT)) or (
            self._start is not None and (self._start.snapshot is not None or self.options.newly_added_table_enabled))
        check_privileges(self._ctl, self._tables, needs_snapshot=needs_snapshot, version=variables.get("version", ""),
                         user=self.options.username)
        if self._signal_table is not None:
            self._warn_missing_signal_table(self._signal_table)
        own = int(variables["server_id"]) if variables.get("server_id") else None
        self._server_id = self._choose_server_id(own)
        if self._kafka_signals is not None:
            self._kafka_signals.open()

        start = self._start
        stored_tables = self._stored_tables
        new_tables = self._newly_added(stored_tables) if start is not None else []
        self._known = set(stored_tables or ()) | {str(t) for t in self._tables if str(t) not in new_tables}
        if start is not None and start.snapshot is not None:
            self._check_binlog_exists(start.binlog)
            progress = start.snapshot
            if new_tables:  # the snapshot is not finished: the new tables join it
                progress = SnapshotProgress(progress.tables + tuple(t for t in new_tables if t not in progress.tables), progress.after_key,
                                            progress.marks)
            if start.xa_prepared or start.watermarks:
                # a newly-added-table snapshot interrupted: keep the prepared XA groups; a re-read
                # during the binlog join of an incremental snapshot: keep its chunk high watermarks
                self._resume_after_snapshot = replace(start, snapshot=None)
            if self._adhoc is not None:  # an ad-hoc snapshot interrupted: it resumes with its filters
                log.info("resuming the ad-hoc snapshot of signal %r: %s", self._adhoc.get("id"), list(progress.tables))
            self._start_snapshot(progress, start.binlog)
            if self._adhoc is not None:
                self._watch_signals(start.binlog)
        elif start is not None:
            self._check_binlog_exists(start.binlog)
            for prepared in start.xa_prepared:
                self._check_binlog_exists(BinlogPosition(prepared.file, prepared.pos))
            if new_tables:
                # snapshot the new tables first; then every table streams from the stored position
                # (the new tables' changes since then are replayed on top of their snapshot)
                log.info("scan.newly-added-table.enabled: snapshotting newly added tables %s, then streaming from %s",
                         new_tables, start.binlog)
                self._resume_after_snapshot = start
                self._start_snapshot(self._new_progress(tuple(new_tables)), start.binlog)
            else:
                self._start_binlog(start)
        elif mode in (StartupMode.INITIAL, StartupMode.SNAPSHOT):
            self._start_snapshot(self._new_progress(tuple(str(t) for t in self._tables)), None)
        elif mode is StartupMode.LATEST_OFFSET:
            self._start_binlog(self._master_status())
        elif mode is StartupMode.EARLIEST_OFFSET:
            self._start_binlog(earliest_position(self._ctl))
        elif mode is StartupMode.TIMESTAMP:
            assert self.options.startup_timestamp_millis is not None
            ts = self.options.startup_timestamp_millis
            self._start_binlog(timestamp_start_file(self.options.connection_kwargs(), self._server_id, self._ctl, ts), min_ts_ms=ts)
        elif self.options.specific_offset_gtid_set:
            (gtid,) = parse_gtid_set(self.options.specific_offset_gtid_set).values()
            self._start_binlog(gtid_start_position(self._ctl, gtid))
        else:
            assert self.options.specific_offset_file and self.options.specific_offset_pos is not None
            pos = BinlogPosition(self.options.specific_offset_file, self.options.specific_offset_pos)
            self._check_binlog_exists(pos, "binlog position of 'scan.startup.specific-offset.file' / '.pos'")
            self._start_binlog(pos)

    @property
    def _stored_tables(self) -> list[str] | None:
        return None if self._start_tables is None else list(self._start_tables)

    def _newly_added(self, stored: list[str] | None) -> list[str]:
        """Captured tables the stored position does not list (``scan.newly-added-table.enabled``)."""
        if not self.options.newly_added_table_enabled:
            return []
        if stored is None:
            log.warning("scan.newly-added-table.enabled: the stored position lists no tables (written by an older "
                        "version); newly added tables cannot be told apart and are streamed without a snapshot")
            return []
        known = set(stored)
        return [str(t) for t in self._tables if str(t) not in known]

    def _warn_missing_signal_table(self, table: TableId) -> None:
        """Warn when ``signal.data.collection`` names no existing table: its signals are then never
        seen (a typo would otherwise go unnoticed; as Debezium, the table may be created later,
        so this is a warning, not a refusal)."""
        with self._ctl.cursor() as cur:
            cur.execute("SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                        (table.database, table.table))
            if cur.fetchone() is None:
                log.warning("signal.data.collection %r: no such table on %s:%s; signals from the signal table "
                            "are not seen until it exists (CREATE TABLE %s (id VARCHAR(42) PRIMARY KEY, type "
                            "VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL))", str(table), self.options.hostname,
                            self.options.port, str(table))

    def close(self) -> None:
        """Stop reading and close every connection (idempotent)."""
        self._stop_watching()
        if self._kafka_signals is not None:
            self._kafka_signals.close()
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._snapshot is not None:
            self._snapshot.close()
            self._snapshot = None
        close_quietly(self._ctl)
        close_quietly(self._hint_conn)
        if self._heartbeat is not None:
            self._heartbeat.close()
        self._ctl = self._hint_conn = None

    def __enter__(self) -> "MySqlSource":
        self.open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- reading --------------------------------------------------------------------------------
    def poll(self, max_events: int = 1000, timeout_s: float = 1.0) -> list[DataChangeEvent]:
        """Up to ``max_events`` change events, waiting at most about ``timeout_s`` seconds;
        ``last_poll_keyed`` says whether they need the stage's key check (see the class doc).

        Raises:
            SourceError: the binlog reader failed: BinlogConnectionLostError (no connection within
                ``connect.timeout``), RowImageError / StatementFormatError /
                UnsupportedBinlogEventError / XaTransactionError (an event it must not skip),
                or an undecodable value.
        """
        events = self._poll(max_events, timeout_s)
        self.last_poll_keyed = self._keyed(events)
        return events

    def _keyed(self, events: list[DataChangeEvent]) -> bool:
        """True when no event of ``events`` needs the stage's key check or schema (the
        :class:`~changelake.connectors.base.GuaranteesKeys` guarantee); gives a TRUNCATE / DROP
        TABLE without schema (in place) the schema of the last event of its table emitted, as the
        stage would. One pass; the key's column types are looked at once per schema."""
        keyed = not self._unkeyed
        emitted = self._emitted_schemas
        table: TableId | None = None
        schema: Schema | None = None
        for i, event in enumerate(events):
            if event.schema is None:
                table = None
                if event.op is Op.TRUNCATE:
                    last = emitted.get(event.table)
                    if last is not None:
                        events[i] = replace(event, schema=last)
                    continue
                # not emitted by this source (every row event carries its schema): the stage infers
                # one, which later truncates of the table would get; none is vouched for from here on
                emitted.pop(event.table, None)
                self._unkeyed = True
                keyed = False
                continue
            if event.schema is schema and event.table is table:
                continue  # a run of one table's events (one rows event, one snapshot chunk)
            schema, table = event.schema, event.table
            emitted[table] = schema
            if keyed:
                hit = self._keys_never_none.get(id(schema))
                if hit is None or hit[0] is not schema:
                    if len(self._keys_never_none) > 10000:
                        self._keys_never_none.clear()
                    hit = self._keys_never_none[id(schema)] = (schema, all(
                        k in schema and schema.column(k).type.root not in _MAY_READ_AS_NONE
                        for k in schema.primary_key))
                keyed = hit[1]
        return keyed

    def _poll(self, max_events: int, timeout_s: float) -> list[DataChangeEvent]:
        """:meth:`poll` without its ``last_poll_keyed``."""
        if self._snapshot is not None:
            self._signals_during_snapshot()
            events = self._snapshot.read(max_events) if not self._snapshot.done else []
            resume = self._resume_after_snapshot
            if events:
                self._position = SourcePosition.from_dict(events[-1].position)
                if resume is not None and (resume.xa_prepared or resume.watermarks):
                    # kept while the snapshot runs, so that a restart resumes with them
                    self._position = replace(self._position, xa_prepared=resume.xa_prepared,
                                             watermarks=resume.watermarks)
                self._known.update(str(e.table) for e in events)
            if self._snapshot.done:
                binlog_pos = self._snapshot.binlog_position
                assert binlog_pos is not None
                watermarks = None
                if isinstance(self._snapshot, IncrementalSnapshotReader):
                    # the binlog from the smallest high watermark, filtered by the chunks' hws
                    flt = self._snapshot.binlog_filter()
                    if resume is not None and resume.watermarks:
                        flt = WatermarkFilter({**marks_from_json(resume.watermarks), **flt.tables})
                    if flt.min_hw is not None and all(str(t) in flt.tables for t in self._tables):
                        # every captured table was snapshotted: nothing before the smallest hw is emitted
                        binlog_pos = flt.min_hw
                    # else (newly added tables, resumed): from the stored position, which the other
                    # tables have streamed up to; the filter holds back only the snapshotted tables' rows
                    watermarks = flt.to_json() if flt.active else None
                    snap = self._snapshot
                    self.snapshot_stats = {"chunks": snap.chunks_done, "backfilled_changes": snap.backfilled_changes,
                                           "backfills": snap.backfills, "peak_buffered_rows": snap.peak_buffered_rows,
                                           "parallelism": snap.parallelism}
                    log.info("incremental snapshot done: %d chunks, %d binlog changes back-filled, at most %d rows "
                             "buffered; binlog from %s", self._snapshot.chunks_done, self._snapshot.backfilled_changes,
                             self._snapshot.peak_buffered_rows, binlog_pos)
                self._known.update(self._snapshot.tables_read)
                self._snapshot_schemas.update(self._snapshot.schemas)
                self._snapshot.close()
                self._snapshot = None
                self._stop_watching()
                self._adhoc = None
                if resume is not None:
                    self._resume_after_snapshot = None
                    # a re-read during the binlog join of an incremental snapshot (an ALTER that
                    # filled a column) streams on with that snapshot's chunk high watermarks
                    resume = replace(resume, snapshot=None,
                                     watermarks=watermarks if watermarks is not None else resume.watermarks)
                    self._position = resume
                    self._start_binlog(resume)
                else:
                    self._position = SourcePosition(binlog_pos, None, (), watermarks)
                    if self.options.scan_startup_mode is StartupMode.SNAPSHOT:
                        self._finished = True
                    else:
                        self._start_binlog(self._position)
            if events:
                return self._metadata.apply(events) if self._metadata else events
        if self._reader is None:
            return []
        if self._heartbeat is not None:
            self._heartbeat.maybe_run()  # Debezium's heartbeat.action.query, while streaming
        if self._kafka_signals is not None and self._kafka_signal_while_streaming():
            self._after_poll()
            return []  # an execute-snapshot from Kafka starts here: its rows come with the next polls
        if self._filter is not None:
            filtered = self._poll_filtered(max_events, timeout_s)
            self._after_poll()
            return filtered
        out: list[DataChangeEvent] = []
        seen = self._known_ids
        last_event: DataChangeEvent | None = None
        monitor = self._tx_monitor
        signal_table = self._signal_table
        snapshot_now: tuple[Signal, list[str], dict[str, list[str]]] | None = None
        for kind, item in self._reader.take(max_events, timeout_s):
            if kind == "event":
                if signal_table is not None and item.table == signal_table:
                    snapshot_now = self._on_signal_row(item)
                    if not self._captured(item.table):  # not a change event of this pipeline
                        last_event = item  # the position passes the signal row
                        if snapshot_now is not None:
                            break  # the rest of this batch is read again after the snapshot
                        continue
                if monitor is not None:
                    item = monitor.on_event(item)
                out.append(item)
                last_event = item
                if item.table not in seen:
                    seen.add(item.table)
                    self._known.add(str(item.table))
                if item.schema_change == DROP_TABLE:  # no longer listed: a later DROP DATABASE skips it
                    seen.discard(item.table)
                    self._known.discard(str(item.table))
                if snapshot_now is not None:
                    break  # (a captured signal table) the rest of this batch is read again after the snapshot
            elif kind == "progress":
                assert isinstance(item, Progress)
                last_event = None
                self._position = item.position
                self._consumed = (binlog_file_index(item.file), item.next_pos)
                if monitor is not None:
                    monitor.on_progress(item.position.binlog.file, item.position.binlog.pos)
                if self._refill:  # past the ALTER: re-read its tables, then stream on from here
                    snapshot_now = (Signal("add-column-fill", "execute-snapshot", {}), self._refill, {})
                    self._refill = []
                    break  # the rest of this batch is read again after the snapshot
            elif kind == "resnapshot":
                if str(item) not in self._refill:
                    self._refill.append(str(item))
            elif kind == "schemas":
                self._remember_schemas(item)
        if last_event is not None:
            self._position = SourcePosition.from_dict(last_event.position)
        if snapshot_now is not None:
            self._start_signal_snapshot(*snapshot_now)
        self._after_poll()
        return self._metadata.apply(out) if self._metadata and out else out

    def _remember_schemas(self, schemas: tuple[TableSchema, ...]) -> None:
        """Keep a reader's warm-up definitions for the readers started after it: a re-read (a
        renamed table, a filled column) stops the reader and starts a new one, by when a table
        the old one knew may be dropped (a ``DROP DATABASE`` right after a ``RENAME TABLE``) and
        its definition gone from information_schema."""
        self._snapshot_schemas.update((str(s.table_id), s) for s in schemas)

    def _poll_filtered(self, max_events: int, timeout_s: float) -> list[DataChangeEvent]:
        """:meth:`poll` while the chunk high watermarks filter the binlog (Flink CDC's
        ``BinlogSplitReader.shouldEmit``): positions carry the watermarks until the largest hw is
        passed, so a restart keeps filtering."""
        flt = self._filter
        assert flt is not None and self._reader is not None
        out: list[DataChangeEvent] = []
        refill_now = False
        for kind, item in self._reader.take(max_events, timeout_s):
            if kind == "event":
                if self._signal_table is not None and item.table == self._signal_table:
                    self._on_signal_row(item)  # logged; execute-snapshot waits for the filter to end
                    if not self._captured(item.table):
                        self._position = replace(SourcePosition.from_dict(item.position),
                                                 watermarks=flt.to_json() if flt.active else None)
                        continue
                if item.table not in self._known_ids:
                    self._known_ids.add(item.table)
                    self._known.add(str(item.table))
                if item.schema_change == DROP_TABLE:  # as in poll
                    self._known_ids.discard(item.table)
                    self._known.discard(str(item.table))
                kept = flt.apply(item)
                if self._tx_monitor is not None:
                    kept = [self._tx_monitor.on_event(e) for e in kept]
                wm = flt.to_json() if flt.active else None
                pos = SourcePosition.from_dict(item.position)
                self._position = replace(pos, watermarks=wm)
                if kept:
                    position = dict(item.position)
                    if wm is not None:
                        position["watermarks"] = wm
                    out.extend(replace(e, position=position) for e in kept)
            elif kind == "resnapshot":
                # chunks read before the ALTER lack the values MySQL filled in: the table is read
                # again right after the statement, as while streaming (poll), and the binlog then
                # goes on from there with the same chunk high watermarks
                if str(item) not in self._refill:
                    self._refill.append(str(item))
            elif kind == "schemas":
                self._remember_schemas(item)
            elif kind == "progress":
                assert isinstance(item, Progress)
                flt.passed(item.file, item.next_pos)
                if self._tx_monitor is not None:
                    self._tx_monitor.on_progress(item.position.binlog.file, item.position.binlog.pos)
                self._position = replace(item.position, watermarks=flt.to_json() if flt.active else None)
                self._consumed = (binlog_file_index(item.file), item.next_pos)
                if self._refill:
                    refill_now = True
                    break  # the rest of this batch is read again after the re-read
        if refill_now:
            tables, self._refill = self._refill, []
            self._start_signal_snapshot(Signal("add-column-fill", "execute-snapshot", {}), tables, {})
            self._filter = None  # restored from the position's watermarks when the binlog resumes
        elif not flt.active:
            log.info("binlog passed the largest snapshot chunk high watermark; every change is emitted from here on")
            self._filter = None
        return self._metadata.apply(out) if self._metadata and out else out

    def _on_signal_row(self, event: DataChangeEvent) -> tuple[Signal, list[str], dict[str, list[str]]] | None:
        """A row of ``signal.data.collection`` read while streaming: see :meth:`_on_signal`."""
        signal = parse_signal(event)
        return self._on_signal(signal, dict(event.position)) if signal is not None else None

    def _on_signal(self, signal: Signal, offset: Any = None) -> tuple[Signal, list[str], dict[str, list[str]]] | None:
        """Act on a signal read while streaming: (signal, tables, additional conditions) when an
        ``execute-snapshot`` is to start right after it, else None (other signals are logged;
        ``offset``: the position the signal arrived at, for a ``log`` signal's ``{}``)."""
        if signal.type == "execute-snapshot":
            kind = str(signal.data.get("type", "incremental")).lower()
            if kind not in ("incremental", "blocking"):
                log.warning("signal %r: execute-snapshot of type %r is not supported (incremental, blocking); ignored",
                            signal.id, kind)
                return None
            if self._filter is not None:
                log.warning("signal %r: execute-snapshot ignored: the binlog is still joined to the initial incremental "
                            "snapshot by its chunk high watermarks; signal again once that is done", signal.id)
                return None
            tables = snapshot_tables(signal, self._tables)
            if not tables:
                return None
            try:
                conditions = parse_conditions(signal.id, signal.data, tables)
                for name, texts in conditions.items():  # refuse a bad filter now, not when the snapshot reads
                    self._ctl = _alive(self._ctl, self.options.connection_kwargs())
                    schema = load_table_schema(self._ctl, TableId.parse(name))
                    where_clause(texts, [c.name for c in schema.columns], signal_id=signal.id, table=name)
            except AdditionalConditionError as exc:
                log.error("%s; the signal is ignored", exc)
                return None
            return signal, tables, conditions
        if signal.type == "stop-snapshot":
            log.warning("signal %r: stop-snapshot: no ad-hoc snapshot is in progress; ignored", signal.id)
        elif signal.type == "log":
            log_signal(signal, offset if offset is not None else self._position_dict())
        else:
            log.warning("signal %r: unknown signal type %r; ignored", signal.id, signal.type)
        return None

    def _start_signal_snapshot(self, signal: Signal, tables: list[str], conditions: dict[str, list[str]]) -> None:
        """Debezium's execute-snapshot: stop streaming right after the signal, snapshot ``tables``
        (chunked by primary key, only rows matching ``conditions``, progress in the stored
        position), then stream on from the signal without any filter: every change after it is
        replayed on top of the snapshot rows, so an upserting consumer ends equal to MySQL (deletes
        included). A ``kill -9`` during the snapshot resumes it from the stored progress; the signal
        is not read again. While it runs, the signal table is watched for ``stop-snapshot``."""
        assert self._position is not None and self._reader is not None
        at = self._position
        log.info("signal %r: execute-snapshot of %s%s at %s; streaming resumes there afterwards", signal.id, tables,
                 f" with additional-conditions {conditions}" if conditions else "", at.binlog)
        self._reader.close()
        self._reader = None
        self._target = None
        self._resume_after_snapshot = at
        self._adhoc = {"id": signal.id, "conditions": conditions}
        self._start_snapshot(SnapshotProgress(tuple(tables)), at.binlog, conditions)
        self._watch_signals(at.binlog)

    def _watch_signals(self, at: BinlogPosition) -> None:
        """While an ad-hoc snapshot runs (streaming is paused): a binlog reader from ``at`` (the
        signal point) that only looks for signal rows, so that ``stop-snapshot`` is acted on during
        the snapshot, in binlog order. Its events are dropped: streaming re-reads them afterwards."""
        if self._signal_table is None or self._signal_watch is not None:
            return
        self._signal_watch = self._make_reader(SourcePosition(at))
        self._signal_watch.start()

    def _stop_watching(self) -> None:
        if self._signal_watch is not None:
            self._signal_watch.close()
            self._signal_watch = None

    def _signals_during_snapshot(self) -> None:
        """Signals that arrived while the snapshot runs: ``stop-snapshot`` stops it (for its
        tables); an ``execute-snapshot`` waits (the signal table's is re-read when streaming
        resumes, a Kafka one stays un-acked); ``log`` is logged."""
        for _ in range(20):  # drain what the watcher has read (bounded per poll)
            if self._signal_watch is None:
                break
            items = self._signal_watch.take(1000, 0.0)
            for kind, item in items:
                if kind == "event" and item.table == self._signal_table:
                    signal = parse_signal(item)
                    if signal is not None and signal.type == "stop-snapshot":
                        self._stop_snapshot(signal)
            if len(items) < 1000:
                break
        channel = self._kafka_signals
        while channel is not None and self._snapshot is not None and not self._snapshot.done:
            head = channel.peek()
            if head is None:
                return
            signal = head[1]
            if signal is None:
                channel.ack()
            elif signal.type == "stop-snapshot":
                self._stop_snapshot(signal)
                channel.ack()
            elif signal.type == "log":
                log_signal(signal, self._position_dict())
                channel.ack()
            else:  # acted on when streaming resumes (the stored offset stays before it)
                return

    def _position_dict(self) -> dict[str, Any] | None:
        """The current source position as JSON (None before the first one)."""
        return self._position.to_dict() if self._position is not None else None

    def _stop_snapshot(self, signal: Signal) -> None:
        """Debezium's ``stop-snapshot``: the running ad-hoc snapshot stops for the named tables
        (``data-collections``, names or regular expressions; all when none are named); rows
        already emitted stay, and the stored progress no longer lists the stopped tables."""
        snap = self._snapshot
        kind = str(signal.data.get("type", "incremental")).lower()
        if snap is None or self._adhoc is None or not isinstance(snap, SnapshotReader):
            log.warning("signal %r: stop-snapshot: no ad-hoc snapshot is in progress; ignored", signal.id)
            return
        if kind != "incremental":
            log.warning("signal %r: stop-snapshot of type %r is not supported (incremental); ignored", signal.id, kind)
            return
        wrong = collections_shape_error(signal)
        if wrong is not None:  # not "all tables": the user meant some
            log.warning("%s; the stop-snapshot is ignored", wrong)
            return
        running = [TableId.parse(t) for t in snap.progress.tables]
        names = signal.data.get("data-collections")
        chosen = snapshot_tables(signal, running) if isinstance(names, list) and names else [str(t) for t in running]
        dropped = snap.stop_tables(chosen)
        log.info("signal %r: stop-snapshot: the ad-hoc snapshot of signal %r stops for %s%s", signal.id,
                 self._adhoc.get("id"), dropped or "no table (none of them is still being read)",
                 "" if snap.progress.tables else "; streaming resumes at the snapshot's signal point")
        if self._position is not None and self._position.snapshot is not None:
            self._position = replace(self._position, snapshot=snap.progress)

    def _kafka_signal_while_streaming(self) -> bool:
        """Act on Kafka signals while streaming; True when an execute-snapshot has just started."""
        channel = self._kafka_signals
        assert channel is not None
        while True:
            head = channel.peek()
            if head is None:
                return False
            signal = head[1]
            if signal is None:
                channel.ack()
                continue
            if signal.type == "execute-snapshot" and self._position is not None and self._reader is not None:
                found = self._on_signal(signal)
                channel.ack()  # the position after this poll carries the offset past the signal
                if found is not None:
                    self._start_signal_snapshot(*found)
                    return True
                continue
            self._on_signal(signal)
            channel.ack()

    def _after_poll(self) -> None:
        """Collect this poll's transaction records and, when due, a heartbeat record."""
        if self._tx_monitor is not None:
            self._side.extend(self._tx_monitor.take())
        if self._heartbeats is not None:
            beat = self._heartbeats.maybe_emit()
            if beat is not None:
                self._side.append(beat)

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
        if self._kafka_signals is not None and not self._kafka_signals.caught_up():
            return False  # a signal sent before this check is acted on before the run may stop
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
            raise OptionValidationError(f"Cannot find any table by the option 'tables' = {self.options.tables.text}"
                                        f"{_existing_tables(everything, self.options.tables.text)}", option="tables")
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

    def _check_binlog_exists(self, pos: BinlogPosition, what: str = "stored binlog position") -> None:
        with self._ctl.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            sizes = {str(r[0]): int(r[1]) for r in cur.fetchall()}
        files = list(sizes)
        if pos.file not in sizes:
            raise BinlogPurgedError(pos.file, pos.pos, files, what)
        if pos.pos > sizes[pos.file]:
            raise SourceError(
                f"The binlog position {pos.file}:{pos.pos} lies beyond the end of that file ({sizes[pos.file]} bytes): "
                "it does not belong to this server's binlog (was the server or its binlog reset?). To re-snapshot, "
                "delete the pipeline's stored offsets (or use a new pipeline name) and start with "
                "'scan.startup.mode' = 'initial'."
            )

    def _new_progress(self, tables: tuple[str, ...]) -> SnapshotProgress:
        return new_progress(tables) if self.options.incremental_snapshot_enabled else SnapshotProgress(tables)

    def _free_server_ids(self, n: int) -> list[int]:
        """``n`` ids of the ``server-id`` range for the chunk readers: the chosen id first, then
        others no replica uses (fewer if the range has fewer free)."""
        assert self._server_id is not None
        used = set(self._used_server_ids())
        ids = [self._server_id] + [i for i in self.options.server_id.ids() if i != self._server_id and i not in used]
        return ids[:max(1, n)]

    def _start_snapshot(self, progress: SnapshotProgress, binlog_pos: BinlogPosition | None,
                        conditions: Mapping[str, list[str]] | None = None) -> None:
        o = self.options
        if conditions is None and self._adhoc is not None:
            raw = self._adhoc.get("conditions")
            conditions = ({str(k): [str(x) for x in v] for k, v in raw.items() if isinstance(v, list)}
                          if isinstance(raw, Mapping) else None)
        if progress.marks is not None:  # incremental (a stored incremental snapshot resumes as one)
            ids = self._free_server_ids(o.snapshot_parallelism())
            self._snapshot = IncrementalSnapshotReader(
                o.connection_kwargs(), progress, o.chunk_size, o.snapshot_fetch_size, ids, binlog_pos,
                chunk_key_column=o.chunk_key_column, upper_bound=o.chunk_key_factor_upper_bound,
                lower_bound=o.chunk_key_factor_lower_bound, include_comments=o.include_comments_enabled,
                tinyint1_as_boolean=o.treat_tinyint1_as_boolean, backfill_timeout_s=max(30.0, o.connect_timeout.total_seconds()),
            )
            try:
                pos = self._snapshot.open()
            except Exception:
                self._snapshot.close()
                self._snapshot = None
                raise
            self._position = SourcePosition(pos, progress)
            return
        self._snapshot = SnapshotReader(
            o.connection_kwargs(), progress, o.chunk_size, o.snapshot_fetch_size, binlog_pos,
            chunk_key_column=o.chunk_key_column, include_comments=o.include_comments_enabled,
            tinyint1_as_boolean=o.treat_tinyint1_as_boolean, conditions=conditions,
            signal_id=str(self._adhoc.get("id", "?")) if self._adhoc is not None else "?",
        )
        pos = self._snapshot.open()
        self._position = SourcePosition(pos, progress)

    def _start_binlog(self, start: BinlogPosition | SourcePosition, min_ts_ms: int = 0) -> None:
        """Start the binlog reader at ``start``: in a worker process (default), or in a thread of
        this process when the environment sets ``CHANGELAKE_MYSQL_CDC_READER=thread`` (same events
        and positions).

        The process is the default: binlog decoding and the Kafka writer then use two cores instead
        of sharing one GIL. On the shared 2-core machine the two were within each other's noise
        once the worker's pipe was widened (1.65x / 1.32x Debezium's streaming rate against
        1.67x / 1.05x for the thread, ``bench/README.md`` "Figures after the background commit").
        The worker exits within 0.1 s of its parent's death, so a ``kill -9`` of the pipeline
        frees the ``server-id`` for the relaunch."""
        pos = start.binlog if isinstance(start, SourcePosition) else start
        begin = start if isinstance(start, SourcePosition) else SourcePosition(start)
        reader = self._make_reader(begin, min_ts_ms)
        self._reader = reader
        self._filter = WatermarkFilter(marks_from_json(begin.watermarks)) if begin.watermarks else None
        reader.start()
        if self._position is None or self._position.snapshot is not None:
            self._position = begin if isinstance(start, SourcePosition) else SourcePosition(pos)

    def _make_reader(self, begin: SourcePosition, min_ts_ms: int = 0) -> BinlogReader | ProcessBinlogReader:
        """A binlog reader (not started) from ``begin``: see :meth:`_start_binlog`."""
        conn_kwargs = self.options.connection_kwargs()
        assert self._server_id is not None
        reader: BinlogReader | ProcessBinlogReader
        # the captured tables that exist at ``begin``, for a DROP DATABASE: those the stored position
        # lists (delivered or snapshotted, not dropped since) and those information_schema showed at open
        existing = frozenset(t for t in {*map(TableId.parse, self._known), *self._tables} if self._captured(t))
        if os.environ.get("CHANGELAKE_MYSQL_CDC_READER", "process") != "thread":
            reader = ProcessBinlogReader(ReaderConfig(
                conn_kwargs, self._server_id, begin, self._reader_captured, self.options.include_comments_enabled,
                self.options.treat_tinyint1_as_boolean, self.options.heartbeat_interval.total_seconds(),
                self.options.connect_timeout.total_seconds(), min_ts_ms, existing,
                tuple(self._snapshot_schemas.values()),
            ))
        else:
            # The hints loader runs in the reader thread; give it its own connection.
            close_quietly(self._hint_conn)
            self._hint_conn = text_connection(conn_kwargs)

            def thread_hints(table_id: TableId) -> TableSchema | None:
                self._hint_conn = _alive(self._hint_conn, conn_kwargs)
                try:
                    return load_table_schema(self._hint_conn, table_id, include_comments=self.options.include_comments_enabled,
                                             tinyint1_as_boolean=self.options.treat_tinyint1_as_boolean)
                except SourceError:  # the table is gone: decode from the table-map alone
                    return None

            reader = BinlogReader(
                conn_kwargs, self._server_id, begin, self._reader_captured,
                SchemaTracker(thread_hints, self._snapshot_schemas.values()),
                heartbeat_s=self.options.heartbeat_interval.total_seconds(),
                connect_timeout_s=self.options.connect_timeout.total_seconds(), min_ts_ms=min_ts_ms,
                existing=existing,
            )
        return reader


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


def _existing_tables(tables: list[TableId], pattern: str, shown: int = 20) -> str:
    """``". Tables on the server: a.b, ... ; did you mean 'x'?"`` for a ``tables`` pattern that matched none."""
    import difflib
    import re

    if not tables:
        return ". The server has no tables outside its system databases."
    db_part = re.split(r"(?<!\\)\.", pattern.split(",")[0], maxsplit=1)[0].replace("\\.", ".")
    try:
        in_db = [t for t in tables if re.fullmatch(db_part, t.database or "")]
    except re.error:
        in_db = []
    names = [str(t) for t in (in_db or tables)]
    listing = ", ".join(names[:shown]) + (f", ... ({len(names)} in all)" if len(names) > shown else "")
    close = difflib.get_close_matches(pattern.replace("\\", ""), names, n=1)
    return f". Tables on the server: {listing}" + (f". Did you mean '{close[0]}'?" if close else "")
