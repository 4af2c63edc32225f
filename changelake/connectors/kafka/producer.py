"""One Kafka producer for the three Kafka sinks: delivery tracking, errors, flush, transactions.

:class:`KafkaProducer` wraps one confluent-kafka ``Producer`` (librdkafka) and is what the Kafka
pipeline sink (:mod:`changelake.connectors.kafka.sink`), the ``kafka`` table sink
(:mod:`changelake.connectors.kafka_table.sink`) and the upsert-kafka sinks
(:mod:`changelake.connectors.upsert_kafka.sink`) write with:

- :meth:`~KafkaProducer.produce` sends one record; a full local queue is served (``poll``) until
  ``queue_timeout_s`` passes, then :class:`SinkFlushError` names the topic;
- delivery reports are collected (thread-safe); :meth:`~KafkaProducer.raise_delivery_errors`
  raises the first failure as :class:`SinkFlushError` naming topic and partition and counting the
  others, as Flink's ``KafkaWriter`` rethrows an async send failure;
- :meth:`~KafkaProducer.flush` waits for every acknowledgement, then raises;
- with ``transactional.id`` in the config: :meth:`~KafkaProducer.open` calls
  ``init_transactions`` (fencing an older producer with that id and aborting its open
  transaction), then :meth:`~KafkaProducer.begin`, :meth:`~KafkaProducer.send_offsets`,
  :meth:`~KafkaProducer.commit` (aborts first when the failure needs it; a fenced producer is
  named as such) and :meth:`~KafkaProducer.abort`;
- every record sent and every failure updates a :class:`~changelake.connectors.metrics.SinkMetrics`.

Example::

    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:9092", "transactional.id": "tx-0"})
    producer.open(timeout_s=30)
    producer.begin()
    producer.produce("orders", b'{"id":1}', b'{"id":1,"v":"a"}')
    producer.commit(timeout_s=30)           # visible to read_committed readers now
    producer.close()
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Mapping, Sequence, cast

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from changelake.connectors.errors import ConnectorError, SinkFlushError
from changelake.connectors.kafka_common import client_logger, require_broker, with_logger
from changelake.connectors.metrics import SinkMetrics

__all__ = ["KafkaProducer", "PRODUCER_ONLY_KEYS", "admin_config"]

log = logging.getLogger(__name__)

#: Prefixes of librdkafka keys that only a producer understands (left out of AdminClient/Consumer
#: configs, which would warn about or refuse them).
PRODUCER_ONLY_KEYS = (
    "acks", "request.required.acks", "enable.idempotence", "linger", "batch", "compression", "partitioner",
    "transaction", "retries", "max.in.flight", "delivery.timeout", "message.timeout", "queue.buffering",
)

#: Delivery reports of records an abort discarded on purpose (not failures).
_PURGED_CODES = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})

#: Error codes meaning another producer with the same transactional.id took over.
_FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})


def admin_config(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` without the producer-only keys (:data:`PRODUCER_ONLY_KEYS` prefixes) and callbacks of
    the producer, for an AdminClient or Consumer of the same cluster."""
    return {k: v for k, v in conf.items() if not k.startswith(PRODUCER_ONLY_KEYS) and k != "error_cb"}


class KafkaProducer:
    """A confluent-kafka Producer with delivery tracking, error raising, flush and transactions.

    Args:
        conf: librdkafka producer config (``bootstrap.servers``, ``acks``, ``transactional.id``...);
            may hold secrets (``sasl.password``) and is never put into a message.
        client: an already open Producer to adopt (e.g. one transactional producer shared by two
            sinks so both write in one transaction); then :meth:`open` does not create one and
            :meth:`close` leaves it open. Delivery reports of records sent through this wrapper
            still come back here.
        metrics: a :class:`SinkMetrics` to update (numRecordsOut, numBytesOut, errors, send time);
            a new one when None.
        queue_timeout_s: how long :meth:`produce` serves a full local queue before failing, seconds
            (default 30).

    The constructor does no I/O. Not thread-safe except for the delivery callback (librdkafka may
    call it from ``flush`` on any thread that polls).
    """

    def __init__(self, conf: Mapping[str, Any], *, client: Producer | None = None,
                 metrics: SinkMetrics | None = None, queue_timeout_s: float = 30.0) -> None:
        self.conf = dict(conf)
        self.metrics = metrics or SinkMetrics()
        self.queue_timeout_s = queue_timeout_s
        self._adopted = client is not None
        self._client: Producer | None = client
        self._errors: list[tuple[str | None, int | None, KafkaError]] = []
        self._lock = threading.Lock()
        self._in_transaction = False
        self._topics: set[str] = set()  # topics written to since the last flush/commit (for messages)
        #: records sent / tombstones sent since creation
        self.records_sent = 0
        self.tombstones_sent = 0

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def transactional_id(self) -> str | None:
        """The ``transactional.id`` of the config, or None (no transactions)."""
        tid = self.conf.get("transactional.id")
        return None if tid is None else str(tid)

    @property
    def is_open(self) -> bool:
        return self._client is not None

    @property
    def client(self) -> Producer:
        """The underlying confluent-kafka Producer. Raises ConnectorError before :meth:`open`."""
        if self._client is None:
            raise ConnectorError("the Kafka producer is not open; call open() first")
        return self._client

    def open(self, timeout_s: float = 30.0, *, check_broker: bool = False) -> None:
        """Create the Producer (unless one was adopted); with ``transactional.id`` call
        ``init_transactions`` (fences an older producer with that id and aborts its open
        transaction). Idempotent.

        Args:
            timeout_s: how long to wait for a broker (check and ``init_transactions``), seconds.
            check_broker: first wait for a broker to answer a metadata request (transactional
                producers always do).

        Raises:
            KafkaUnavailableError: no broker answered within ``timeout_s`` (names bootstrap.servers).
            SinkFlushError: ``init_transactions`` failed (names the transactional.id).
        """
        if self._client is not None:
            return
        conf = dict(self.conf)
        conf.setdefault("error_cb", _log_client_error)
        client = Producer(with_logger(conf))
        if check_broker or self.transactional_id is not None:
            require_broker(client, self.conf, timeout_s)
        if self.transactional_id is not None:
            try:
                client.init_transactions(timeout_s)
            except KafkaException as exc:
                raise SinkFlushError(
                    f"cannot initialise transactions for transactional.id {self.transactional_id!r}: {exc}"
                ) from exc
        self._client = client

    def close(self, timeout_s: float = 30.0) -> int:
        """Abort an open transaction, else deliver what is queued (up to ``timeout_s`` seconds);
        then release the Producer (an adopted one stays open). Idempotent; never raises (failures,
        e.g. of a producer fenced by a newer instance, are logged).

        Returns:
            The number of records still undelivered (0 after an abort).
        """
        client, self._client = self._client, None
        if client is None:
            return 0
        left = 0
        try:
            if self._in_transaction:
                try:
                    client.abort_transaction(timeout_s)
                except KafkaException as exc:
                    log.warning("abort of the open transaction of %r failed on close: %s", self.transactional_id, exc)
            elif not self._adopted:
                try:
                    left = client.flush(timeout_s)
                except (KafkaException, SystemError) as exc:  # a fatal producer (fenced): nothing more can be sent
                    # SystemError: confluent-kafka can surface an error left set by an earlier callback of a
                    # fatal (fenced) producer as "_on_delivery returned a result with an exception set"
                    log.warning("flush on close of the Kafka producer failed: %s", exc)
                if left:
                    log.warning("%d record(s) still undelivered when closing the Kafka producer", left)
        finally:
            self._in_transaction = False
            self.clear_errors()
        return int(left)

    # -- sending ---------------------------------------------------------------------------------
    def produce(self, topic: str, key: bytes | None, value: bytes | None, *, partition: int | None = None,
                headers: Sequence[tuple[str, bytes]] | None = None, timestamp_ms: int | None = None) -> None:
        """Send one record (asynchronously; :meth:`flush` or :meth:`commit` wait for it).

        ``value`` None is a tombstone. ``partition`` None lets the configured partitioner choose.

        Raises:
            SinkFlushError: the local queue stayed full for ``queue_timeout_s`` seconds, or the
                client refused the record (both name the topic).
        """
        client = self.client
        kwargs: dict[str, Any] = {"on_delivery": self._on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = list(headers)
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        deadline: float | None = None
        while True:
            try:
                client.produce(topic, value, key, **kwargs)
                break
            except BufferError:
                now = time.monotonic()
                deadline = deadline if deadline is not None else now + self.queue_timeout_s
                if now > deadline:
                    raise SinkFlushError(
                        f"the local producer queue for topic {topic!r} stayed full for {self.queue_timeout_s:g} s",
                        topic=topic,
                    ) from None
                client.poll(0.1)  # serve delivery reports, which frees queue space
            except KafkaException as exc:
                raise SinkFlushError(f"cannot produce to topic {topic!r}: {exc}{_too_large_hint(exc.args[0], value)}",
                                     topic=topic) from exc
        self.records_sent += 1
        self._topics.add(topic)
        if value is None:
            self.tombstones_sent += 1
        self.metrics.record_out(1, len(key or b"") + len(value or b""))

    def produce_many(self, records: Sequence[tuple[str, bytes | None, bytes | None, int | None,
                                                   list[tuple[str, bytes]] | None]]) -> None:
        """:meth:`produce` for each of ``records``, in order, with one Python loop instead of one
        call (and one metrics update) per record: ``(topic, key, value, partition or None,
        headers or None)``, value None a tombstone, partition None for the configured partitioner.
        The records may go to several topics (each is produced with librdkafka's ``produce``,
        unlike :meth:`produce_batch`, which takes one topic and no headers).

        Raises:
            SinkFlushError: as :meth:`produce` (the records before the failing one are queued).
        """
        produce = self.client.produce
        on_delivery = self._on_delivery
        topics = self._topics
        sent_bytes = tombstones = 0
        for topic, key, value, partition, headers in records:
            try:
                # -1 is librdkafka's RD_KAFKA_PARTITION_UA, the client's own default (the partitioner)
                produce(topic, value, key, partition=-1 if partition is None else partition,
                        on_delivery=on_delivery, headers=cast(Any, headers) or None)
            except BufferError:  # the local queue is full: serve delivery reports until there is room
                deadline: float | None = None
                while True:
                    deadline = self._wait_for_queue(topic, deadline)
                    try:
                        produce(topic, value, key, partition=-1 if partition is None else partition,
                                on_delivery=on_delivery, headers=cast(Any, headers) or None)
                        break
                    except BufferError:
                        continue
                    except KafkaException as exc:
                        hint = _too_large_hint(exc.args[0], value)
                        raise SinkFlushError(f"cannot produce to topic {topic!r}: {exc}{hint}", topic=topic) from exc
            except KafkaException as exc:
                raise SinkFlushError(f"cannot produce to topic {topic!r}: {exc}{_too_large_hint(exc.args[0], value)}",
                                     topic=topic) from exc
            if value is None:
                tombstones += 1
                sent_bytes += len(key or b"")
            else:
                sent_bytes += len(key or b"") + len(value)
            topics.add(topic)
        self.records_sent += len(records)
        self.tombstones_sent += tombstones
        if records:
            self.metrics.record_out(len(records), sent_bytes)

    def produce_batch(self, topic: str, records: Sequence[tuple[bytes | None, bytes | None, int | None]],
                      *, max_queued: int = 100_000) -> None:
        """Send many records in order with one client call per chunk (librdkafka's
        ``produce_batch``; the configured partitioner places each record): ``records`` are
        ``(key, value, timestamp ms or None)``, value None a tombstone.

        Order per partition is that of ``records``: before each chunk the call waits (serving
        delivery reports) until the local queue has room for the whole chunk, given
        ``max_queued`` = the client's ``queue.buffering.max.messages``; a chunk refused in part
        is retried only when the refused records are its tail (nothing after them was queued),
        else it fails rather than reorder.

        Raises:
            SinkFlushError: the queue stayed full for ``queue_timeout_s`` seconds, or the client
                refused records (both name the topic).
        """
        client = self.client
        chunk_size = max(1, min(10_000, max_queued // 2))
        on_delivery = self._on_delivery
        sent_bytes = tombstones = 0
        for start in range(0, len(records), chunk_size):
            chunk = records[start:start + chunk_size]
            msgs: list[dict[str, Any]] = [
                {"key": k, "value": v} if ts is None else {"key": k, "value": v, "timestamp": ts} for k, v, ts in chunk
            ]
            deadline: float | None = None
            pending = msgs
            while pending:
                while len(client) + len(pending) > max_queued:
                    deadline = self._wait_for_queue(topic, deadline)
                try:
                    queued = client.produce_batch(topic, pending, on_delivery=on_delivery)
                except BufferError:
                    deadline = self._wait_for_queue(topic, deadline)
                    continue
                except KafkaException as exc:
                    raise SinkFlushError(f"cannot produce to topic {topic!r}: {exc}", topic=topic) from exc
                if queued == len(pending):
                    break
                failed = [i for i, m in enumerate(pending) if "_error" in m]
                tail = failed == list(range(len(pending) - len(failed), len(pending)))
                if not tail or any(not _queue_full(m["_error"]) for m in (pending[i] for i in failed)):
                    first = pending[failed[0]]["_error"]
                    hint = _too_large_hint(first, pending[failed[0]].get("value"))
                    raise SinkFlushError(
                        f"cannot produce {len(failed)} of {len(pending)} records to topic {topic!r} in order: {first}{hint}",
                        topic=topic,
                    )
                pending = pending[failed[0]:]
                for m in pending:
                    del m["_error"]
                deadline = self._wait_for_queue(topic, deadline)
            for k, v, _ts in chunk:
                if v is None:
                    tombstones += 1
                    sent_bytes += len(k or b"")
                else:
                    sent_bytes += len(k or b"") + len(v)
        self.records_sent += len(records)
        self.tombstones_sent += tombstones
        if records:
            self._topics.add(topic)
            self.metrics.record_out(len(records), sent_bytes)

    def _wait_for_queue(self, topic: str, deadline: float | None) -> float:
        """Serve delivery reports for up to 0.1 s while the local queue is full; the deadline."""
        now = time.monotonic()
        deadline = deadline if deadline is not None else now + self.queue_timeout_s
        if now > deadline:
            raise SinkFlushError(
                f"the local producer queue for topic {topic!r} stayed full for {self.queue_timeout_s:g} s", topic=topic
            )
        self.client.poll(0.1)
        return deadline

    def poll(self, timeout_s: float = 0.0) -> None:
        """Serve delivery reports and client logs (non-blocking by default)."""
        self.client.poll(timeout_s)

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is None or err.code() in _PURGED_CODES:  # purged by an abort: discarded, not failed
            return
        self.metrics.record_error()
        topic = msg.topic() if msg is not None else None
        partition = msg.partition() if msg is not None else None
        with self._lock:
            self._errors.append((topic, partition, err))

    # -- errors ----------------------------------------------------------------------------------
    def clear_errors(self) -> None:
        """Forget collected delivery failures (after an abort: those records are discarded anyway)."""
        with self._lock:
            self._errors.clear()

    def raise_delivery_errors(self) -> None:
        """Raise the collected delivery failures, if any, and forget them.

        Raises:
            SinkFlushError: "delivery to topic '<t>' partition <p> failed: <librdkafka error>
                (and <n> more failed records)"; ``topic``, ``partition`` and ``failed`` are set.
        """
        with self._lock:
            errors, self._errors = self._errors, []
        if not errors:
            return
        topic, partition, err = errors[0]
        more = f" (and {len(errors) - 1} more failed records)" if len(errors) > 1 else ""
        raise SinkFlushError(
            f"delivery to topic {topic!r} partition {partition} failed: {err.str()}{_too_large_hint(err, None)}{more}",
            topic=topic, partition=partition, failed=len(errors),
        )

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until every record sent is acknowledged, then raise any delivery failure.

        Raises:
            SinkFlushError: a record failed (see :meth:`raise_delivery_errors`), or records are still
                unacknowledged after ``timeout_s`` seconds.
        """
        start = time.monotonic()
        remaining = self.client.flush(timeout_s)
        self.metrics.record_send_time((time.monotonic() - start) * 1000.0)
        self.raise_delivery_errors()
        topics, self._topics = sorted(self._topics), set()
        if remaining:
            raise SinkFlushError(
                f"{remaining} record(s) to topic(s) {', '.join(map(repr, topics)) or '?'} not acknowledged "
                f"within {timeout_s:g} s",
                topic=topics[0] if len(topics) == 1 else None,
            )

    # -- transactions ----------------------------------------------------------------------------
    @property
    def in_transaction(self) -> bool:
        """True between :meth:`begin` and :meth:`commit` / :meth:`abort`."""
        return self._in_transaction

    def _require_transactional(self, what: str) -> None:
        if self.transactional_id is None:
            raise ConnectorError(f"{what} needs a transactional producer (no transactional.id configured)")

    def begin(self) -> None:
        """Begin a transaction (a no-op when one is open).

        Raises:
            ConnectorError: the producer has no ``transactional.id``.
            SinkFlushError: the broker refused (names the transactional.id).
        """
        self._require_transactional("begin()")
        if self._in_transaction:
            return
        try:
            self.client.begin_transaction()
        except KafkaException as exc:
            raise SinkFlushError(f"cannot begin a transaction for {self.transactional_id!r}: {exc}") from exc
        self._in_transaction = True

    def send_offsets(self, offsets: Sequence[TopicPartition], group_metadata: Any, timeout_s: float = 30.0) -> None:
        """Add consumed offsets (the next offsets to read) to the open transaction, so they commit
        atomically with its records (consume-transform-produce).

        Raises:
            ConnectorError: no ``group_metadata`` (the consumer's ``consumer_group_metadata()``).
            KafkaException: as the client raises it (:meth:`commit` turns it into SinkFlushError).
        """
        if group_metadata is None:
            raise ConnectorError("sending offsets to a transaction needs the consumer's group_metadata")
        self.client.send_offsets_to_transaction(list(offsets), group_metadata, timeout_s)

    def commit(self, timeout_s: float = 30.0, *, offsets: Sequence[TopicPartition] | None = None,
               group_metadata: Any = None) -> None:
        """Commit the open transaction (begun here when none is open), with ``offsets`` of a
        consumer group when given; then raise any delivery failure reported meanwhile.

        On failure the transaction is aborted (its records never become visible to read_committed
        readers) and SinkFlushError is raised; when another producer with the same
        ``transactional.id`` fenced this one, the message says so and this producer must not be
        used again.

        Raises:
            SinkFlushError: see above (names the transactional.id).
        """
        self._require_transactional("commit()")
        if not self._in_transaction:
            self.begin()
        client = self.client
        start = time.monotonic()
        try:
            if offsets:
                self.send_offsets(offsets, group_metadata, timeout_s)
            client.commit_transaction(timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            fenced = isinstance(err, KafkaError) and err.code() in _FENCED_CODES
            self._abort_quietly(timeout_s)
            hint = (
                "; another producer with the same transactional.id has taken over and this one must stop "
                "(its open transaction was aborted)" if fenced else "; the transaction was aborted"
            )
            raise SinkFlushError(
                f"commit of the transaction of {self.transactional_id!r} failed: {exc}{hint}"
            ) from exc
        finally:
            self._in_transaction = False
            self._topics.clear()
        self.metrics.record_send_time((time.monotonic() - start) * 1000.0)
        self.raise_delivery_errors()

    def abort(self, timeout_s: float = 30.0) -> None:
        """Abort the open transaction (a no-op without one): none of its records become visible
        to read_committed readers; collected delivery failures are dropped with them.

        Raises:
            SinkFlushError: the abort itself failed (names the transactional.id).
        """
        self.clear_errors()
        if not self._in_transaction:
            return
        try:
            self.client.abort_transaction(timeout_s)
        except KafkaException as exc:
            raise SinkFlushError(f"cannot abort the transaction of {self.transactional_id!r}: {exc}") from exc
        finally:
            self._in_transaction = False
            self._topics.clear()
            self.clear_errors()  # reports served during the abort belong to the discarded records

    def _abort_quietly(self, timeout_s: float) -> None:
        self.clear_errors()
        try:
            self.client.abort_transaction(timeout_s)
        except KafkaException as exc:  # fatal (fenced): the producer must be recreated
            log.warning("abort of the transaction of %r failed: %s", self.transactional_id, exc)
        self._in_transaction = False
        self.clear_errors()


def _queue_full(err: Any) -> bool:
    """True for librdkafka's local "queue full" refusal (retry after serving delivery reports)."""
    code = err.code() if hasattr(err, "code") else None
    return code == KafkaError._QUEUE_FULL or "queue full" in str(err).lower()


def _log_client_error(err: KafkaError) -> None:
    # to the client logger, whose filter keeps a broker outage from repeating this every second
    client_logger().warning("kafka client error: %s", err)


def _too_large_hint(err: Any, value: bytes | None) -> str:
    """What to change when ``err`` is librdkafka's / the broker's MSG_SIZE_TOO_LARGE, else ``""``:
    the producer's ``message.max.bytes`` (librdkafka, default 1000000; set through the sink's
    ``properties.message.max.bytes``) and the topic's ``max.message.bytes`` (broker default
    1048588) both bound one record (a 4 MB BLOB row is refused by both)."""
    if not isinstance(err, KafkaError) or err.code() != KafkaError.MSG_SIZE_TOO_LARGE:
        return ""
    size = f"the record's value is {len(value)} bytes; " if value is not None else ""
    return (f" ({size}raise the sink's 'properties.message.max.bytes' (librdkafka's limit, default 1000000) and "
            "the topic's 'max.message.bytes' (broker default 1048588) above the largest row, then run again)")
