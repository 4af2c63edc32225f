"""Connector metrics, named as Flink's standard connector metrics (FLIP-33) and the Alibaba
upsert-kafka page: counters, per-second meters and gauges, read with ``snapshot()``.

Rates (``...PerSecond``) are averages over the last ``window_s`` seconds (60 s by default, as
Flink's ``MeterView``). Thread-safe; a connector calls the ``record_*`` methods, anything may call
``snapshot()``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

__all__ = ["Meter", "SourceMetrics", "SinkMetrics"]

Clock = Callable[[], float]


class Meter:
    """Counts events and gives the average rate per second over a sliding window.

    Args:
        window_s: width of the window in seconds (default 60).
        clock: monotonic clock in seconds.
    """

    def __init__(self, window_s: float = 60.0, clock: Clock = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._start = clock()
        self._events: deque[tuple[float, int]] = deque()
        self.count = 0

    def mark(self, n: int = 1) -> None:
        """Add ``n`` events now."""
        now = self._clock()
        self.count += n
        self._events.append((now, n))
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._events and self._events[0][0] < now - self.window_s:
            self._events.popleft()

    def rate(self) -> float:
        """Events per second over the window (or since creation when younger than the window)."""
        now = self._clock()
        self._trim(now)
        span = min(self.window_s, max(now - self._start, 1e-9))
        return sum(n for _, n in self._events) / span


class SourceMetrics:
    """Metrics of a source.

    ``snapshot()`` keys and units:
        numRecordsIn (records), numRecordsInPerSecond (records/s), numBytesIn (bytes),
        numBytesInPerSecond (bytes/s), currentEmitEventTimeLag (ms: emit time - record
        timestamp of the last emitted record), currentFetchEventTimeLag (ms: fetch time - record
        timestamp of the last fetched record), sourceIdleTime (ms since the last record was
        fetched), pendingRecords (records not yet fetched: sum over partitions of high
        watermark - position; -1 when unknown).
    """

    def __init__(self, window_s: float = 60.0, clock: Clock = time.monotonic, wall_clock: Clock = time.time) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._wall = wall_clock
        self.records_in = Meter(window_s, clock)
        self.bytes_in = Meter(window_s, clock)
        self.emit_lag_ms = 0.0
        self.fetch_lag_ms = 0.0
        self.pending_records = -1
        self._last_fetch = clock()

    def record_fetch(self, records: int, nbytes: int, event_ts_ms: int | None = None) -> None:
        """Record ``records`` fetched records of ``nbytes`` bytes; ``event_ts_ms`` is the last
        record's timestamp (ms since epoch), used for the fetch lag."""
        with self._lock:
            if records:
                self.records_in.mark(records)
                self._last_fetch = self._clock()
            if nbytes:
                self.bytes_in.mark(nbytes)
            if event_ts_ms is not None and event_ts_ms > 0:
                self.fetch_lag_ms = max(0.0, self._wall() * 1000.0 - event_ts_ms)

    def record_emit(self, event_ts_ms: int | None) -> None:
        """Record that a row with record timestamp ``event_ts_ms`` (ms since epoch) was emitted."""
        if event_ts_ms is not None and event_ts_ms > 0:
            with self._lock:
                self.emit_lag_ms = max(0.0, self._wall() * 1000.0 - event_ts_ms)

    def set_pending_records(self, pending: int) -> None:
        """Set the number of records still waiting in the source's partitions."""
        with self._lock:
            self.pending_records = pending

    def snapshot(self) -> dict[str, float | int]:
        """The current values; see the class docstring for units."""
        with self._lock:
            return {
                "numRecordsIn": self.records_in.count,
                "numRecordsInPerSecond": self.records_in.rate(),
                "numBytesIn": self.bytes_in.count,
                "numBytesInPerSecond": self.bytes_in.rate(),
                "currentEmitEventTimeLag": self.emit_lag_ms,
                "currentFetchEventTimeLag": self.fetch_lag_ms,
                "sourceIdleTime": (self._clock() - self._last_fetch) * 1000.0,
                "pendingRecords": self.pending_records,
            }


class SinkMetrics:
    """Metrics of a sink.

    ``snapshot()`` keys and units:
        numRecordsOut (records handed to the client), numRecordsOutPerSecond (records/s),
        numBytesOut (bytes of keys + values), numBytesOutPerSecond (bytes/s), currentSendTime
        (ms spent sending the last batch, i.e. the last flush until acknowledged),
        numRecordsOutErrors (records whose delivery failed).
    """

    def __init__(self, window_s: float = 60.0, clock: Clock = time.monotonic) -> None:
        self._lock = threading.Lock()
        self.records_out = Meter(window_s, clock)
        self.bytes_out = Meter(window_s, clock)
        self.send_time_ms = 0.0
        self.errors = 0

    def record_out(self, records: int, nbytes: int) -> None:
        """Record ``records`` records of ``nbytes`` bytes sent."""
        with self._lock:
            self.records_out.mark(records)
            self.bytes_out.mark(nbytes)

    def record_send_time(self, ms: float) -> None:
        """Record how long the last batch took to send, in ms."""
        with self._lock:
            self.send_time_ms = ms

    def record_error(self, n: int = 1) -> None:
        """Record ``n`` failed deliveries."""
        with self._lock:
            self.errors += n

    def snapshot(self) -> dict[str, float | int]:
        """The current values; see the class docstring for units."""
        with self._lock:
            return {
                "numRecordsOut": self.records_out.count,
                "numRecordsOutPerSecond": self.records_out.rate(),
                "numBytesOut": self.bytes_out.count,
                "numBytesOutPerSecond": self.bytes_out.rate(),
                "currentSendTime": self.send_time_ms,
                "numRecordsOutErrors": self.errors,
            }
