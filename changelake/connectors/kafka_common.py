"""Small Kafka helpers shared by the Kafka connectors (upsert-kafka, the pipeline kafka source/sink).

All use confluent-kafka (librdkafka). Nothing here opens a connection at import.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from changelake.connectors.errors import ConnectorError

__all__ = ["PROPERTIES_PREFIX", "client_properties", "ensure_topics", "end_offsets", "partition_count"]

#: Flink's prefix for options passed through to the Kafka client.
PROPERTIES_PREFIX = "properties."


def client_properties(options: Mapping[str, Any]) -> dict[str, str]:
    """The Kafka client config of a WITH-option map: every ``properties.*`` key with the prefix
    stripped, values as strings (as Flink's ``KafkaConnectorOptionsUtil.getKafkaProperties``).

    >>> client_properties({"properties.bootstrap.servers": "h:9092", "topic": "t"})
    {'bootstrap.servers': 'h:9092'}
    """
    return {k[len(PROPERTIES_PREFIX):]: str(v) for k, v in options.items() if k.startswith(PROPERTIES_PREFIX)}


def _admin(bootstrap: str | Mapping[str, str]) -> AdminClient:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap} if isinstance(bootstrap, str) else dict(bootstrap)
    return AdminClient(conf)


def ensure_topics(
    bootstrap: str | Mapping[str, str],
    names: Iterable[str],
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    *,
    replication_factor: int = -1,
    timeout_s: float = 30.0,
) -> list[str]:
    """Create the topics among ``names`` that do not exist yet; existing ones are left as they are.

    Args:
        bootstrap: ``host:port[,host:port]`` or a full client config (security settings etc.).
        names: topic names.
        partitions: partition count of created topics.
        config: topic config of created topics, e.g. ``{"cleanup.policy": "compact"}``.
        replication_factor: -1 uses the broker's ``default.replication.factor``.
        timeout_s: admin request timeout in seconds.

    Returns the names that were created. Raises ConnectorError naming the topic on failure
    (an already-existing topic, also one created concurrently, is not a failure).
    """
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return []
    admin = _admin(bootstrap)
    try:
        existing = set(admin.list_topics(timeout=timeout_s).topics)
    except KafkaException as exc:
        raise ConnectorError(f"cannot list Kafka topics: {exc}") from exc
    missing = [n for n in wanted if n not in existing]
    if not missing:
        return []
    new = [NewTopic(n, num_partitions=partitions, replication_factor=replication_factor, config=dict(config or {})) for n in missing]
    created: list[str] = []
    for name, fut in admin.create_topics(new, request_timeout=timeout_s).items():
        try:
            fut.result()
            created.append(name)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if getattr(err, "name", lambda: "")() == "TOPIC_ALREADY_EXISTS":
                continue
            raise ConnectorError(f"cannot create Kafka topic {name!r}: {exc}") from exc
    return created


def partition_count(bootstrap: str | Mapping[str, str] | Consumer, topic: str, timeout_s: float = 10.0) -> int:
    """Number of partitions of ``topic``. Raises ConnectorError if the topic does not exist."""
    client = bootstrap if isinstance(bootstrap, Consumer) else _admin(bootstrap)
    md = client.list_topics(topic, timeout=timeout_s)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        raise ConnectorError(f"Kafka topic {topic!r} does not exist or has no partitions ({t.error if t else 'missing'})")
    return len(t.partitions)


def end_offsets(consumer_or_bootstrap: Consumer | str | Mapping[str, str], topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """The current end offset (high watermark: the next offset to be written) per partition.

    With a read_committed consumer (librdkafka's default) this is the last stable offset.
    Accepts an open Consumer or a bootstrap string / client config (a short-lived consumer
    is created and closed). Raises ConnectorError naming the topic.
    """
    own = not isinstance(consumer_or_bootstrap, Consumer)
    if own:
        conf: dict[str, Any] = (
            {"bootstrap.servers": consumer_or_bootstrap}
            if isinstance(consumer_or_bootstrap, str)
            else dict(consumer_or_bootstrap)  # type: ignore[arg-type]
        )
        conf.setdefault("group.id", "changelake-end-offsets")
        conf["enable.auto.commit"] = False
        consumer = Consumer(conf)
    else:
        consumer = consumer_or_bootstrap  # type: ignore[assignment]
    try:
        n = partition_count(consumer, topic, timeout_s)
        out: dict[int, int] = {}
        for p in range(n):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s, cached=False)
            out[p] = high
        return out
    except KafkaException as exc:
        raise ConnectorError(f"cannot read end offsets of Kafka topic {topic!r}: {exc}") from exc
    finally:
        if own:
            consumer.close()
