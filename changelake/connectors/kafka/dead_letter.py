"""Dead-letter queue of the Kafka pipeline source: bad records are copied, never silently dropped.

With ``<format>.ignore-parse-errors: true`` a record that cannot be decoded, or whose change cannot
be applied (e.g. its row lacks a primary-key column), is skipped and counted; with
``dead-letter.topic`` it is also copied, unchanged (key, value, original headers), to that topic
with headers saying where it came from and why, named as Kafka Connect's dead-letter queue names
them (``errors.deadletterqueue.context.headers.enable``):

=======================================  ====================================================
header                                   value (UTF-8 text)
=======================================  ====================================================
``__connect.errors.topic``               source topic
``__connect.errors.partition``           source partition (decimal)
``__connect.errors.offset``              source offset (decimal)
``__connect.errors.exception.class.name`` the error's class, e.g. ``DecodeError``
``__connect.errors.exception.message``   the error's message (names field / column)
``changelake.errors.table``              the table, ``db.table``, when known
=======================================  ====================================================

Delivery is at-least-once: :meth:`DeadLetterQueue.flush` is called before the lake commits the
offsets past the bad record, so a crash in between copies it again on restart (never loses it).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping


from confluent_kafka.admin import AdminClient

from changelake.connectors.errors import SinkFlushError
from changelake.connectors.kafka.sink import KafkaProducer, admin_config
from changelake.connectors.kafka.topics import TopicCreator
from changelake.connectors.kafka_common import with_logger

__all__ = ["DeadLetterQueue", "DLQ_HEADERS"]

log = logging.getLogger(__name__)

#: header names, in the order written
DLQ_HEADERS = (
    "__connect.errors.topic",
    "__connect.errors.partition",
    "__connect.errors.offset",
    "__connect.errors.exception.class.name",
    "__connect.errors.exception.message",
    "changelake.errors.table",
)

_CONSUMER_ONLY = ("group.", "isolation.level", "auto.offset.reset", "enable.auto", "enable.partition.eof",
                  "session.timeout", "max.poll", "fetch.", "auto.commit")


class DeadLetterQueue:
    """Copies bad records to a dead-letter topic (created if missing, 1 partition).

    Args:
        properties: Kafka client config (``bootstrap.servers``, security); consumer-only keys are
            dropped for the producer.
        topic: the dead-letter topic.
        timeout_s: how long topic creation and :meth:`flush` may wait, seconds (30).

    Attributes:
        sent: records copied so far.

    The constructor does no I/O; the producer opens at the first :meth:`send`.
    """

    def __init__(self, properties: Mapping[str, str], topic: str, timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.sent = 0
        self._properties = {k: v for k, v in properties.items() if not k.startswith(_CONSUMER_ONLY)}
        self._timeout_s = timeout_s
        self._producer: KafkaProducer | None = None

    def _open(self) -> KafkaProducer:
        if self._producer is None:
            admin = AdminClient(with_logger(admin_config(self._properties)))
            TopicCreator(admin, 1, 1, self._timeout_s).ensure([self.topic])
            conf: dict[str, Any] = dict(self._properties)
            conf.setdefault("acks", "all")
            conf.setdefault("enable.idempotence", "true")
            producer = KafkaProducer(conf, queue_timeout_s=self._timeout_s)
            producer.open(self._timeout_s)
            self._producer = producer
        return self._producer

    def send(self, *, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
             headers: list[tuple[str, bytes]] | None, error: BaseException, table: str | None = None) -> None:
        """Queue a copy of the record at ``topic``/``partition``/``offset`` with the error headers.

        Raises:
            TopicCreationError: the dead-letter topic cannot be created.
            SinkFlushError: the producer refuses the record.
        """
        producer = self._open()
        context = [
            (DLQ_HEADERS[0], topic),
            (DLQ_HEADERS[1], str(partition)),
            (DLQ_HEADERS[2], str(offset)),
            (DLQ_HEADERS[3], type(error).__name__),
            (DLQ_HEADERS[4], str(error)[:4000]),
        ]
        if table:
            context.append((DLQ_HEADERS[5], table))
        all_headers: list[tuple[str, bytes]] = [(k, v) for k, v in headers or []]
        all_headers += [(k, v.encode("utf-8")) for k, v in context]
        try:
            producer.produce(self.topic, key, value, headers=all_headers)
        except SinkFlushError as exc:
            raise SinkFlushError(f"cannot copy the record at topic {topic!r} partition {partition} offset {offset} "
                                 f"to dead-letter topic {self.topic!r}: {exc}", topic=self.topic) from exc
        producer.poll(0)
        self.sent += 1
        log.warning("copied the bad record at topic %r partition %d offset %d to dead-letter topic %r: %s",
                    topic, partition, offset, self.topic, error)

    def flush(self) -> None:
        """Wait until every copied record is acknowledged.

        Raises:
            SinkFlushError: a copy failed or was not acknowledged within ``timeout_s`` (names the topic).
        """
        if self._producer is None:
            return
        self._producer.flush(self._timeout_s)  # SinkFlushError names the dead-letter topic

    def close(self) -> None:
        """Flush (best effort) and drop the producer. Idempotent."""
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(self._timeout_s)  # logs records left undelivered
