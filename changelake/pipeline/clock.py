"""When a run stops: :class:`StopClock` (a ``stop`` event, ``max_duration_s``, or caught up)."""

from __future__ import annotations

import threading
import time
from typing import Callable

__all__ = ["StopClock"]


class StopClock:
    """The stop policy of one run.

    Args:
        max_duration_s: stop after this many seconds (None: no limit).
        stop: stop once this event is set (another thread, a signal handler).
    """

    def __init__(self, max_duration_s: float | None, stop: threading.Event | None) -> None:
        self.start = time.monotonic()
        self.max_duration_s = max_duration_s
        self.stop = stop

    def stop_reason(self, until_caught_up: bool, polled_nothing: bool, caught_up: Callable[[], bool]) -> str | None:
        """Why the run should stop now (``stopped``, ``max-duration``, ``caught-up``: asked only
        ``until_caught_up`` after a poll that returned nothing), or None."""
        if self.stop is not None and self.stop.is_set():
            return "stopped"
        if self.max_duration_s is not None and time.monotonic() - self.start >= self.max_duration_s:
            return "max-duration"
        if until_caught_up and polled_nothing and caught_up():
            return "caught-up"
        return None

    @property
    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.start
