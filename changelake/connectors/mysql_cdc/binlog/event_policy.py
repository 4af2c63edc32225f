"""What the binlog reader does with each binlog event type: the one list, in one place.

Every event the server sends reaches :class:`~changelake.connectors.mysql_cdc.binlog.reader.BinlogReader`
(nothing is filtered inside mysql-replication) and is looked up here by its type code (the byte
in the event header; MySQL's ``binlog_event.h`` and MariaDB's ``log_event.h``):

* ``DELIVER`` - decoded and acted on: row data becomes change events; transaction boundaries,
  table maps, DDL, rotations and heartbeats move the position or the schema.
* ``IGNORE`` - deliberately skipped: the event carries no change of a captured table (server
  bookkeeping, or the statement text / context of something that is checked elsewhere).
* ``STOP`` - refused: the reader stops with :class:`~changelake.connectors.mysql_cdc.errors.UnsupportedBinlogEventError`
  naming the event type and position rather than skip a change it does not understand.

A code missing from :data:`EVENT_RULES` is treated as ``STOP`` (:func:`rule_for`). The position
only ever moves past ``DELIVER`` and ``IGNORE`` events.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping

__all__ = ["Action", "EventRule", "EVENT_RULES", "rule_for"]


class Action(enum.Enum):
    """What the reader does with an event type."""

    DELIVER = "deliver"
    IGNORE = "ignore"
    STOP = "stop"


@dataclass(frozen=True)
class EventRule:
    """One binlog event type: code, server-side name, action and the reason for it."""

    code: int
    name: str
    action: Action
    why: str


def _rules(*rows: tuple[int, str, Action, str]) -> dict[int, EventRule]:
    return {code: EventRule(code, name, action, why) for code, name, action, why in rows}


D, I, S = Action.DELIVER, Action.IGNORE, Action.STOP

#: binlog event type code -> rule. MySQL codes 0x00-0x2A, MariaDB codes 0xA0-0xAB.
EVENT_RULES: Mapping[int, EventRule] = _rules(
    (0x00, "UNKNOWN_EVENT", S, "not a valid event"),
    (0x01, "START_EVENT_V3", S, "binlog format of MySQL < 5.0: not decoded"),
    (0x02, "QUERY_EVENT", D, "transaction boundaries, DDL, TRUNCATE; DML logged as a statement on a captured table stops the reader (binlog_format)"),
    (0x03, "STOP_EVENT", I, "the server shut down cleanly; the next binlog file follows"),
    (0x04, "ROTATE_EVENT", D, "moves the position to the next binlog file"),
    (0x05, "INTVAR_EVENT", I, "auto-increment context of a statement-logged query; the query itself is checked"),
    (0x06, "LOAD_EVENT", S, "LOAD DATA logged as a statement (MySQL < 5.0): rows not in the binlog"),
    (0x07, "SLAVE_EVENT", S, "never written by supported servers"),
    (0x08, "CREATE_FILE_EVENT", S, "LOAD DATA logged as a statement (MySQL < 5.0): rows not in the binlog"),
    (0x09, "APPEND_BLOCK_EVENT", S, "LOAD DATA logged as a statement: rows not in the binlog"),
    (0x0A, "EXEC_LOAD_EVENT", S, "LOAD DATA logged as a statement (MySQL < 5.0): rows not in the binlog"),
    (0x0B, "DELETE_FILE_EVENT", S, "LOAD DATA logged as a statement: rows not in the binlog"),
    (0x0C, "NEW_LOAD_EVENT", S, "LOAD DATA logged as a statement (MySQL < 5.0): rows not in the binlog"),
    (0x0D, "RAND_EVENT", I, "RAND() seed of a statement-logged query; the query itself is checked"),
    (0x0E, "USER_VAR_EVENT", I, "user variable of a statement-logged query; the query itself is checked"),
    (0x0F, "FORMAT_DESCRIPTION_EVENT", D, "header of each binlog file (post-header lengths)"),
    (0x10, "XID_EVENT", D, "commit of a transaction"),
    (0x11, "BEGIN_LOAD_QUERY_EVENT", I, "file data of a statement-logged LOAD DATA; its EXECUTE_LOAD_QUERY_EVENT is checked"),
    (0x12, "EXECUTE_LOAD_QUERY_EVENT", S, "LOAD DATA logged as a statement (binlog_format not ROW): its rows are not in the binlog"),
    (0x13, "TABLE_MAP_EVENT", D, "table id -> schema of the following rows events"),
    (0x14, "PRE_GA_WRITE_ROWS_EVENT", S, "rows format of MySQL 5.1 betas: not decoded"),
    (0x15, "PRE_GA_UPDATE_ROWS_EVENT", S, "rows format of MySQL 5.1 betas: not decoded"),
    (0x16, "PRE_GA_DELETE_ROWS_EVENT", S, "rows format of MySQL 5.1 betas: not decoded"),
    (0x17, "WRITE_ROWS_EVENT_V1", D, "inserted rows (full image required)"),
    (0x18, "UPDATE_ROWS_EVENT_V1", D, "updated rows, before and after (full images required)"),
    (0x19, "DELETE_ROWS_EVENT_V1", D, "deleted rows (full image required)"),
    (0x1A, "INCIDENT_EVENT", S, "the server reports that changes may be missing from its binlog"),
    (0x1B, "HEARTBEAT_LOG_EVENT", D, "idle binlog: progress outside transactions"),
    (0x1C, "IGNORABLE_LOG_EVENT", I, "marked ignorable by the server"),
    (0x1D, "ROWS_QUERY_LOG_EVENT", I, "statement text of the following rows events (informational; never kept)"),
    (0x1E, "WRITE_ROWS_EVENT_V2", D, "inserted rows (full image required)"),
    (0x1F, "UPDATE_ROWS_EVENT_V2", D, "updated rows, before and after (full images required)"),
    (0x20, "DELETE_ROWS_EVENT_V2", D, "deleted rows (full image required)"),
    (0x21, "GTID_LOG_EVENT", D, "MySQL transaction start"),
    (0x22, "ANONYMOUS_GTID_LOG_EVENT", D, "MySQL transaction start without GTID"),
    (0x23, "PREVIOUS_GTIDS_LOG_EVENT", I, "GTID bookkeeping at the start of a MySQL binlog file"),
    (0x24, "TRANSACTION_CONTEXT_EVENT", I, "group replication certification data"),
    (0x25, "VIEW_CHANGE_EVENT", I, "group replication membership change"),
    (0x26, "XA_PREPARE_LOG_EVENT", D, "XA PREPARE: the transaction is held until its XA COMMIT / XA ROLLBACK"),
    (0x27, "PARTIAL_UPDATE_ROWS_EVENT", S, "MySQL partial JSON update (binlog_row_value_options=PARTIAL_JSON): not a full row image"),
    (0x28, "TRANSACTION_PAYLOAD_EVENT", S, "MySQL binlog transaction compression: not decoded"),
    (0x29, "HEARTBEAT_LOG_EVENT_V2", D, "idle binlog: progress outside transactions"),
    (0x2A, "GTID_TAGGED_LOG_EVENT", S, "MySQL 8.3 tagged GTID: not decoded"),
    (0xA0, "ANNOTATE_ROWS_EVENT", I, "statement text of the following rows events (informational; never kept)"),
    (0xA1, "BINLOG_CHECKPOINT_EVENT", I, "MariaDB crash-recovery bookkeeping"),
    (0xA2, "GTID_EVENT", D, "MariaDB transaction start (flags: standalone DDL, XA prepare / completion)"),
    (0xA3, "GTID_LIST_EVENT", I, "MariaDB GTID state at the start of a binlog file"),
    (0xA4, "START_ENCRYPTION_EVENT", I, "binlog encryption at rest; the server decrypts events before sending them"),
    (0xA5, "QUERY_COMPRESSED_EVENT", D, "QUERY_EVENT with zlib-compressed text (log_bin_compress)"),
    (0xA6, "WRITE_ROWS_COMPRESSED_EVENT_V1", D, "WRITE_ROWS_EVENT_V1 with zlib-compressed rows (log_bin_compress)"),
    (0xA7, "UPDATE_ROWS_COMPRESSED_EVENT_V1", D, "UPDATE_ROWS_EVENT_V1 with zlib-compressed rows (log_bin_compress)"),
    (0xA8, "DELETE_ROWS_COMPRESSED_EVENT_V1", D, "DELETE_ROWS_EVENT_V1 with zlib-compressed rows (log_bin_compress)"),
    (0xA9, "WRITE_ROWS_COMPRESSED_EVENT", S, "compressed v2 rows event: not written by MariaDB 10.x, not decoded"),
    (0xAA, "UPDATE_ROWS_COMPRESSED_EVENT", S, "compressed v2 rows event: not written by MariaDB 10.x, not decoded"),
    (0xAB, "DELETE_ROWS_COMPRESSED_EVENT", S, "compressed v2 rows event: not written by MariaDB 10.x, not decoded"),
)


def rule_for(code: int) -> EventRule:
    """The rule of an event type code; an unknown code gets a ``STOP`` rule naming the code."""
    found = EVENT_RULES.get(code)
    if found is not None:
        return found
    return EventRule(code, f"event type 0x{code:02X}", Action.STOP, "unknown event type: not decoded")
