"""Options of the MySQL CDC source, declared once with Flink CDC's keys, defaults and docs.

Keys, defaults and messages follow Flink CDC's MySQL pipeline connector
(``MySqlDataSourceOptions.java`` / ``MySqlDataSourceFactory.java``), each a
:class:`~changelake.options.ConfigOption` (the engine's one option idiom) bound to its field of
:class:`MySqlSourceOptions` with :func:`~changelake.options.option_field`. Raw string options become
:class:`MySqlSourceOptions` only in :func:`changelake.connectors.mysql_cdc.factory.validate_options`,
which words its errors as Flink CDC's MySQL factory does.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from changelake.connectors import options as _options
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.mysql_cdc.selectors import TableSelectors
from changelake.options import declared_options, key, option_field

__all__ = ["StartupMode", "ChunkKeyColumn", "METADATA_COLUMNS", "ServerIdRange", "MySqlSourceOptions", "duration_option", "OPTION_KEYS", "REQUIRED_KEYS"]


class StartupMode(enum.Enum):
    """``scan.startup.mode`` values (Flink CDC spelling)."""

    INITIAL = "initial"  # snapshot of the captured tables, then the binlog from the snapshot's position
    SNAPSHOT = "snapshot"  # snapshot only; the source is finished (caught up) afterwards
    LATEST_OFFSET = "latest-offset"  # binlog from the server's current end, no snapshot
    SPECIFIC_OFFSET = "specific-offset"  # binlog from .file/.pos, or after scan.startup.specific-offset.gtid-set
    EARLIEST_OFFSET = "earliest-offset"  # binlog from the oldest binlog file the server still has, no snapshot
    TIMESTAMP = "timestamp"  # binlog from the first change committed at or after scan.startup.timestamp-millis


#: Flink CDC's readable metadata of the MySQL source (``metadata.list``), as columns appended to
#: every row: name -> (changelake type name, description).
METADATA_COLUMNS: dict[str, str] = {
    "op_ts": "TIMESTAMP_LTZ(3) NOT NULL: when the change was made in the database (0 for snapshot rows)",
    "database_name": "STRING NOT NULL: database of the row",
    "table_name": "STRING NOT NULL: table of the row",
    "row_kind": "STRING NOT NULL: +I, -U, +U or -D (the row kind of that image)",
}


@dataclass(frozen=True)
class ChunkKeyColumn:
    """One rule of ``scan.incremental.snapshot.chunk.key-column``: tables matching ``tables`` are
    chunked by ``column``."""

    tables: TableSelectors
    column: str

    @classmethod
    def parse_all(cls, text: str) -> tuple["ChunkKeyColumn", ...]:
        """Parse Flink CDC's ``db1.t_[0-9]+:col1;db2.\\.*:col2;`` form.

        Raises OptionValidationError naming the key and the bad rule.
        """
        out = []
        for rule in (r.strip() for r in text.split(";")):
            if not rule:
                continue
            selector, sep, column = rule.rpartition(":")
            if not sep or not selector.strip() or not column.strip():
                raise OptionValidationError(
                    f"The value of option 'scan.incremental.snapshot.chunk.key-column' is invalid: rule '{rule}' "
                    "must be '<table selector>:<column>' (rules separated by ';')",
                    option="scan.incremental.snapshot.chunk.key-column",
                )
            out.append(cls(TableSelectors.parse(selector.strip(), "scan.incremental.snapshot.chunk.key-column"), column.strip()))
        return tuple(out)


@dataclass(frozen=True)
class ServerIdRange:
    """``server-id``: one id (``5400``) or an inclusive range (``5400-5408``)."""

    start: int
    end: int

    @classmethod
    def parse(cls, text: str) -> "ServerIdRange":
        """Parse ``N`` or ``N-M``. Raises OptionValidationError ("The value of option 'server-id' is invalid")."""
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
        if not m:
            raise OptionValidationError(
                f"The value of option 'server-id' is invalid: '{text}'", option="server-id"
            )
        start = int(m.group(1))
        end = int(m.group(2)) if m.group(2) else start
        if end < start or start < 1 or end > 2**32 - 1:
            raise OptionValidationError(
                f"The value of option 'server-id' is invalid: '{text}' (expected 1..4294967295, start <= end)",
                option="server-id",
            )
        return cls(start, end)

    def ids(self) -> range:
        return range(self.start, self.end + 1)

    def __str__(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}-{self.end}"


def duration_option(text: str, option: str) -> timedelta:
    """Parse a Flink duration (``30s``, ``500 ms``, ``1min``, ``2h``; a bare number is ms) with
    :func:`changelake.connectors.options.parse_duration`. Raises OptionValidationError naming ``option``."""
    try:
        return _options.parse_duration(text)
    except ValueError:
        raise OptionValidationError(
            f"Could not parse value '{text}' for key '{option}': expected a duration such as '30s', '500ms', '1min'",
            option=option,
        ) from None


def _names(text: str) -> tuple[str, ...]:
    """A ``,``-separated list of names (``metadata.list``, ``signal.enabled.channels``)."""
    return tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))


@dataclass(frozen=True)
class MySqlSourceOptions:
    """Typed options of the MySQL CDC source. ``repr`` never shows the password.

    Example::

        MySqlSourceOptions(hostname="127.0.0.1", port=3306, username="cdc", password="***",
                           tables=TableSelectors.parse("shop.\\\\.*"))
    """

    hostname: str = option_field(key("hostname").string_type().required().with_description("IP address or hostname of the MySQL server."))
    username: str = option_field(key("username").string_type().required().with_description("User to connect with (needs SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT)."))
    password: str = option_field(key("password").string_type().required().with_description("Password of the user (never logged).").as_secret())
    tables: TableSelectors = option_field(key("tables").custom_type("String", lambda t: TableSelectors.parse(t, "tables")).required().with_description("Tables to capture: comma-separated 'db.table' selectors, each part a regex ('\\.' = any char)."))
    port: int = option_field(key("port").int_type().default_value(3306).with_description("Port of the MySQL server. Default 3306."))
    tables_exclude: TableSelectors | None = option_field(key("tables.exclude").custom_type("String", lambda t: TableSelectors.parse(t, "tables.exclude")).no_default_value().with_description("Tables to leave out, same syntax as 'tables', applied after it."))
    server_id: ServerIdRange = option_field(key("server-id").custom_type("String", ServerIdRange.parse).default_value(ServerIdRange(5400, 6400)).with_description("Replica server id ('5400') or range ('5400-5408'); the first id of the range not used by another replica is taken. Default 5400-6400."))
    server_time_zone: str | None = option_field(key("server-time-zone").string_type().no_default_value().with_description("Session time zone of the server. As Flink CDC's MySqlValidator, the source refuses to start when it does not match the server's offset from UTC; snapshot reads then use a UTC session, so TIMESTAMP values are exact either way."))
    scan_startup_mode: StartupMode = option_field(key("scan.startup.mode").enum_type(StartupMode).default_value(StartupMode.INITIAL).with_description("initial | snapshot | latest-offset | earliest-offset | specific-offset | timestamp. Default initial. A stored position always wins."))
    specific_offset_file: str | None = option_field(key("scan.startup.specific-offset.file").string_type().no_default_value().with_description("Binlog file name for specific-offset."))
    specific_offset_pos: int | None = option_field(key("scan.startup.specific-offset.pos").long_type().no_default_value().with_description("Binlog position (bytes) for specific-offset."))
    specific_offset_gtid_set: str | None = option_field(key("scan.startup.specific-offset.gtid-set").string_type().no_default_value().with_description("GTID set for specific-offset: reading starts after these transactions (MariaDB 'domain-server-seq', as @@gtid_binlog_pos shows it)."))
    startup_timestamp_millis: int | None = option_field(key("scan.startup.timestamp-millis").long_type().no_default_value().with_description("For 'timestamp' mode: ms since the epoch; changes committed at or after it are read (binlog timestamps have second resolution)."))
    read_changelog_as_append_only: bool = option_field(key("scan.read-changelog-as-append-only.enabled").bool_type().default_value(False).with_description("Every change becomes an insert (INSERT, UPDATE_BEFORE, UPDATE_AFTER and DELETE alike); the pipeline stage converts them after the transform, so __data_event_type__ and metadata.list's row_kind keep the original kind. Default false."))
    newly_added_table_enabled: bool = option_field(key("scan.newly-added-table.enabled").bool_type().default_value(False).with_description("On a restart from a stored position, snapshot tables newly matched by 'tables' and then stream them; tables already captured keep streaming from the stored position. Default false."))
    include_comments_enabled: bool = option_field(key("include-comments.enabled").bool_type().default_value(False).with_description("Carry table and column comments in the schema. Default false."))
    metadata_list: tuple[str, ...] = option_field(key("metadata.list").custom_type("List<String>", _names).default_value(()).with_description("Readable metadata appended to every row as columns, split by ',': op_ts, database_name, table_name, row_kind."))
    treat_tinyint1_as_boolean: bool = option_field(key("treat-tinyint1-as-boolean.enabled").bool_type().default_value(True).with_description("Whether treat TINYINT(1) as boolean. Default true."))
    chunk_key_columns: tuple[ChunkKeyColumn, ...] = option_field(key("scan.incremental.snapshot.chunk.key-column").custom_type("String", ChunkKeyColumn.parse_all).default_value(()).with_description("Snapshot chunk key per table ('db.t_[0-9]+:col1;db2.\\.*:col2'); default the primary key. A column outside the primary key orders the snapshot by (column, primary key); a table without primary key is read in ranges of that column."))
    snapshot_fetch_size: int = option_field(key("scan.snapshot.fetch.size").int_type().default_value(1024).with_description("Rows fetched per round trip while snapshotting. Default 1024."))
    chunk_size: int = option_field(key("scan.incremental.snapshot.chunk.size").int_type().default_value(8096).with_description("Rows per snapshot chunk (one SELECT ... LIMIT). Default 8096."))
    incremental_snapshot_enabled: bool = option_field(key("scan.incremental.snapshot.enabled").bool_type().default_value(False).with_description("Read the snapshot as Flink CDC's incremental snapshot: key-range chunks, each read at low/high watermarks and back-filled from the binlog, up to one chunk reader per 'server-id' of the range in parallel, joined to the binlog by the chunks' high watermarks. Default false (Flink CDC: true): the default is MariaDB's lock-free consistent snapshot, exact in one transaction without a binlog read per chunk; the incremental snapshot needs a primary key with an integer or DECIMAL chunk key."))
    chunk_key_factor_upper_bound: float = option_field(key("chunk-key.even-distribution.factor.upper-bound").custom_type("Double", float).default_value(1000.0).with_description("Incremental snapshot: an integer chunk key whose distribution factor ((max - min + 1) / row count) is at most this is split evenly by value, else by queries. Default 1000.0."))
    chunk_key_factor_lower_bound: float = option_field(key("chunk-key.even-distribution.factor.lower-bound").custom_type("Double", float).default_value(0.05).with_description("Incremental snapshot: ... and at least this. Default 0.05."))
    heartbeat_interval: timedelta = option_field(key("heartbeat.interval").duration_type().default_value(timedelta(seconds=30)).with_description("Interval at which the server sends heartbeats on an idle binlog (and heartbeat.action.query runs). Default 30s."))
    heartbeat_action_query: str | None = option_field(key("heartbeat.action.query").string_type().no_default_value().with_description("Debezium's: a statement run on the source every heartbeat.interval while streaming, giving an idle server binlog traffic so that the stored position advances. Default none."))
    heartbeat_interval_ms: int = option_field(key("heartbeat.interval.ms").long_type().default_value(0).with_description("Debezium's: every this many ms while streaming, a heartbeat record goes to the heartbeat topic (the Kafka sink's '__debezium-heartbeat.<topic.prefix>') with the current position, so the stored position is committed while the captured tables are idle; 0 (default) writes none. Without 'heartbeat.interval' it also sets the binlog heartbeat interval."))
    provide_transaction_metadata: bool = option_field(key("provide.transaction.metadata").bool_type().default_value(False).with_description("Debezium's: BEGIN/END records of every source transaction with captured changes (per-table event counts in END) go to the transaction topic (the Kafka sink's '<topic.prefix>.transaction'), and every binlog change event carries a 'transaction' block (id, total_order, data_collection_order). Default false."))
    signal_data_collection: str | None = option_field(key("signal.data.collection").string_type().no_default_value().with_description("Debezium's: the signal table 'db.table' (columns id VARCHAR(42) PRIMARY KEY, type VARCHAR(32), data VARCHAR(2048)); an INSERT of type 'execute-snapshot' with data '{\"data-collections\": [\"db.t\"]}' snapshots those captured tables again at that binlog point (Debezium's 'additional-conditions' filter the rows); 'stop-snapshot' stops it for the named tables. Default none."))
    signal_enabled_channels: tuple[str, ...] = option_field(key("signal.enabled.channels").custom_type("List<String>", _names).default_value(("source",)).with_description("Debezium's: the signaling channels to read, split by ',': 'source' (the signal.data.collection table) and 'kafka' (signal.kafka.topic). Default source."))
    signal_kafka_topic: str | None = option_field(key("signal.kafka.topic").string_type().no_default_value().with_description("Debezium's: the Kafka topic (one partition) read for signals when 'kafka' is among signal.enabled.channels; records keyed by the pipeline name (Debezium: topic.prefix). Default '<pipeline name>-signal'."))
    signal_kafka_bootstrap_servers: str | None = option_field(key("signal.kafka.bootstrap.servers").string_type().no_default_value().with_description("Debezium's: the Kafka cluster of signal.kafka.topic (host:port,...); required for the 'kafka' channel."))
    signal_kafka_group_id: str = option_field(key("signal.kafka.groupId").string_type().default_value("kafka-signal").with_description("Debezium's: the consumer group id of the signal consumer (no offsets are committed under it: the signal offset is part of the stored source position). Default kafka-signal."))
    signal_kafka_poll_timeout_ms: int = option_field(key("signal.kafka.poll.timeout.ms").long_type().default_value(100).with_description("Debezium's: the longest one look for a new Kafka signal waits, in ms. Default 100."))
    connect_timeout: timedelta = option_field(key("connect.timeout").duration_type().default_value(timedelta(seconds=30)).with_description("Timeout to connect to the server. Default 30s."))

    def connection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``pymysql.connect`` (host, port, user, password, connect_timeout in s)."""
        return {
            "host": self.hostname,
            "port": self.port,
            "user": self.username,
            "password": self.password,
            "connect_timeout": max(1, int(self.connect_timeout.total_seconds())),
        }

    def snapshot_parallelism(self) -> int:
        """Chunk readers of the incremental snapshot: the size of an explicitly set ``server-id``
        range (at most 16), 1 with the default range. As in Flink CDC, each reader needs its own
        server id (Flink CDC: the range must be at least the source parallelism); Pipeline 1 has no
        separate source parallelism, so the range size is it."""
        if self.server_id == ServerIdRange(5400, 6400):
            return 1
        return min(16, self.server_id.end - self.server_id.start + 1)

    def chunk_key_column(self, table_id: Any) -> str | None:
        """The configured chunk key column of ``table_id`` (first matching rule), or None."""
        for rule in self.chunk_key_columns:
            if rule.tables.matches(table_id):
                return rule.column
        return None


#: option key -> dataclass field name, in declaration order.
OPTION_KEYS: dict[str, str] = {k: name for k, (name, _) in declared_options(MySqlSourceOptions).items()}
REQUIRED_KEYS: tuple[str, ...] = tuple(k for k, (_, o) in declared_options(MySqlSourceOptions).items() if o.required)
