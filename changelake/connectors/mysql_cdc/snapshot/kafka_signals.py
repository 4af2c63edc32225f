"""Debezium's Kafka signaling channel (``signal.enabled.channels`` = ``source,kafka``).

As Debezium's ``KafkaSignalChannel``: signals are records of ``signal.kafka.topic`` (one partition,
partition 0 is read) whose key is the connector's ``topic.prefix`` -- here the pipeline name (the
Kafka sink's default ``topic.prefix``); records with another key are skipped (logged at INFO, as
Debezium), as are tombstones (null values). The value is JSON::

    key:   orders
    value: {"type": "execute-snapshot", "data": {"data-collections": ["shop.orders"], "type": "incremental"}}

The signal's id is its Kafka offset (Debezium: the record offset). Unlike Debezium, which commits a
consumer-group offset, the offset of the next record to read is part of the MySQL source's stored
position (``signal_offset``, as Debezium's ``incremental_snapshot_signal_offset`` in its source
offsets), committed with the data it caused: a restart neither replays a signal already acted on
nor loses one that was not. ``signal.kafka.groupId`` is given to the consumer but no offset is
committed under it.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from changelake.connectors.errors import SourceError
from changelake.connectors.kafka_common import partition_end_offsets
from changelake.connectors.mysql_cdc.snapshot.signals import Signal

__all__ = ["KafkaSignalChannel"]

log = logging.getLogger(__name__)


class KafkaSignalChannel:
    """Reads signals from partition 0 of ``topic``, from ``offset`` (None: the beginning).

    Args:
        bootstrap_servers: ``signal.kafka.bootstrap.servers``.
        topic: ``signal.kafka.topic``.
        group_id: ``signal.kafka.groupId`` (no offsets are committed under it).
        key: the record key that addresses this pipeline (Debezium: ``topic.prefix``).
        offset: the next offset to read (from the stored position), None for the start of the topic.
        poll_timeout_s: ``signal.kafka.poll.timeout.ms`` in seconds: the longest a look for a new
            signal waits.

    Use :meth:`peek` for the next signal, and :meth:`ack` once it is acted on (or deliberately
    skipped); :attr:`offset` is then past it. A signal that cannot be acted on yet (an
    ``execute-snapshot`` while a snapshot runs) is left un-acked and is peeked again later.
    """

    def __init__(self, bootstrap_servers: str, topic: str, group_id: str, key: str, offset: int | None,
                 poll_timeout_s: float = 0.1, consumer_config: dict[str, str] | None = None) -> None:
        self.topic, self.key = topic, key
        #: the next offset to read: the stored position's ``signal_offset``
        self.offset: int | None = offset
        self._poll_s = poll_timeout_s
        self._config = {"bootstrap.servers": bootstrap_servers, "group.id": group_id, "enable.auto.commit": False,
                        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                        **(consumer_config or {})}
        self._consumer: Any = None
        self._buffer: deque[tuple[int, Signal | None]] = deque()

    def open(self) -> None:
        """Assign partition 0 of the topic at :attr:`offset`. Raises SourceError when Kafka refuses."""
        try:
            self._consumer = Consumer(self._config)
            start = self.offset if self.offset is not None else OFFSET_BEGINNING
            self._consumer.assign([TopicPartition(self.topic, 0, start)])
        except KafkaException as exc:
            raise SourceError(f"signal.kafka.topic {self.topic!r}: cannot read the signal topic: {exc}") from exc

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:  # noqa: BLE001 - closing
                pass
            self._consumer = None

    def _fetch(self, timeout_s: float) -> None:
        msgs = self._consumer.consume(100, timeout=timeout_s)
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == -191:  # _PARTITION_EOF
                    continue
                if "UNKNOWN_TOPIC" in err.name():  # not created yet: no signals
                    continue
                raise SourceError(f"signal.kafka.topic {self.topic!r} partition 0: {err}")
            self._buffer.append((int(m.offset()), self._parse(m)))

    def _parse(self, msg: Any) -> Signal | None:
        key = msg.key().decode("utf-8", "replace") if msg.key() is not None else None
        where = f"signal.kafka.topic {self.topic!r} partition {msg.partition()} offset {msg.offset()}"
        if key != self.key:  # as Debezium's KafkaSignalChannel, at INFO
            log.info("%s: signal record skipped: its key is %s, this pipeline's signals have the key %r (Debezium's "
                     "topic.prefix; here the pipeline name)", where, "missing" if key is None else repr(key), self.key)
            return None
        if msg.value() is None:
            log.info("%s: a tombstone (null value), not a signal; ignored", where)
            return None
        try:
            value = json.loads(msg.value())
        except ValueError as exc:
            log.warning("%s: value is not JSON (%s); ignored", where, exc)
            return None
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            log.warning("%s: value has no 'type'; ignored (expected {\"type\": ..., \"data\": {...}})", where)
            return None
        data = value.get("data") or {}
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError:
                data = None
        if not isinstance(data, dict):
            log.warning("%s: 'data' is not a JSON object; ignored", where)
            return None
        return Signal(f"kafka:{msg.offset()}", str(value["type"]), data)

    def peek(self, wait: bool = False) -> tuple[int, Signal | None] | None:
        """The next record as (offset, signal or None for a skipped record), None when there is none
        yet. ``wait``: wait up to ``signal.kafka.poll.timeout.ms`` for one."""
        if not self._buffer:
            self._fetch(self._poll_s if wait else 0.0)
        return self._buffer[0] if self._buffer else None

    def ack(self) -> None:
        """The record :meth:`peek` returned is done with: :attr:`offset` moves past it."""
        offset, _ = self._buffer.popleft()
        self.offset = offset + 1

    def caught_up(self) -> bool:
        """True when every record up to the partition's current end is acked (a missing or empty
        topic has none). Transaction markers count as read once the consumer is past them."""
        if self.peek(wait=True) is not None:
            return False
        tp = TopicPartition(self.topic, 0)
        try:
            high = partition_end_offsets(self._consumer, [(self.topic, 0)], 5.0)[(self.topic, 0)]
        except KafkaException as exc:
            log.debug("signal.kafka.topic %r: no watermark offsets (%s); no signals", self.topic, exc)
            return True
        fetched = self._consumer.position([tp])[0].offset
        nxt = max(self.offset if self.offset is not None else 0, fetched if fetched >= 0 else 0)
        return bool(nxt >= high)
