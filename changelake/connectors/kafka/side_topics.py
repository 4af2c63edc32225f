"""Debezium's transaction metadata and heartbeat records as Kafka records (the pipeline sink's side topics).

- Transaction records (``provide.transaction.metadata``) go to ``<topic.prefix>.transaction``
  (Debezium's ``topic.transaction``), keyed ``{"id": "<transaction id>"}``, valued as Debezium's
  schemaless JSON: ``{"status": "BEGIN"|"END", "id": ..., "ts_ms": ..., "event_count": n|null,
  "data_collections": [{"data_collection": "db.t", "event_count": n}, ...]|null}``.
- Heartbeat records (``heartbeat.interval.ms``) go to ``__debezium-heartbeat.<topic.prefix>``
  (Debezium's ``topic.heartbeat.prefix``), keyed ``{"serverName": "<topic.prefix>"}``, valued
  ``{"ts_ms": ...}``.

Both topics have one partition (so the transaction records keep their order) and carry the
header ``changelake.record`` (``transaction`` / ``heartbeat``), by which changelake's own Kafka
source knows to skip them should a ``topic-pattern`` select them.
"""

from __future__ import annotations

import json
from typing import Any

from changelake.changelog.side_records import HeartbeatRecord, SideRecord, TransactionRecord

__all__ = ["SIDE_RECORD_HEADER", "side_record", "side_record_kind"]

#: header naming a side record's kind (value ``transaction`` or ``heartbeat``).
SIDE_RECORD_HEADER = "changelake.record"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def side_record(record: SideRecord, transaction_topic: str, heartbeat_topic: str,
                topic_prefix: str) -> tuple[str, bytes, bytes, list[tuple[str, bytes]]]:
    """``(topic, key, value, headers)`` of ``record``.

    Raises:
        TypeError: ``record`` is neither a TransactionRecord nor a HeartbeatRecord.
    """
    if isinstance(record, TransactionRecord):
        return (transaction_topic, _dumps({"id": record.id}), _dumps(record.to_json()),
                [(SIDE_RECORD_HEADER, b"transaction")])
    if isinstance(record, HeartbeatRecord):
        return (heartbeat_topic, _dumps({"serverName": topic_prefix}), _dumps(record.to_json()),
                [(SIDE_RECORD_HEADER, b"heartbeat")])
    raise TypeError(f"not a side record: {record!r}")


def side_record_kind(headers: list[tuple[str, bytes | None]] | None) -> str | None:
    """The ``changelake.record`` header's value of a consumed record (None when absent)."""
    for k, v in headers or ():
        if k == SIDE_RECORD_HEADER and v is not None:
            return v.decode("utf-8", "replace")
    return None
