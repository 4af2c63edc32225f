"""Small Kafka helpers shared by the Kafka connectors (upsert-kafka, the pipeline kafka source/sink).

All use confluent-kafka (librdkafka). Nothing here opens a connection at import.

Client logs: every Producer, Consumer and AdminClient the project creates gets
``with_logger(conf)``, so librdkafka's log lines (``%3|...|FAIL|rdkafka#producer-1| ... Connect
to ipv4#127.0.0.1:9092 failed: Connection refused``) become Python log records of the logger
``changelake.kafka.client`` (syslog level 3 -> ERROR, 4 -> WARNING, ...) instead of raw stderr.
confluent-kafka hands them over when the client is polled (``poll``/``flush``/``consume``/
``close``). A :class:`RepeatedMessageFilter` on that logger lets the first record of a message
through and then at most one per :data:`REPEAT_INTERVAL_S` seconds per message text, so a broker
outage logs a few lines, not hundreds.

Unreachable brokers: :func:`require_broker` and :func:`unavailable_error` turn librdkafka's
``Failed to get metadata: Local: Broker transport failure`` into one
:class:`~changelake.connectors.errors.KafkaUnavailableError` naming ``bootstrap.servers``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any, Callable, Iterable, Mapping, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from changelake.connectors.errors import ConnectorError, KafkaUnavailableError, SourceError
from changelake.connectors.options import PROPERTIES_PREFIX

__all__ = [
    "CLIENT_LOGGER_NAME",
    "PROPERTIES_PREFIX",
    "REPEAT_INTERVAL_S",
    "RepeatedMessageFilter",
    "client_logger",
    "client_properties",
    "consumer_error",
    "ensure_topics",
    "end_offsets",
    "lag_of",
    "partition_end_offsets",
    "partition_lag",
    "partition_watermarks",
    "watermarks",
    "WatermarkError",
    "KafkaEndOffsets",
    "partition_count",
    "require_broker",
    "BROKER_PROBE_TIMEOUT_S",
    "unavailable_error",
    "with_logger",
]

K = TypeVar("K")

#: The logger librdkafka's lines of every project Kafka client go to.
CLIENT_LOGGER_NAME = "changelake.kafka.client"

#: How long a connector waits for the first answer of any broker before it reports Kafka as
#: unreachable (a local or remote broker answers a metadata request in well under a second).
BROKER_PROBE_TIMEOUT_S = 10.0

#: After the first record of a message text, at most one record per this many seconds.
REPEAT_INTERVAL_S = 30.0

#: Error codes meaning "no broker answered" (as opposed to a broker refusing a request).
_UNREACHABLE_CODES = frozenset({
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._TIMED_OUT,
})

# Parts of librdkafka's lines that differ between otherwise identical lines: the client instance
# ("rdkafka#producer-7"), durations ("after 0ms"), suppression counters.
_VOLATILE = (
    (re.compile(r"rdkafka#(producer|consumer)-\d+"), r"rdkafka#\1"),
    (re.compile(r"\b\d+ms\b"), "Nms"),
    (re.compile(r"\d+ identical error\(s\) suppressed"), "N identical error(s) suppressed"),
)


class RepeatedMessageFilter(logging.Filter):
    """Passes the first record of each message text, then at most one per ``interval_s`` seconds.

    The text is the formatted message with client instance numbers and millisecond durations
    blanked out, so the same connection failure seen by a producer and an admin client counts as
    one. A record let through after suppressed ones gets ``" (N similar suppressed in the last S s)"``
    appended. Thread-safe; remembers at most ``max_keys`` texts (the oldest are forgotten).

    Args:
        interval_s: seconds between two records of the same text (default :data:`REPEAT_INTERVAL_S`).
        clock: monotonic clock in seconds (tests pass a fake one).
        max_keys: number of distinct texts remembered.
    """

    def __init__(self, interval_s: float = REPEAT_INTERVAL_S, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 1000) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._clock = clock
        self._max_keys = max_keys
        self._seen: dict[str, list[float]] = {}  # text -> [time let through, suppressed since]
        self._lock = threading.Lock()

    @staticmethod
    def key(message: str) -> str:
        """The text two records are compared by (volatile parts blanked out)."""
        for rx, repl in _VOLATILE:
            message = rx.sub(repl, message)
        return message

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        key = self.key(message)
        now = self._clock()
        with self._lock:
            state = self._seen.get(key)
            if state is not None and now - state[0] < self.interval_s:
                state[1] += 1
                return False
            if state is None and len(self._seen) >= self._max_keys:
                del self._seen[next(iter(self._seen))]
            self._seen.pop(key, None)
            self._seen[key] = [now, 0]
        if state is not None and state[1]:
            record.msg = f"{message} ({int(state[1])} similar suppressed in the last {now - state[0]:.0f} s)"
            record.args = ()
        return True


_client_logger_lock = threading.Lock()


def client_logger() -> logging.Logger:
    """The logger ``changelake.kafka.client``, with one :class:`RepeatedMessageFilter` installed."""
    logger = logging.getLogger(CLIENT_LOGGER_NAME)
    with _client_logger_lock:
        if not any(isinstance(f, RepeatedMessageFilter) for f in logger.filters):
            logger.addFilter(RepeatedMessageFilter())
    return logger


def with_logger(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a confluent-kafka client config whose librdkafka logs go to :func:`client_logger`
    (the ``logger`` key; a logger already in ``conf`` is kept). Use it for every client created."""
    out = dict(conf)
    out.setdefault("logger", client_logger())
    return out


#: librdkafka's ``fetch.queue.backoff.ms`` for the consumers that read a topic's records (the
#: Pipeline 2 ``kafka`` source, ``upsert-kafka``, the ``kafka`` table source), unless
#: ``properties.fetch.queue.backoff.ms`` sets it. librdkafka stops fetching a partition once its
#: local queue holds ``queued.min.messages`` (100,000) and then waits this long (1000 ms by
#: default) before it looks again; a reader that drains 100,000 records in less than a second then
#: waits in ``consume()`` with nothing fetched (librdkafka issue #2879, which added the option).
#: Measured with ``bench/bench_lake_ingest.py`` (insert-only, 200,000 events, quiet machine): the
#: main thread waited 0.4 s of a 1.45 s run in ``consume()`` at 1000 ms, 0.1 s at 10 ms.
READER_FETCH_QUEUE_BACKOFF_MS = 10


def reader_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a record-reading consumer's config with the reader defaults that ``conf`` does
    not set (:data:`READER_FETCH_QUEUE_BACKOFF_MS`)."""
    out = dict(conf)
    out.setdefault("fetch.queue.backoff.ms", READER_FETCH_QUEUE_BACKOFF_MS)
    return out


def consumer_error(err: KafkaError, topic: str | None, partition: int | None, offset: int | None,
                   reading: str) -> SourceError:
    """The :class:`~changelake.connectors.errors.SourceError` of a consumed message that carries
    a Kafka error other than end-of-partition (which the readers take as the end): one message
    text for every record reader.

    Args:
        err: the message's ``error()``.
        topic, partition, offset: the message's ``topic()``, ``partition()``, ``offset()`` (an
            offset below 0, librdkafka's "invalid", is left out).
        reading: what the consumer reads, for an error of the consumer itself, e.g.
            ``"topics ['a', 'b']"``.

    A partition's error names it: ``Kafka error on topic 't' partition 3 at offset 17: <error>``.
    librdkafka gives an error of the consumer itself (a fatal error, a group the broker refuses)
    in a message without a topic; that one names what the consumer reads instead:
    ``Kafka consumer error (reading topics ['a']): <error>`` (``fatal`` added when it is).
    """
    fatal = " (fatal)" if err.fatal() else ""
    if topic is None:
        return SourceError(f"Kafka consumer error (reading {reading}): {err.str()}{fatal}")
    at = f" at offset {offset}" if offset is not None and offset >= 0 else ""
    return SourceError(f"Kafka error on topic {topic!r} partition {partition or 0}{at}: {err.str()}{fatal}")


def _servers(conf: Mapping[str, Any] | str) -> str:
    if isinstance(conf, str):
        return conf
    return str(conf.get("bootstrap.servers") or conf.get("metadata.broker.list") or "(bootstrap.servers not set)")


def unavailable_error(exc: KafkaException, conf: Mapping[str, Any] | str,
                      timeout_s: float) -> KafkaUnavailableError | None:
    """The :class:`KafkaUnavailableError` for ``exc`` when it means that no broker answered
    (transport failure, all brokers down, unresolvable host, timed out), else None.

    Args:
        exc: what a client call raised.
        conf: the client config (only ``bootstrap.servers`` is read) or the bootstrap string.
        timeout_s: the timeout the call was given, seconds.

    The message is ``cannot reach Kafka at <bootstrap.servers> within <N> s (<librdkafka error>)``
    and ``kafka_error`` holds the KafkaError. Raise it ``from exc`` (the client's exception).
    """
    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError) or err.code() not in _UNREACHABLE_CODES:
        return None
    servers = _servers(conf)
    return KafkaUnavailableError(
        f"cannot reach Kafka at {servers} within {timeout_s:g} s ({err.str()}); is the broker running and "
        "is properties.bootstrap.servers its address?",
        bootstrap_servers=servers,
        timeout_s=timeout_s,
        kafka_error=err,
    )


def require_broker(client: Any, conf: Mapping[str, Any] | str, timeout_s: float) -> None:
    """Wait until a broker answers a metadata request of ``client`` (a Producer, Consumer or
    AdminClient), at most ``timeout_s`` seconds and never longer than
    :data:`BROKER_PROBE_TIMEOUT_S`, so that an unreachable Kafka is reported within about 10 s.

    Raises:
        KafkaUnavailableError: no broker answered (names ``bootstrap.servers``).
        ConnectorError: a broker answered with an error (e.g. authentication failed).
    """
    timeout_s = min(timeout_s, BROKER_PROBE_TIMEOUT_S)
    try:
        client.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        _serve_logs(client)
        unavailable = unavailable_error(exc, conf, timeout_s)
        if unavailable is not None:
            raise unavailable from exc
        raise ConnectorError(f"Kafka at {_servers(conf)} refused a metadata request: {exc}") from exc


def _serve_logs(client: Any) -> None:
    """Hand the client's queued librdkafka log lines to Python logging (confluent-kafka delivers
    them on poll). A Consumer serves them on close()."""
    if not isinstance(client, Consumer):
        try:
            client.poll(0)
        except (KafkaException, RuntimeError):  # pragma: no cover - a closed client
            pass



def client_properties(options: Mapping[str, Any]) -> dict[str, str]:
    """The Kafka client config of a WITH-option map: every ``properties.*`` key with the prefix
    stripped, values as strings (as Flink's ``KafkaConnectorOptionsUtil.getKafkaProperties``).

    >>> client_properties({"properties.bootstrap.servers": "h:9092", "topic": "t"})
    {'bootstrap.servers': 'h:9092'}
    """
    return {k[len(PROPERTIES_PREFIX):]: str(v) for k, v in options.items() if k.startswith(PROPERTIES_PREFIX)}


def _admin(bootstrap: str | Mapping[str, str]) -> AdminClient:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap} if isinstance(bootstrap, str) else dict(bootstrap)
    return AdminClient(with_logger(conf))


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
    (an already-existing topic, also one created concurrently, is not a failure), and
    KafkaUnavailableError when no broker answers within ``timeout_s``.
    """
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return []
    admin = _admin(bootstrap)
    try:
        existing = set(admin.list_topics(timeout=timeout_s).topics)
    except KafkaException as exc:
        _serve_logs(admin)
        unavailable = unavailable_error(exc, bootstrap, timeout_s)
        if unavailable is not None:
            raise unavailable from exc
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
    """Number of partitions of ``topic``. Raises ConnectorError if the topic does not exist; with a
    bootstrap string or config KafkaUnavailableError if no broker answers within ``timeout_s``
    (with a Consumer, its KafkaException)."""
    client = bootstrap if isinstance(bootstrap, Consumer) else _admin(bootstrap)
    try:
        md = client.list_topics(topic, timeout=timeout_s)
    except KafkaException as exc:
        if isinstance(bootstrap, Consumer):  # the caller knows its config and translates
            raise
        _serve_logs(client)
        unavailable = unavailable_error(exc, bootstrap, timeout_s)
        if unavailable is not None:
            raise unavailable from exc
        raise
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        raise ConnectorError(f"Kafka topic {topic!r} does not exist or has no partitions ({t.error if t else 'missing'})")
    return len(t.partitions)


def watermarks(consumer: Consumer, topic: str, timeout_s: float = 10.0, *,
               missing_ok: bool = True) -> dict[int, tuple[int, int]]:
    """The one end-offsets probe: ``partition -> (low, high)`` watermarks of ``topic`` (high: the
    next offset to be written; with a read_committed consumer the last stable offset), partitions
    in order, read fresh from the brokers (not librdkafka's cache).

    Args:
        consumer: an open Consumer.
        timeout_s: per metadata or offsets request, seconds.
        missing_ok: a topic that does not exist or has no partitions gives ``{}``; False raises
            ConnectorError naming the topic.

    Raises:
        KafkaException: from the client's metadata request; WatermarkError (a KafkaException
            naming topic and partition) from an offsets request (callers translate either with
            their own config).
    """
    md = consumer.list_topics(topic, timeout=timeout_s)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        if missing_ok:
            return {}
        raise ConnectorError(f"Kafka topic {topic!r} does not exist or has no partitions ({meta.error if meta else 'missing'})")
    marks = partition_watermarks(consumer, [(topic, p) for p in sorted(meta.partitions)], timeout_s)
    return {p: lh for (_t, p), lh in marks.items()}


class WatermarkError(KafkaException):
    """A watermark-offsets request of one partition failed: a KafkaException (so callers that
    translate client errors, e.g. with :func:`unavailable_error`, still see the KafkaError as
    ``args[0]``) whose message names the topic and partition.

    Attributes:
        topic, partition: the partition asked about.
        kafka_error: the client's KafkaError (or exception argument).
    """

    def __init__(self, topic: str, partition: int, cause: KafkaException) -> None:
        err = cause.args[0] if cause.args else cause
        super().__init__(err)
        self.topic = topic
        self.partition = partition
        self.kafka_error = err

    def __str__(self) -> str:
        text = self.kafka_error.str() if isinstance(self.kafka_error, KafkaError) else str(self.kafka_error)
        return f"cannot read the watermark offsets of Kafka topic {self.topic!r} partition {self.partition}: {text}"


def partition_watermarks(consumer: Consumer, partitions: Iterable[tuple[str, int]], timeout_s: float = 10.0, *,
                         cached: bool = False) -> dict[tuple[str, int], tuple[int, int]]:
    """The one watermark read of given partitions: ``(topic, partition) -> (low, high)`` in the
    order given (high: the next offset to be written; with a read_committed consumer the last
    stable offset), through ``Consumer.get_watermark_offsets``.

    Args:
        consumer: an open Consumer.
        partitions: ``(topic, partition)`` pairs.
        timeout_s: per partition request, seconds.
        cached: False (default): asked of the partition leader. True: the watermarks of the
            consumer's last fetch response for that partition (no broker round trip), asked of
            the leader only for a partition with no known high watermark yet (librdkafka gives a
            negative offset).

    Raises:
        WatermarkError: (a KafkaException) the request failed, naming topic and partition.
    """
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for topic, partition in partitions:
        tp = TopicPartition(topic, partition)
        try:
            marks = consumer.get_watermark_offsets(tp, cached=True) if cached else None
            if marks is None or marks[1] < 0:
                marks = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
        except KafkaException as exc:
            raise WatermarkError(topic, partition, exc) from exc
        out[(topic, partition)] = (int(marks[0]), int(marks[1]))
    return out


def partition_end_offsets(consumer: Consumer, partitions: Iterable[tuple[str, int]], timeout_s: float = 10.0, *,
                          cached: bool = False) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> end offset`` (high watermark) of given partitions: the high side
    of :func:`partition_watermarks` (same arguments, same WatermarkError)."""
    return {tp: high for tp, (_low, high) in partition_watermarks(consumer, partitions, timeout_s, cached=cached).items()}


def partition_lag(positions: Mapping[K, int], ends: Mapping[K, int]) -> dict[K, int]:
    """Offsets between a position (the next offset to read or absorb) and the end, per partition
    of ``ends`` (any key: ``(topic, partition)`` or ``"topic/partition"``); a partition not in
    ``positions`` counts from 0, a position past the end gives 0. Transaction markers count."""
    return {tp: max(0, end - positions.get(tp, 0)) for tp, end in ends.items()}


def lag_of(positions: Mapping[K, int], ends: Mapping[K, int]) -> int:
    """The one lag sum: :func:`partition_lag` summed over ``ends``' partitions, e.g.
    ``lag_of({"t/0": 5}, {"t/0": 7, "t/1": 3}) == 5``."""
    return sum(partition_lag(positions, ends).values())


def end_offsets(consumer_or_bootstrap: Consumer | str | Mapping[str, str], topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """The current end offset (high watermark: the next offset to be written) per partition.

    With a read_committed consumer (librdkafka's default) this is the last stable offset.
    Accepts an open Consumer or a bootstrap string / client config (a short-lived consumer
    is created and closed). Raises ConnectorError naming the topic (with a bootstrap string or
    config: KafkaUnavailableError when no broker answers within ``timeout_s``).
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
        consumer = Consumer(with_logger(conf))
    else:
        consumer = consumer_or_bootstrap  # type: ignore[assignment]
    try:
        return {p: high for p, (_low, high) in watermarks(consumer, topic, timeout_s, missing_ok=False).items()}
    except KafkaException as exc:
        unavailable = unavailable_error(exc, consumer_or_bootstrap, timeout_s) if own else None  # type: ignore[arg-type]
        if unavailable is not None:
            raise unavailable from exc
        raise ConnectorError(f"cannot read end offsets of Kafka topic {topic!r}: {exc}") from exc
    finally:
        if own:
            consumer.close()


class KafkaEndOffsets:
    """End (high-watermark) offsets of topics, through one reused consumer (closed by :meth:`close`).

    Args:
        properties: Kafka client properties (``bootstrap.servers`` ...), e.g. a pipeline block's
            ``properties.*`` options with the prefix removed.
    """

    def __init__(self, properties: Mapping[str, Any], timeout_s: float = 10.0) -> None:
        self._properties = dict(properties)
        self._timeout_s = timeout_s
        self._consumer: Any = None

    @classmethod
    def from_options(cls, options: Mapping[str, str], timeout_s: float = 10.0) -> "KafkaEndOffsets":
        """From a source or sink block's options (``properties.*``)."""
        return cls(client_properties(options), timeout_s)

    def end_offsets(self, topics: Iterable[str]) -> dict[str, int]:
        """``topic/partition`` -> end offset for each partition of ``topics`` (missing topics
        skipped), read with :func:`watermarks`."""
        if self._consumer is None:
            conf = dict(self._properties)
            conf.update({"group.id": "changelake-progress", "enable.auto.commit": False})
            conf.setdefault("log_level", 3)  # errors only: no client chatter in the run output
            self._consumer = Consumer(with_logger(conf))
        out: dict[str, int] = {}
        for topic in topics:
            marks = watermarks(self._consumer, topic, self._timeout_s)
            out.update({f"{topic}/{partition}": high for partition, (_low, high) in marks.items()})
        return out

    def close(self) -> None:
        """Close the consumer (idempotent)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
