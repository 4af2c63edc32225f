"""Debezium's ``heartbeat.action.query``: a statement run on the source every ``heartbeat.interval``.

As Debezium's MySQL connector (``DatabaseHeartbeatImpl``): while the source streams the binlog,
the query (e.g. ``INSERT INTO heartbeat.beats (id, ts) VALUES (1, NOW()) ON DUPLICATE KEY UPDATE
ts = NOW()``) is executed on its own autocommit connection once per ``heartbeat.interval``. It gives
an otherwise idle server binlog traffic, so the stored position moves forward (and old binlog
files can be purged) while the captured tables see no change. The query's own table need not be
captured; if it is, its changes are captured like any other.

The query text is the user's own SQL, run as written (nothing from data is interpolated into it).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from changelake.changelog.side_records import HeartbeatRecord
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.connection import close_quietly, text_connection

__all__ = ["HeartbeatAction", "HeartbeatRecords"]


class HeartbeatAction:
    """Runs ``query`` at most once per ``interval_s`` seconds, when :meth:`maybe_run` is called.

    Args:
        query: the ``heartbeat.action.query`` statement.
        interval_s: ``heartbeat.interval`` in seconds.
        connection: ``pymysql.connect`` keyword arguments (the source's).
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, query: str, interval_s: float, connection: dict[str, Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.query = query
        self.interval_s = interval_s
        self._connection = connection
        self._clock = clock
        self._conn: Any = None
        self._last: float | None = None
        #: how many times the query ran (for logs and tests).
        self.runs = 0

    def maybe_run(self) -> bool:
        """Run the query if ``interval_s`` has passed since the last run (or it never ran).

        Returns:
            True if the query ran now.

        Raises:
            SourceError: the query failed (names the option; the message carries no password).
        """
        now = self._clock()
        if self._last is not None and now - self._last < self.interval_s:
            return False
        self._last = now
        try:
            if self._conn is None:
                self._conn = text_connection(self._connection)
            with self._conn.cursor() as cur:
                cur.execute(self.query)
        except Exception as exc:  # pymysql errors carry no password
            close_quietly(self._conn)
            self._conn = None
            raise SourceError(f"heartbeat.action.query {self.query!r} failed: {exc}") from exc
        self.runs += 1
        return True

    def close(self) -> None:
        """Close the connection (idempotent)."""
        close_quietly(self._conn)
        self._conn = None


class HeartbeatRecords:
    """Debezium's heartbeat messages (``heartbeat.interval.ms``): at most one per ``interval_s``.

    :meth:`maybe_emit` is called once per poll while the source streams; the record it returns is
    written with the source position of that poll (so the position is committed even when no
    captured table changed, as Debezium's ``HeartbeatImpl``).

    Args:
        interval_s: ``heartbeat.interval.ms`` in seconds (> 0).
        clock: monotonic seconds; wall: wall-clock seconds (tests pass their own).
    """

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._wall = wall
        self._last: float | None = None

    def maybe_emit(self) -> HeartbeatRecord | None:
        """A heartbeat record if ``interval_s`` has passed since the last one (or none was made)."""
        now = self._clock()
        if self._last is not None and now - self._last < self.interval_s:
            return None
        self._last = now
        return HeartbeatRecord(int(self._wall() * 1000))
