"""PyMySQL connections of the MySQL CDC connector: opening the text-protocol connection that the
snapshot, the schema hints and the heartbeat use (:func:`text_connection`), telling a connection
loss from another error (:func:`is_connection_loss`), and closing a connection that may be dead
(:func:`close_quietly`). Used by the binlog reader (in this process and in its child), the
snapshot readers and the source.
"""

from __future__ import annotations

from typing import Any

import pymysql
import pymysql.converters

__all__ = ["text_connection", "is_connection_loss", "close_quietly"]

#: PyMySQL encoders only (parameters are escaped), no decoders: every value arrives as the
#: server's text (str) or, for binary-charset data, bytes -- converted by values.convert.
_ENCODERS = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}


def text_connection(connection: dict[str, Any]) -> Any:
    """A PyMySQL connection for snapshot reads: utf8mb4, session time zone UTC, raw text values."""
    conn = pymysql.connect(**connection, charset="utf8mb4", conv=_ENCODERS, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute("SET SESSION net_write_timeout = 3600")
        cur.execute("SET SESSION wait_timeout = 86400")
    return conn


def close_quietly(closable: Any) -> None:
    """Close a connection or binlog stream that may already be dead; errors are ignored, None is
    nothing to close."""
    if closable is None:
        return
    try:
        closable.close()
    except Exception:  # noqa: BLE001 - closing a dead connection
        pass


#: pymysql / server error codes meaning "the connection is gone, try again": client-side
#: 2003 (cannot connect), 2006 (gone away), 2013 (lost during query), 2055 (lost, system error);
#: server-side 1053 (shutdown in progress), 1927 (connection killed), 1159/1161 (network timeouts).
_RETRYABLE_CODES = frozenset({2003, 2006, 2013, 2055, 1053, 1927, 1159, 1161})


def is_connection_loss(exc: BaseException) -> bool:
    """True for errors after which a new connection may succeed (server restart, network)."""
    if isinstance(exc, (ConnectionError, pymysql.err.InterfaceError)):
        return True
    if isinstance(exc, pymysql.err.OperationalError):
        code = exc.args[0] if exc.args else None
        return code in _RETRYABLE_CODES
    return isinstance(exc, (OSError, EOFError))
