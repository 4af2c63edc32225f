"""Resume positions of the MySQL CDC source: snapshot progress and binlog position.

A position is a JSON-serialisable dict (stored by sinks next to the data, e.g. in a Kafka offsets
topic). As Debezium's MySQL offsets, a binlog position names the **start of a transaction**
(``file``, ``pos``) plus the number of rows already emitted inside it (``row``): a restart
re-reads that transaction and skips those rows, so a batch boundary may fall inside one huge
statement without loss or duplicate::

    {"phase": "binlog", "file": "mysql-bin.000003", "pos": 4711, "row": 2}

During the initial snapshot the position also carries the snapshot progress; ``file``/``pos`` are
then the binlog position the snapshot is consistent with (where streaming will start)::

    {"phase": "snapshot", "file": "mysql-bin.000003", "pos": 4711, "row": 0,
     "snapshot": {"tables": ["shop.orders", "shop.items"], "after_key": ["1000"]}}

While XA transactions are prepared but not yet committed or rolled back, the position lists where
each one's events start (``xa_prepared``); a restart re-reads those groups (and nothing else)
before the resume point, so their ``XA COMMIT`` can still be published exactly once::

    {"phase": "binlog", "file": "mysql-bin.000003", "pos": 9000, "row": 0,
     "xa_prepared": [{"xid": "7831::1", "file": "mysql-bin.000003", "pos": 4711}]}

``tables`` lists the tables still to read, the first being in progress; ``after_key`` holds the
primary-key values (MySQL text form; bytes as ``{"hex": ...}``) of the last row emitted from it.

With ``scan.incremental.snapshot.enabled`` the snapshot progress carries ``marks`` instead of
``after_key``: per table, the chunk key columns and the key ranges already emitted, each with the
high watermark (binlog position) it was read at (see
:mod:`~changelake.connectors.mysql_cdc.snapshot.watermarks` for the shape). After the snapshot, until the
largest high watermark is passed, binlog positions carry the same structure as ``watermarks``
(binlog events of rows below a chunk's high watermark are not emitted, as Flink CDC's
``BinlogSplitReader.shouldEmit``). Both are kept as JSON here and parsed where used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

from changelake.connectors.errors import SourceError

__all__ = ["BinlogPosition", "PreparedXa", "SnapshotProgress", "SourcePosition", "TransactionTracker", "binlog_file_index", "encode_key", "decode_key"]


def binlog_file_index(name: str) -> tuple[str, int]:
    """Sort key of a binlog file name: (base name, numeric suffix), e.g. ('mysql-bin', 3)."""
    m = re.match(r"^(.*)\.(\d+)$", name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


@dataclass(frozen=True, order=True)
class BinlogPosition:
    """A transaction start in the binlog plus rows already emitted from that transaction.

    Attributes:
        file: binlog file name.
        pos: byte offset of the transaction's first event (GTID / BEGIN), or of the next
            transaction after a commit.
        row: events already emitted from the transaction at ``pos`` (skipped on resume).
    """

    file: str
    pos: int
    row: int = 0

    def sort_key(self) -> tuple[tuple[str, int], int, int]:
        return (binlog_file_index(self.file), self.pos, self.row)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" (+{self.row} rows)" if self.row else "")


def encode_key(values: list[Any]) -> list[Any]:
    """Primary-key text values -> JSON-safe list (bytes become ``{"hex": ...}``)."""
    return [{"hex": v.hex()} if isinstance(v, (bytes, bytearray)) else v for v in values]


def decode_key(values: list[Any]) -> list[Any]:
    """Inverse of :func:`encode_key`."""
    return [bytes.fromhex(v["hex"]) if isinstance(v, dict) and "hex" in v else v for v in values]


@dataclass(frozen=True)
class SnapshotProgress:
    """Tables still to snapshot (``db.table``, first one in progress) and the last key read from it."""

    tables: tuple[str, ...]
    after_key: tuple[Any, ...] | None = None
    #: incremental snapshot only: ``{"db.t": {"key": [...], "marks": [...]}}`` (JSON, see
    #: :mod:`~changelake.connectors.mysql_cdc.snapshot.watermarks`); None for the consistent snapshot.
    marks: Mapping[str, Any] | None = None


@dataclass(frozen=True, order=True)
class PreparedXa:
    """An XA transaction prepared but not yet resolved: its XID and where its events start.

    Attributes:
        file: binlog file of its first event (the GTID / XA START event).
        pos: byte offset of that event.
        xid: ``gtrid-hex:bqual-hex:formatID``.
    """

    file: str
    pos: int
    xid: str

    def sort_key(self) -> tuple[tuple[str, int], int]:
        return (binlog_file_index(self.file), self.pos)


@dataclass(frozen=True)
class SourcePosition:
    """The whole resume position: phase, binlog position, snapshot progress, prepared XA transactions."""

    binlog: BinlogPosition
    snapshot: SnapshotProgress | None = None
    xa_prepared: tuple[PreparedXa, ...] = ()
    #: binlog phase after an incremental snapshot, until its largest high watermark is passed:
    #: the chunk high watermarks (same JSON as ``SnapshotProgress.marks``); else None.
    watermarks: Mapping[str, Any] | None = None

    @property
    def phase(self) -> str:
        return "snapshot" if self.snapshot is not None else "binlog"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (see module doc)."""
        out: dict[str, Any] = {"phase": self.phase, "file": self.binlog.file, "pos": self.binlog.pos, "row": self.binlog.row}
        if self.snapshot is not None:
            out["snapshot"] = {
                "tables": list(self.snapshot.tables),
                "after_key": encode_key(list(self.snapshot.after_key)) if self.snapshot.after_key is not None else None,
            }
            if self.snapshot.marks is not None:
                out["snapshot"]["marks"] = self.snapshot.marks
        if self.watermarks is not None:
            out["watermarks"] = self.watermarks
        if self.xa_prepared:
            out["xa_prepared"] = [{"xid": x.xid, "file": x.file, "pos": x.pos} for x in self.xa_prepared]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SourcePosition":
        """Parse a stored position. Raises SourceError naming the bad position."""
        try:
            binlog = BinlogPosition(str(data["file"]), int(data["pos"]), int(data.get("row", 0)))
            snap = data.get("snapshot")
            progress = None
            if data.get("phase", "binlog") == "snapshot" and snap is not None:
                key = snap.get("after_key")
                marks = snap.get("marks")
                if marks is not None and not isinstance(marks, Mapping):
                    raise TypeError("snapshot.marks must be an object")
                progress = SnapshotProgress(tuple(snap["tables"]), tuple(decode_key(list(key))) if key is not None else None, marks)
            xa = tuple(sorted(PreparedXa(str(x["file"]), int(x["pos"]), str(x["xid"])) for x in data.get("xa_prepared", ())))
            watermarks = data.get("watermarks")
            if watermarks is not None and not isinstance(watermarks, Mapping):
                raise TypeError("watermarks must be an object")
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceError(f"stored MySQL source position {dict(data)!r} is not valid: {exc}") from exc
        return cls(binlog, progress, xa, watermarks)

    def with_binlog(self, binlog: BinlogPosition) -> "SourcePosition":
        return replace(self, binlog=binlog)


@dataclass
class TransactionTracker:
    """Tracks the transaction start and rows emitted inside it while reading the binlog.

    ``skip`` rows of the first transaction are dropped (they were emitted before a restart).
    """

    file: str
    tx_start: int
    emitted: int = 0
    skip: int = 0
    in_tx: bool = False

    def position(self) -> BinlogPosition:
        return BinlogPosition(self.file, self.tx_start, self.emitted)

    def begin(self, start: int) -> None:
        """A transaction (GTID event, BEGIN or a DDL statement) starts at byte ``start``."""
        if not self.in_tx:
            if start != self.tx_start:
                self.skip = 0  # the stored transaction is behind us
            self.tx_start = start
            self.emitted = 0
            self.in_tx = True

    def end(self, next_pos: int) -> None:
        """The transaction committed; the next one starts at ``next_pos`` (never moves backwards)."""
        if not self.in_tx and next_pos <= self.tx_start:
            return
        self.tx_start = next_pos
        self.emitted = 0
        self.skip = 0
        self.in_tx = False

    def emit(self) -> bool:
        """Count one emitted row; False if it must be skipped (already emitted before a restart)."""
        self.emitted += 1
        return self.emitted > self.skip

    def rotate(self, file: str, pos: int) -> None:
        if file != self.file:
            self.file, self.tx_start, self.emitted, self.in_tx = file, pos, 0, False
            self.skip = 0
