"""Records a source emits beside its change events: Debezium's transaction metadata and heartbeats.

- :class:`TransactionRecord` -- a ``BEGIN`` or ``END`` of a source transaction, as Debezium's
  ``provide.transaction.metadata`` writes them to ``<topic.prefix>.transaction``; ``END`` carries
  the number of change events per table (``data_collections``) and in all (``event_count``).
- :class:`HeartbeatRecord` -- Debezium's heartbeat message (``heartbeat.interval.ms``), written to
  ``__debezium-heartbeat.<topic.prefix>``; it exists so that the stored position is committed
  even while the captured tables are idle.

A source hands them out with :class:`~changelake.connectors.base.EmitsSideRecords`; a sink that can
write them has :class:`~changelake.connectors.base.WritesSideRecords` (the Kafka pipeline sink,
in the same Kafka transaction as the data under exactly-once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

__all__ = ["TransactionRecord", "HeartbeatRecord", "SideRecord"]


@dataclass(frozen=True)
class TransactionRecord:
    """A transaction boundary, as Debezium's transaction metadata message.

    Attributes:
        status: ``"BEGIN"`` or ``"END"``.
        id: the transaction id: the GTID (``domain-server-seq`` on MariaDB, ``uuid:n`` on MySQL),
            else ``file=<binlog file>,pos=<start position>`` (as Debezium's MySQL connector).
        ts_ms: commit time of the transaction in ms since the epoch (binlog second resolution).
        event_count: END only: change events of the transaction (None for BEGIN).
        data_collections: END only: ``((db.table, events), ...)`` in first-seen order (None for BEGIN).
    """

    status: str
    id: str
    ts_ms: int
    event_count: int | None = None
    data_collections: tuple[tuple[str, int], ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """Debezium's value: ``{"status", "id", "ts_ms", "event_count", "data_collections":
        [{"data_collection": "db.t", "event_count": n}, ...]}`` (the last two null for BEGIN)."""
        return {
            "status": self.status,
            "id": self.id,
            "ts_ms": self.ts_ms,
            "event_count": self.event_count,
            "data_collections": None if self.data_collections is None else [
                {"data_collection": name, "event_count": count} for name, count in self.data_collections],
        }


@dataclass(frozen=True)
class HeartbeatRecord:
    """A heartbeat: ``ts_ms`` is the wall-clock time it was emitted (ms since the epoch)."""

    ts_ms: int

    def to_json(self) -> dict[str, Any]:
        """Debezium's value: ``{"ts_ms": ...}``."""
        return {"ts_ms": self.ts_ms}


SideRecord = Union[TransactionRecord, HeartbeatRecord]
