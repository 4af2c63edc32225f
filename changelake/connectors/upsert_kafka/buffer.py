"""ReducingBuffer: Flink's ReducingUpsertWriter, keeping at most one pending record per key.

Semantics (flink-connector-kafka ``ReducingUpsertWriter``, FLINK-21191/23735/31620), except that
keys flush in FIRST-SEEN order (Flink's hash map gives an arbitrary order):

* kinds are normalised on entry: +I/+U -> +U, -U/-D -> -D;
* the same key again replaces the pending record (latest wins) but keeps the key's place in the
  flush order; so INSERT then DELETE writes a tombstone, DELETE then INSERT writes only the value;
* flush when the number of distinct pending keys reaches ``max_rows`` (after the put);
* flush when ``interval_ms`` has passed since the last flush (checked on every :meth:`add` and
  :meth:`flush_if_due`; the sink calls the latter from a timer);
* :meth:`flush` on demand (before a transaction commit, at a checkpoint, on close).

The buffer is never persisted: it is empty after each flush, as in Flink. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, Iterable, TypeVar

from changelake.changelog.rowkind import RowKind

__all__ = ["ReducingBuffer", "normalize_kind"]

P = TypeVar("P")


def normalize_kind(kind: RowKind) -> RowKind:
    """+I/+U -> +U and -U/-D -> -D, as ReducingUpsertWriter does when buffering."""
    return RowKind.UPDATE_AFTER if kind.is_accumulate else RowKind.DELETE


@dataclass(frozen=True)
class _Pending(Generic[P]):
    kind: RowKind
    payload: P


class ReducingBuffer(Generic[P]):
    """Buffer records by key; at flush, hand each key's last record to ``emit``.

    Args:
        emit: ``emit(kind, payload)`` writes one record downstream (the plain writer).
        emit_batch: if given, a flush hands all its records to ``emit_batch([(kind, payload),
            ...])`` in one call (same records, same order) instead of calling ``emit`` per record.
        max_rows: flush when this many distinct keys are pending (must be > 0).
        interval_ms: flush when this many ms have passed since the last flush (must be > 0).
        clock: monotonic clock in seconds (tests pass a fake one).

    Raises ValueError if ``max_rows`` or ``interval_ms`` is not > 0 (Flink enables buffering
    only when both are > 0; the factory checks that with Flink's message before building).
    """

    def __init__(
        self,
        emit: Callable[[RowKind, P], None],
        max_rows: int,
        interval_ms: float,
        *,
        emit_batch: Callable[[list[tuple[RowKind, P]]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_rows <= 0 or interval_ms <= 0:
            raise ValueError(f"ReducingBuffer needs max_rows > 0 and interval_ms > 0, got {max_rows}, {interval_ms}")
        self._emit = emit
        self._emit_batch = emit_batch
        self.max_rows = max_rows
        self.interval_ms = interval_ms
        self._clock = clock
        self._pending: dict[Hashable, _Pending[P]] = {}
        self._lock = threading.RLock()
        self._last_flush = clock()

    def __len__(self) -> int:
        """Number of distinct keys pending."""
        return len(self._pending)

    def add(self, key: Hashable, kind: RowKind, payload: P) -> None:
        """Buffer ``payload`` as the latest record for ``key`` and flush if a trigger fires."""
        with self._lock:
            self._pending[key] = _Pending(normalize_kind(kind), payload)
            if len(self._pending) >= self.max_rows:
                self.flush()
            else:
                self.flush_if_due()

    def add_many(self, items: Iterable[tuple[Hashable, RowKind, P]]) -> None:
        """:meth:`add` of each ``(key, kind, payload)`` in order (one lock acquisition; the
        same flush triggers after every put)."""
        with self._lock:
            pending = self._pending
            for key, kind, payload in items:
                pending[key] = _Pending(normalize_kind(kind), payload)
                if len(pending) >= self.max_rows:
                    self.flush()
                    pending = self._pending
                elif self.due():
                    self.flush()
                    pending = self._pending

    def due(self) -> bool:
        """True when ``interval_ms`` has passed since the last flush."""
        return (self._clock() - self._last_flush) * 1000.0 >= self.interval_ms

    def flush_if_due(self) -> int:
        """Flush when the interval has passed; returns the number of records emitted."""
        with self._lock:
            return self.flush() if self.due() else 0

    def discard(self) -> int:
        """Drop every pending record without emitting it (an aborted transaction); returns how many."""
        with self._lock:
            n = len(self._pending)
            self._pending = {}
            return n

    def flush(self) -> int:
        """Emit every pending record in first-seen key order; the buffer is cleared even if
        ``emit`` raises (the error propagates). Returns the number of records emitted."""
        with self._lock:
            pending, self._pending = self._pending, {}
            self._last_flush = self._clock()
            if self._emit_batch is not None:
                if pending:
                    self._emit_batch([(item.kind, item.payload) for item in pending.values()])
                return len(pending)
            n = 0
            for item in pending.values():
                self._emit(item.kind, item.payload)
                n += 1
            return n
