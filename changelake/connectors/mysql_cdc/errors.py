"""Errors of the MySQL CDC source (all :class:`~changelake.connectors.errors.SourceError`)."""

from __future__ import annotations

from typing import Iterable

from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.options import ServerIdRange

__all__ = [
    "BinlogSettingsError",
    "ServerIdClashError",
    "BinlogPurgedError",
    "BinlogEventError",
    "UnsupportedBinlogEventError",
    "RowImageError",
    "StatementFormatError",
    "XaTransactionError",
    "BinlogConnectionLostError",
    "MissingPrivilegeError",
    "ServerTimeZoneMismatchError",
    "SnapshotInterruptedError",
]


class BinlogSettingsError(SourceError):
    """The server's binlog cannot feed CDC. Change the named setting(s) in the server's config
    (e.g. ``[mysqld] log_bin binlog_format=ROW binlog_row_image=FULL binlog_row_metadata=FULL``)
    and restart it; ``problems`` lists ``(variable, actual, required)``."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        self.problems = problems
        lines = "; ".join(f"{var} is {actual!r} but must be {required}" for var, actual, required in problems)
        super().__init__(
            "The MySQL server cannot be used for CDC: " + lines + ". Set "
            + ", ".join(f"{var}={required}" for var, _, required in problems)
            + " in the server configuration (binlog_format, binlog_row_image and binlog_row_metadata can also be"
            " changed with SET GLOBAL; log_bin needs a restart)."
        )


class ServerIdClashError(SourceError):
    """Another replica or CDC reader already uses the server id. Give each pipeline its own
    ``server-id`` (or a range such as ``5400-5408``; the first free id is taken)."""

    def __init__(self, server_id: ServerIdRange, used: Iterable[int]) -> None:
        self.server_id = server_id
        self.used = sorted(set(used))
        what = f"server id {server_id}" if server_id.start == server_id.end else f"every server id of the range {server_id}"
        super().__init__(
            f"The option 'server-id' = {server_id} clashes with another binlog client: {what} is already used by a "
            f"replica or CDC reader connected to this server (ids in use: {self.used}). Two readers with the same "
            "server id disconnect each other; give this pipeline another 'server-id' (or a range)."
        )


class BinlogPurgedError(SourceError):
    """The stored binlog position is no longer on the server (its binlog file was purged).

    Resuming elsewhere would silently lose changes, so the source refuses to start. To recover,
    take a new snapshot: delete the pipeline's stored offsets (or run it under a new pipeline name)
    with ``scan.startup.mode: initial``. Attributes: ``file``, ``pos``, ``available`` (files on the server).
    """

    def __init__(self, file: str, pos: int, available: list[str], what: str = "stored binlog position") -> None:
        self.file, self.pos, self.available = file, pos, list(available)
        oldest = (f"the oldest binlog on the server is '{available[0]}', oldest position {available[0]}:4" if available
                  else "the server lists no binlog files")
        super().__init__(
            f"The {what} {file}:{pos} is no longer on the server: binlog file '{file}' has been "
            f"purged ({oldest}). Continuing would skip changes, so the source stops. To re-snapshot, delete the "
            "pipeline's stored offsets (or use a new pipeline name) and start with 'scan.startup.mode' = 'initial'."
        )


class BinlogEventError(SourceError):
    """The reader met a binlog event it must not skip; it stops instead of moving past it.

    Attributes:
        event_type: the event type's name (e.g. ``UPDATE_ROWS_EVENT_V1``).
        file: binlog file of the event.
        pos: byte offset of the event in ``file``.
        table: the table concerned (``db.table``), or None when not known.
    """

    def __init__(self, message: str, *, event_type: str, file: str, pos: int, table: str | None = None) -> None:
        self.event_type, self.file, self.pos, self.table = event_type, file, pos, table
        where = f"{event_type} at {file}:{pos}" + (f" (table {table})" if table else "")
        super().__init__(f"{message} [{where}]")


class UnsupportedBinlogEventError(BinlogEventError):
    """An event type the reader does not decode (see ``event_policy.EVENT_RULES``), or an event it
    cannot decode (``reason``). Nothing after it is read; the stored position stays before it.

    What to do: change the server setting that writes it (the message says which when known) and
    re-snapshot the affected tables, or report the event type."""

    def __init__(self, *, event_type: str, file: str, pos: int, reason: str, table: str | None = None) -> None:
        self.reason = reason
        super().__init__(f"The binlog reader cannot handle this event: {reason}", event_type=event_type, file=file,
                         pos=pos, table=table)


class RowImageError(BinlogEventError):
    """A rows event of a captured table lacks columns: it was written with ``binlog_row_image``
    MINIMAL or NOBLOB (the server's or one session's setting). Such an update cannot be turned
    into a full change event without inventing values, so the reader stops.

    What to do: set ``binlog_row_image=FULL`` (globally and in the sessions / applications that
    change it), then re-snapshot the table (the changed rows are not in the binlog in full).
    Attributes besides the position: ``missing`` (names of the absent columns), ``image`` ("before"/"after")."""

    def __init__(self, *, event_type: str, file: str, pos: int, table: str, missing: list[str], image: str) -> None:
        self.missing, self.image = list(missing), image
        super().__init__(
            f"binlog_row_image is not FULL for a change of captured table {table}: the {image} image lacks "
            f"column(s) {self.missing}. Set binlog_row_image=FULL (server and sessions) and re-snapshot the table",
            event_type=event_type, file=file, pos=pos, table=table,
        )


class StatementFormatError(BinlogEventError):
    """A change of a captured table was logged as an SQL statement (``binlog_format`` STATEMENT or
    MIXED in some session), so its rows are not in the binlog. Debezium stops here by default too.

    What to do: make every session write ``binlog_format=ROW``, then re-snapshot the table. The
    statement's text is not part of the message (it may hold data); ``statement`` is its first
    keywords."""

    def __init__(self, *, event_type: str, file: str, pos: int, table: str, statement: str) -> None:
        self.statement = statement
        super().__init__(
            f"binlog_format is not ROW for a change of captured table {table}: '{statement} ...' was logged as a "
            "statement, its rows are not in the binlog. Set binlog_format=ROW (server and sessions) and re-snapshot the table",
            event_type=event_type, file=file, pos=pos, table=table,
        )


class XaTransactionError(BinlogEventError):
    """An XA transaction's outcome arrived for work the reader does not hold (e.g. ``XA COMMIT``
    of a transaction prepared before the pipeline's start position), so it cannot be published.

    What to do: re-snapshot the tables the XA transaction changed. Attribute ``xid``."""

    def __init__(self, message: str, *, xid: str, event_type: str, file: str, pos: int) -> None:
        self.xid = xid
        super().__init__(f"{message} (xid {xid})", event_type=event_type, file=file, pos=pos)


class BinlogConnectionLostError(SourceError):
    """The binlog connection was lost and could not be re-established within ``connect.timeout``.

    Everything up to ``position`` was handed out; a new run resumes there. Attributes:
    ``position`` (str), ``attempts``, ``waited_s`` (seconds since the loss), ``cause`` (the last
    connection error's text; never holds the password)."""

    def __init__(self, *, position: str, attempts: int, waited_s: float, cause: str) -> None:
        self.position, self.attempts, self.waited_s, self.cause = position, attempts, waited_s, cause
        super().__init__(
            f"lost the binlog connection at {position} and could not reconnect: {attempts} attempt(s) in "
            f"{waited_s:.1f} s (connect.timeout); last error: {cause}"
        )


class MissingPrivilegeError(SourceError):
    """The MySQL user lacks a privilege the source needs. Grant what ``missing`` names, e.g.
    ``GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cdc'@'%'`` (MariaDB >= 10.5;
    REPLICATION CLIENT instead of BINLOG MONITOR on MySQL).

    Attributes: ``user``, ``missing`` (privilege -> what it is needed for), ``tables`` (tables
    without SELECT, ``db.table``).
    """

    def __init__(self, user: str, missing: dict[str, str], tables: list[str] | None = None) -> None:
        self.user = user
        self.missing = dict(missing)
        self.tables = list(tables or [])
        parts = [f"{priv} ({why})" for priv, why in missing.items()]
        on = f" on {', '.join(self.tables[:10])}{' ...' if len(self.tables) > 10 else ''}" if self.tables else ""
        grants = ", ".join(p for p in missing if p != "SELECT")
        hint = f"GRANT {grants} ON *.* TO {user}" if grants else ""
        if "SELECT" in missing:
            hint += ("; " if hint else "") + f"GRANT SELECT ON <db>.* TO {user}"
        super().__init__(f"The MySQL user {user} lacks the privilege(s) {'; '.join(parts)}{on}. Grant them: {hint}")


class ServerTimeZoneMismatchError(SourceError):
    """``server-time-zone`` does not match the server's offset from UTC (as Flink CDC's
    MySqlValidator.checkTimeZone). Set ``server-time-zone`` to the server's time zone
    (``SELECT @@time_zone, @@system_time_zone``). Attributes: ``configured``, ``server_offset_s``,
    ``configured_offset_s``."""

    def __init__(self, configured: str, server_offset_s: int, configured_offset_s: int) -> None:
        self.configured = configured
        self.server_offset_s = server_offset_s
        self.configured_offset_s = configured_offset_s
        side = "ahead of" if server_offset_s >= 0 else "behind"
        super().__init__(
            f"The MySQL server has a timezone offset ({abs(server_offset_s)} seconds {side} UTC) which does not match "
            f"the configured timezone {configured} ({configured_offset_s} seconds). Specify the right "
            "server-time-zone to avoid inconsistencies for time-related fields."
        )


class SnapshotInterruptedError(SourceError):
    """The snapshot's connection was lost (server restart, network) while reading ``table``.

    A consistent snapshot is one server transaction and cannot continue on a new connection, so
    the run stops; a relaunch resumes from the stored snapshot progress (the chunks after
    ``after_key``) and then streams the binlog from the snapshot's original position, so rows
    changed meanwhile end upsert-equivalent. Attributes: ``table``, ``after_key``, ``cause``."""

    def __init__(self, *, table: str, after_key: object, cause: str) -> None:
        self.table, self.after_key, self.cause = table, after_key, cause
        super().__init__(f"the snapshot of {table} lost its connection after key {after_key!r}: {cause}. "
                         "Relaunch the pipeline: it resumes the snapshot from its stored progress")
