"""Snapshot chunks of one table by its chunk key, as Flink CDC's ``MySqlChunkSplitter``.

A table is split into key ranges of the chunk key column (``scan.incremental.snapshot.chunk.key-column``,
by default the first primary-key column): ``[start, end)`` with None meaning unbounded, so rows
inserted below the smallest or above the largest key while the snapshot runs still fall in a
chunk. Boundaries are produced lazily (one chunk ahead), never by loading the key set:

* **even split** -- an integral chunk key whose *distribution factor*
  ``(max - min + 1) / approximate row count`` lies within
  ``[chunk-key.even-distribution.factor.lower-bound, ...upper-bound]`` (Flink CDC's defaults
  0.05 / 1000.0) is cut every ``max(1, int(chunk.size * factor))`` key values;
* **query-based split** -- otherwise each boundary is the largest of the next ``chunk.size``
  keys (``SELECT MAX(k) FROM (SELECT k ... WHERE k >= ? ORDER BY k LIMIT n)``); when that equals
  the start (a run of equal chunk keys) the next larger key is taken.

Before the last, unbounded chunk is produced, the table's current maximum is read again: rows
inserted above the maximum while the snapshot ran are split into further chunks (query-based), so
the last chunk holds about ``chunk.size`` rows too instead of every insert at the end of the key
space (the memory problem Flink CDC's ``scan.incremental.snapshot.unbounded-chunk-first.enabled``
works around by reading that chunk first).

A chunk resumed after a restart may start *after* a full ordering key (the last row emitted
before the restart); its rows are then filtered by :meth:`Chunk.contains`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Protocol

__all__ = ["Chunk", "ChunkQueries", "ChunkSplitter", "distribution_factor", "INTEGRAL_KINDS", "SPLITTABLE_KINDS"]

#: chunk key column kinds split evenly (when evenly distributed).
INTEGRAL_KINDS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "year"})
#: chunk key column kinds whose Python order equals the server's order (so that binlog rows can be
#: placed in chunks exactly); other kinds are refused for the incremental snapshot.
SPLITTABLE_KINDS = INTEGRAL_KINDS | {"decimal"}


@dataclass(frozen=True)
class Chunk:
    """One key range of a table.

    Attributes:
        table: ``db.table``.
        index: position of the chunk in its table's split (0, 1, ...; restarts count anew).
        start: lower bound as an ordering-key prefix, or None (from the first row).
        start_inclusive: True: keys whose prefix is >= ``start`` (a chunk boundary ``(v,)``);
            False: keys > ``start`` (a full key: the rest of a chunk emitted part-way).
        end: exclusive upper bound of the chunk key column, or None (to the last row).
    """

    table: str
    index: int
    start: tuple[Any, ...] | None
    start_inclusive: bool
    end: Any | None

    @property
    def start_value(self) -> Any | None:
        """The chunk key value the SQL range starts at (inclusive), or None."""
        return self.start[0] if self.start is not None else None

    def contains(self, key: tuple[Any, ...]) -> bool:
        """True if the ordering key ``key`` (chunk key first) falls in this chunk."""
        if self.start is not None:
            if self.start_inclusive:
                if key[: len(self.start)] < self.start:
                    return False
            elif key <= self.start:
                return False
        return self.end is None or key[0] < self.end


class ChunkQueries(Protocol):
    """What the splitter asks the server (one table, one chunk key column)."""

    def min_max(self, start: Any | None) -> tuple[Any | None, Any | None]:
        """(MIN, MAX) of the chunk key (>= ``start`` when given); (None, None) for no rows."""

    def approximate_row_count(self) -> int:
        """The server's row estimate (``information_schema.TABLES.TABLE_ROWS``)."""

    def next_chunk_max(self, start: Any, size: int) -> Any | None:
        """MAX of the first ``size`` chunk key values >= ``start``."""

    def min_greater(self, value: Any) -> Any | None:
        """The smallest chunk key value > ``value``, or None."""


def distribution_factor(min_value: int, max_value: int, row_count: int) -> float:
    """Flink CDC's ``(max - min + 1) / rowCount`` (``inf`` for no rows)."""
    if row_count <= 0:
        return float("inf")
    return (max_value - min_value + 1) / row_count


class ChunkSplitter:
    """Lazily splits a table into :class:`Chunk` s (see module doc).

    Args:
        chunk_size: ``scan.incremental.snapshot.chunk.size`` (rows).
        upper_bound: ``chunk-key.even-distribution.factor.upper-bound``.
        lower_bound: ``chunk-key.even-distribution.factor.lower-bound``.
    """

    def __init__(self, chunk_size: int, upper_bound: float = 1000.0, lower_bound: float = 0.05) -> None:
        self.chunk_size = chunk_size
        self.upper_bound = upper_bound
        self.lower_bound = lower_bound

    def split(self, table: str, queries: ChunkQueries, integral: bool,
              start: tuple[Any, ...] | None = None, start_inclusive: bool = True) -> Iterator[Chunk]:
        """The chunks from ``start`` (None: the whole table) to the end, the last one unbounded."""
        lo, hi = queries.min_max(start[0] if start is not None else None)
        if lo is None or hi is None:
            yield Chunk(table, 0, start, start_inclusive, None)
            return
        if integral:
            factor = distribution_factor(int(lo), int(hi), queries.approximate_row_count())
            if self.lower_bound <= factor <= self.upper_bound:
                step = max(1, int(self.chunk_size * factor))
                yield from self._even(table, queries, int(lo), int(hi), step, start, start_inclusive)
                return
        yield from self._by_query(table, queries, lo, hi, start, start_inclusive)

    def _even(self, table: str, queries: ChunkQueries, lo: int, hi: int, step: int, start: tuple[Any, ...] | None,
              start_inclusive: bool) -> Iterator[Chunk]:
        if hi - lo + 1 <= step:
            yield from self._by_query(table, queries, lo, hi, start, start_inclusive)
            return
        index, end = 0, lo + step
        yield Chunk(table, index, start, start_inclusive, end)
        while True:
            index += 1
            nxt = end + step
            if nxt > hi:
                # the tail: rows inserted above the max since the split began are split too
                yield from self._by_query(table, queries, end, hi, (end,), True, index)
                return
            yield Chunk(table, index, (end,), True, nxt)
            end = nxt

    def _by_query(self, table: str, queries: ChunkQueries, lo: Any, hi: Any, start: tuple[Any, ...] | None,
                  start_inclusive: bool, index: int = 0) -> Iterator[Chunk]:
        chunk_start, inclusive, at = start, start_inclusive, lo
        while True:
            end = queries.next_chunk_max(at, self.chunk_size)
            if end is not None and end == at:  # a run of equal chunk keys: the chunk takes it whole
                end = queries.min_greater(at)
            if end is not None and end >= hi:
                # about to close with the unbounded chunk: rows inserted above the max since the
                # split began would all land in it, so its size is checked against the table now
                # (the last chunk stays about chunk.size rows, as other chunks)
                _, fresh = queries.min_max(at)
                if fresh is not None and fresh > hi:
                    hi = fresh
            if end is None or end >= hi:  # the rest (and rows inserted later above the max) in one chunk
                yield Chunk(table, index, chunk_start, inclusive, None)
                return
            yield Chunk(table, index, chunk_start, inclusive, end)
            index, chunk_start, inclusive, at = index + 1, (end,), True, end
