"""Chunk high watermarks of an incremental snapshot, and the binlog filter they imply.

As Flink CDC's incremental snapshot, every snapshot chunk is read at a binlog position, its
*high watermark* (hw). Once the chunks are done, the binlog is read from the smallest hw; a change
of a row is emitted only if its transaction starts at or after the hw of the chunk the row's key
falls in (the chunk already holds every change before it), until the largest hw is passed
(Flink CDC's ``BinlogSplitReader.shouldEmit``). An UPDATE whose row moves from one chunk to another
(the chunk key changed) is emitted as the half that is new: a DELETE of the old row, an INSERT
of the new one, both, or neither.

Keys are *ordering keys*: the chunk key column first, then the other primary-key columns, as a
tuple of the source's Python values. A table's snapshotted key space is a list of marks in key
order, each covering the keys after the previous mark up to its ``end``:

* exclusive mark ``((e,), False, hw)``: keys whose chunk key is < e (a finished chunk);
* inclusive mark ``((k1, k2, ...), True, hw)``: keys <= that full key (a chunk emitted part-way);
* final mark ``(None, False, hw)``: everything after the previous mark.

JSON form (stored in the source position; values typed as :func:`encode_value` says)::

    {"db.t": {"key": ["id"], "marks": [[[8096], false, "mysql-bin.000003", 4711],
                                       [null, false, "mysql-bin.000003", 5120]]}}
"""

from __future__ import annotations

import bisect
import datetime
import decimal
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from changelake.changelog.event import DataChangeEvent, Op
from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.positions import BinlogPosition, binlog_file_index

__all__ = ["ChunkMark", "TableMarks", "WatermarkFilter", "encode_value", "decode_value", "hw_reached", "marks_from_json"]


def encode_value(v: Any) -> Any:
    """A key value as JSON: int/str/bool/float as is, others tagged (``{"dec": "1.50"}``,
    ``{"hex": "00ff"}``, ``{"dt": iso}``, ``{"d": iso}``, ``{"t": iso}``, ``{"td": microseconds}``).

    Raises:
        SourceError: a type that cannot be kept in a position (names the type).
    """
    if v is None or isinstance(v, (bool, int, str, float)):
        return v
    if isinstance(v, decimal.Decimal):
        return {"dec": str(v)}
    if isinstance(v, (bytes, bytearray)):
        return {"hex": bytes(v).hex()}
    if isinstance(v, datetime.datetime):
        return {"dt": v.isoformat()}
    if isinstance(v, datetime.date):
        return {"d": v.isoformat()}
    if isinstance(v, datetime.time):
        return {"t": v.isoformat()}
    if isinstance(v, datetime.timedelta):
        return {"td": (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds}
    raise SourceError(f"a key value of type {type(v).__name__} cannot be stored in an incremental snapshot position")


def decode_value(j: Any) -> Any:
    """Inverse of :func:`encode_value`."""
    if not isinstance(j, dict):
        return j
    if "dec" in j:
        return decimal.Decimal(j["dec"])
    if "hex" in j:
        return bytes.fromhex(j["hex"])
    if "dt" in j:
        return datetime.datetime.fromisoformat(j["dt"])
    if "d" in j:
        return datetime.date.fromisoformat(j["d"])
    if "t" in j:
        return datetime.time.fromisoformat(j["t"])
    if "td" in j:
        return datetime.timedelta(microseconds=int(j["td"]))
    raise SourceError(f"unknown key value {j!r} in an incremental snapshot position")


def _tx_key(pos: BinlogPosition) -> tuple[tuple[str, int], int]:
    return (binlog_file_index(pos.file), pos.pos)


def hw_reached(tx_start: BinlogPosition, hw: BinlogPosition) -> bool:
    """True if a transaction starting at ``tx_start`` comes at or after ``hw`` (a transaction
    boundary as ``SHOW MASTER STATUS`` gives it), i.e. is not part of what the chunk read."""
    return _tx_key(tx_start) >= _tx_key(hw)


@dataclass(frozen=True)
class ChunkMark:
    """Keys up to ``end`` (see module doc) were snapshotted at binlog position ``hw``."""

    end: tuple[Any, ...] | None
    inclusive: bool
    hw: BinlogPosition

    def to_json(self) -> list[Any]:
        end = [encode_value(v) for v in self.end] if self.end is not None else None
        return [end, self.inclusive, self.hw.file, self.hw.pos]

    @classmethod
    def from_json(cls, j: Any) -> "ChunkMark":
        end, inclusive, file, pos = j
        return cls(tuple(decode_value(v) for v in end) if end is not None else None, bool(inclusive), BinlogPosition(str(file), int(pos)))


class TableMarks:
    """The snapshotted key ranges of one table, in key order, each with its high watermark.

    Args:
        key_columns: the ordering key (chunk key column, then the other primary-key columns).
        marks: in key order; only the last may have ``end`` None.
    """

    def __init__(self, key_columns: Iterable[str], marks: Iterable[ChunkMark] = ()) -> None:
        self.key_columns = tuple(key_columns)
        self.marks: list[ChunkMark] = []
        self._ends: list[tuple[Any, ...]] = []
        for m in marks:
            self.append(m)

    @property
    def finished(self) -> bool:
        """True once the whole key space is covered (the last mark is unbounded)."""
        return bool(self.marks) and self.marks[-1].end is None

    def key_of(self, row: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
        """The ordering key of a row image, or None (no image, or a key column missing)."""
        if row is None:
            return None
        try:
            return tuple(row[c] for c in self.key_columns)
        except KeyError:
            return None

    def append(self, mark: ChunkMark) -> None:
        """Add the next mark (after the last one). A mark with the same hw as the last one
        replaces it (the ranges are adjacent, so one mark covers both)."""
        if self.finished:
            raise ValueError("marks after the final (unbounded) mark")
        if self.marks and self.marks[-1].hw == mark.hw:  # adjacent ranges read at one hw: one mark
            self.marks.pop()
            self._ends.pop()  # not the final mark (checked above), so it had an end
        self.marks.append(mark)
        if mark.end is not None:
            self._ends.append(mark.end)

    def find(self, key: tuple[Any, ...]) -> ChunkMark | None:
        """The mark covering ``key`` (None: not snapshotted yet)."""
        i = bisect.bisect_left(self._ends, key)
        if i < len(self._ends) and self._ends[i] == key and not self.marks[i].inclusive:
            i += 1
        return self.marks[i] if i < len(self.marks) else None

    def resume_start(self) -> tuple[tuple[Any, ...] | None, bool]:
        """Where reading continues: (start, inclusive) as :class:`~changelake.connectors.mysql_cdc.snapshot.chunks.Chunk`
        takes it; (None, True) for a table not started."""
        if not self.marks:
            return None, True
        last = self.marks[-1]
        assert last.end is not None, "finished table"
        return (last.end, False) if last.inclusive else (last.end, True)

    def to_json(self) -> dict[str, Any]:
        return {"key": list(self.key_columns), "marks": [m.to_json() for m in self.marks]}

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "TableMarks":
        return cls([str(c) for c in j["key"]], [ChunkMark.from_json(m) for m in j["marks"]])


def marks_from_json(j: Mapping[str, Any] | None, what: str = "position") -> dict[str, TableMarks]:
    """Parse ``{"db.t": {"key": [...], "marks": [...]}}``. Raises SourceError naming ``what``."""
    try:
        return {str(t): TableMarks.from_json(v) for t, v in (j or {}).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"the chunk watermarks in the stored MySQL source {what} are not valid: {exc!r}") from exc


class WatermarkFilter:
    """Flink CDC's ``shouldEmit`` for the binlog phase after an incremental snapshot.

    Args:
        tables: ``db.table`` -> its marks (every table finished).
    """

    def __init__(self, tables: Mapping[str, TableMarks]) -> None:
        self.tables = dict(tables)
        hws = [m.hw for t in self.tables.values() for m in t.marks]
        #: the largest high watermark: from there on every event is emitted.
        self.max_hw: BinlogPosition | None = max(hws, key=_tx_key) if hws else None
        #: the smallest high watermark: where the binlog phase starts.
        self.min_hw: BinlogPosition | None = min(hws, key=_tx_key) if hws else None
        self._json: dict[str, Any] | None = None

    @property
    def active(self) -> bool:
        return self.max_hw is not None

    def to_json(self) -> dict[str, Any]:
        """The JSON form kept in positions (built once, shared: do not mutate)."""
        if self._json is None:
            self._json = {t: m.to_json() for t, m in self.tables.items()}
        return self._json

    def passed(self, file: str, next_pos: int) -> bool:
        """The reader got to ``file:next_pos`` with nothing pending: past the largest hw the filter
        switches off (returns True once off)."""
        if self.max_hw is not None and hw_reached(BinlogPosition(file, next_pos), self.max_hw):
            self.max_hw = None
        return self.max_hw is None

    def apply(self, event: DataChangeEvent) -> list[DataChangeEvent]:
        """The events to emit for one binlog event: [event], [], or the new half of an UPDATE
        that moved its row between chunks. Switches itself off past the largest hw."""
        if self.max_hw is None:
            return [event]
        pos = event.position or {}
        try:
            tx = BinlogPosition(str(pos["file"]), int(pos["pos"]))
        except (KeyError, TypeError, ValueError):
            return [event]
        if hw_reached(tx, self.max_hw):
            self.max_hw = None
            return [event]
        marks = self.tables.get(str(event.table))
        if marks is None:
            return [event]
        if event.op is Op.TRUNCATE:
            return self._truncate(event, marks, tx)
        before = self._emit(marks, marks.key_of(event.before), tx) if event.before is not None else None
        after = self._emit(marks, marks.key_of(event.after), tx) if event.after is not None else None
        if event.op is Op.UPDATE:
            if before and after:
                return [event]
            if before:
                return [replace(event, op=Op.DELETE, after=None)]
            if after:
                return [replace(event, op=Op.CREATE, before=None)]
            return []
        return [event] if (before if event.op is Op.DELETE else after) else []

    def _truncate(self, event: DataChangeEvent, marks: TableMarks, tx: BinlogPosition) -> list[DataChangeEvent]:
        """A TRUNCATE (or DROP TABLE) at ``tx``, ordered against the chunks.

        Every chunk read at or after ``tx`` (hw > tx) already shows the table after it, so if
        every chunk was, the truncate is dropped. Otherwise it is emitted: it wipes the chunks
        read before it (as MySQL did) and also those read after it, so from ``tx`` on the table
        is empty in the changelog as in MySQL, and every later change of the table is emitted
        (its marks are removed): the rows the later chunks held, all written after ``tx``, come
        again from the binlog. Nothing is lost and, per key, the last version wins.
        """
        if not any(hw_reached(tx, m.hw) for m in marks.marks):
            return []
        del self.tables[str(event.table)]
        if not self.tables:
            self.max_hw = None
        self._json = None  # positions from here on carry the marks without this table
        return [event]

    @staticmethod
    def _emit(marks: TableMarks, key: tuple[Any, ...] | None, tx: BinlogPosition) -> bool:
        if key is None:
            return True
        try:
            mark = marks.find(key)
        except TypeError:  # incomparable key (e.g. a column type changed): emit
            return True
        return mark is None or hw_reached(tx, mark.hw)
