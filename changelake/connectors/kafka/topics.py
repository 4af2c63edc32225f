"""Topic naming of the Kafka pipeline sink and topic creation.

Naming follows Flink CDC's ``PipelineKafkaRecordSerializationSchema.inferTopicName``; the first rule
that applies wins:

1. the ``topic`` option (every table to one topic);
2. the first ``sink.tableId-to-topic.mapping`` selector that matches the TableId;
3. ``str(table_id)``, i.e. ``db.table``.

Unlike Flink CDC (which relies on the broker's ``auto.create.topics.enable``), changelake creates
missing topics with the AdminClient (:class:`TopicCreator`).
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from changelake.changelog.schema import TableId
from changelake.changelog.selectors import Selectors
from changelake.connectors.errors import ConnectorError

__all__ = ["TopicNamer", "TopicCreator", "TopicCreationError"]

log = logging.getLogger(__name__)


class TopicCreationError(ConnectorError):
    """A topic could not be created or described.

    Attributes:
        topic: the topic name.
    """

    def __init__(self, message: str, *, topic: str) -> None:
        self.topic = topic
        super().__init__(message)


class TopicNamer:
    """TableId -> topic name (cached per TableId).

    Args:
        topic: the ``topic`` option (overrides everything), or None.
        mapping: ``(selectors, topic)`` pairs from ``sink.tableId-to-topic.mapping``, in order.

    Example::

        >>> TopicNamer(None, ()).topic_for(TableId("kafka_test", "customers"))
        'kafka_test.customers'
    """

    def __init__(self, topic: str | None, mapping: Sequence[tuple[Selectors, str]]) -> None:
        self._topic = topic
        self._mapping = tuple(mapping)
        self._cache: dict[TableId, str] = {}

    def topic_for(self, table_id: TableId) -> str:
        hit = self._cache.get(table_id)
        if hit is not None:
            return hit
        name = self._topic
        if name is None:
            for selectors, topic in self._mapping:
                if selectors.matches(table_id):
                    name = topic
                    break
        if name is None:
            name = str(table_id)
        self._cache[table_id] = name
        return name


class TopicCreator:
    """Creates topics that do not exist yet (idempotent; remembers topics it has seen).

    Args:
        admin: a confluent-kafka AdminClient.
        partitions: partitions of new topics.
        replication_factor: replication factor of new topics.
        timeout_s: seconds to wait for the broker per call.
    """

    def __init__(self, admin: AdminClient, partitions: int = 1, replication_factor: int = 1,
                 timeout_s: float = 30.0) -> None:
        self._admin = admin
        self._partitions = partitions
        self._replication = replication_factor
        self._timeout = timeout_s
        self._known: set[str] = set()

    def ensure(self, topics: Iterable[str], config: Mapping[str, str] | None = None,
               partitions: int | None = None) -> None:
        """Create the topics among ``topics`` that are missing; existing topics are left as they are.

        Raises:
            TopicCreationError: the broker refused to create a topic (names it and the reason).
        """
        wanted = sorted(set(topics) - self._known)
        if not wanted:
            return
        try:
            existing = set(self._admin.list_topics(timeout=self._timeout).topics)
        except KafkaException as exc:
            raise TopicCreationError(f"cannot list topics: {exc}", topic=wanted[0]) from exc
        missing = [t for t in wanted if t not in existing]
        if missing:
            new = [
                NewTopic(t, num_partitions=partitions or self._partitions, replication_factor=self._replication,
                         config=dict(config or {}))
                for t in missing
            ]
            futures = self._admin.create_topics(new, operation_timeout=self._timeout, request_timeout=self._timeout)
            for topic, fut in futures.items():
                try:
                    fut.result(timeout=self._timeout)
                    log.info("created topic %s (%d partitions)", topic, partitions or self._partitions)
                except KafkaException as exc:
                    err = exc.args[0] if exc.args else None
                    if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                        continue
                    raise TopicCreationError(f"cannot create topic {topic!r}: {exc}", topic=topic) from exc
        self._known.update(wanted)
