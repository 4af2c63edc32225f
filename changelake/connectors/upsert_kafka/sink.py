"""UpsertKafkaSink: write an upsert changelog to a keyed (compacted) Kafka topic.

Semantics are Flink's upsert-kafka sink (``DynamicKafkaRecordSerializationSchema``,
``KafkaDynamicSink``, ``ReducingUpsertWriter``) and the Alibaba page (the seed):

* ``+I`` / ``+U`` -> a record whose key is the PRIMARY KEY row in ``key.format`` and whose value is
  the value row in ``value.format``, encoded with its kind forced to INSERT;
* ``-D`` -> a tombstone (null value) for the key;
* ``-U`` -> dropped (the sink declares {+I, +U, -D}; Flink's planner removes -U before it);
* partition = Kafka's default for keyed records, murmur2 of the key bytes
  (``partitioner=murmur2_random`` in librdkafka, see :mod:`.partitioner`);
* with both ``sink.buffer-flush.*`` options > 0, records go through a :class:`ReducingBuffer`
  (one pending record per key, first-seen order) that flushes on size, on a timer thread, before
  every transaction commit and on close.

Delivery (``sink.delivery-guarantee``): ``none`` never waits; ``at-least-once`` makes
:meth:`UpsertKafkaSink.flush` wait for every acknowledgement and raise SinkFlushError naming the
topic and partition of a failed record; ``exactly-once`` uses one transactional producer
(``transactional.id = <prefix>-<subtask>``; ``init_transactions`` at open fences a previous
instance with the same id and aborts its open transaction) and explicit
``begin_transaction`` / ``commit_transaction`` / ``abort_transaction``.

Example::

    sink = create_sink(parse_create_table(ddl))
    with sink:                      # open() ... close()
        for row in changelog:
            sink.write(row)
        sink.flush()
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from confluent_kafka import Producer, TopicPartition

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import UPSERT, RowKind
from changelake.changelog.schema import Schema
from changelake.connectors.errors import ConnectorError, SinkFlushError
from changelake.connectors.kafka.sink import KafkaProducer, admin_config
from changelake.connectors.kafka_common import ensure_topics
from changelake.connectors.metrics import SinkMetrics
from changelake.connectors.upsert_kafka import formats_bridge
from changelake.connectors.upsert_kafka.buffer import ReducingBuffer
from changelake.connectors.upsert_kafka.layout import RowLayout
from changelake.connectors.upsert_kafka.options import DeliveryGuarantee, UpsertKafkaOptions
from changelake.connectors.upsert_kafka.partitioner import LIBRDKAFKA_PARTITIONER

__all__ = ["UpsertKafkaSink", "KafkaRecord"]

log = logging.getLogger(__name__)

#: Topic config of topics the sink creates (an upsert topic keeps the last record per key).
COMPACT_TOPIC_CONFIG = {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class KafkaRecord:
    """One record to produce: topic, key bytes, value bytes (None = tombstone), timestamp (ms)."""

    topic: str
    key: bytes
    value: bytes | None
    timestamp_ms: int | None = None


class UpsertKafkaSink:
    """Writes +I/+U as keyed records and -D as tombstones (see module docstring).

    Args:
        options: validated options (:func:`~changelake.connectors.upsert_kafka.factory.validate_options`).
        schema: the table schema; its primary key is the message key.
        create_topics: create missing topics at :meth:`open` with ``cleanup.policy=compact``
            (only for ``topic``, not ``topic-pattern``). Default True.
        topic_partitions: partition count of created topics; -1 uses the broker default.
        subtask_index: this writer's index; part of ``transactional.id`` (default 0).
        flush_timeout_s: how long :meth:`flush` / commit wait for acknowledgements, seconds (30).
        metrics: a :class:`SinkMetrics` to update (a new one when None).

    ``changelog_mode`` is UPSERT ({+I, +U, -D}). Constructor stores config only; :meth:`open`
    connects. :meth:`close` is idempotent.
    """

    changelog_mode: frozenset[RowKind] = UPSERT

    def __init__(
        self,
        options: UpsertKafkaOptions,
        schema: Schema,
        *,
        create_topics: bool = True,
        topic_partitions: int = -1,
        subtask_index: int = 0,
        flush_timeout_s: float = 30.0,
        metrics: SinkMetrics | None = None,
    ) -> None:
        self.options = options
        self.schema = schema
        self.layout = RowLayout(schema, options)
        self.create_topics = create_topics
        self.topic_partitions = topic_partitions
        self.subtask_index = subtask_index
        self.flush_timeout_s = flush_timeout_s
        self.metrics = metrics or SinkMetrics()
        self._pattern = re.compile(options.topic_pattern) if options.topic_pattern else None
        self._producer: KafkaProducer | None = None
        self._key_format: Any = None
        self._value_format: Any = None
        self._encode_key: Callable[[ChangelogRow], bytes | None] | None = None
        self._encode_value: Callable[[ChangelogRow], bytes | None] | None = None
        self._key_many: Callable[[list[ChangelogRow]], list[bytes | None]] | None = None
        self._value_many: Callable[[list[ChangelogRow]], list[bytes | None]] | None = None
        self._buffer: ReducingBuffer[KafkaRecord] | None = None
        self._timer: threading.Thread | None = None
        self._timer_stop = threading.Event()
        self._timer_error: BaseException | None = None
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def guarantee(self) -> DeliveryGuarantee:
        return self.options.sink_delivery_guarantee

    @property
    def transactional_id(self) -> str | None:
        """``<sink.transactional-id-prefix>-<subtask_index>`` with exactly-once, else None."""
        if self.guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
            return None
        return f"{self.options.sink_transactional_id_prefix}-{self.subtask_index}"

    def producer_config(self) -> dict[str, Any]:
        """The librdkafka producer config: ``properties.*`` (prefix stripped) plus
        ``partitioner=murmur2_random`` (unless set), idempotence (unless set; needed for
        per-key order under retries), and with exactly-once ``transactional.id`` and
        ``transaction.timeout.ms``."""
        conf: dict[str, Any] = dict(self.options.properties)
        conf["bootstrap.servers"] = self.options.bootstrap_servers
        conf.setdefault("partitioner", LIBRDKAFKA_PARTITIONER)
        if self.guarantee is not DeliveryGuarantee.NONE:
            conf.setdefault("enable.idempotence", "true")
        # only failed records need a delivery report (success is seen by flush/commit): no
        # Python callback per acknowledged record
        only_errors = conf.get("delivery.report.only.error", True)  # a client (Python) setting: a bool
        conf["delivery.report.only.error"] = (
            only_errors if isinstance(only_errors, bool) else str(only_errors).strip().lower() == "true"
        )
        if self.guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            conf["transactional.id"] = self.transactional_id
            conf["transaction.timeout.ms"] = self.options.transaction_timeout_ms
        return conf

    def build_formats(self) -> None:
        """Build the key and value formats (no I/O); :meth:`open` calls it. Lets
        :meth:`to_record` serialize rows without a broker."""
        if self._key_format is None:
            self._key_format = formats_bridge.create_format(
                self.options.key_format, self.layout.key_schema, self.options.key_format_options
            )
            self._value_format = formats_bridge.create_format(
                self.options.value_format, self.layout.value_schema, self.options.value_format_options
            )
            self._encode_key, self._encode_value = self._row_encoders()
            self._key_many, self._value_many = self._batch_encoders()

    def _row_encoders(self) -> tuple[Callable[[ChangelogRow], bytes | None], Callable[[ChangelogRow], bytes | None]]:
        """(key encoder, value encoder) of a table row. A format with ``encode_values(values)``
        (json) encodes the columns of its schema straight from the table row (it ignores other
        keys), which gives the bytes ``encode`` gives for the projected key or value row."""
        layout = self.layout
        key_fmt, value_fmt = self._key_format, self._value_format
        key_direct = getattr(key_fmt, "encode_values", None)
        value_direct = getattr(value_fmt, "encode_values", None)

        if key_direct is not None and not layout.prefix:
            def encode_key(row: ChangelogRow) -> bytes | None:
                return key_direct(row.values)  # type: ignore[no-any-return]
        elif key_direct is not None:
            def encode_key(row: ChangelogRow) -> bytes | None:
                return key_direct(layout.key_values(row.values))  # type: ignore[no-any-return]
        else:
            def encode_key(row: ChangelogRow) -> bytes | None:
                return key_fmt.encode(ChangelogRow(RowKind.INSERT, layout.key_values(row.values), row.table))  # type: ignore[no-any-return]

        if value_direct is not None:
            def encode_value(row: ChangelogRow) -> bytes | None:
                return value_direct(row.values)  # type: ignore[no-any-return]
        else:
            def encode_value(row: ChangelogRow) -> bytes | None:
                return value_fmt.encode(ChangelogRow(RowKind.INSERT, layout.value_values(row.values), row.table))  # type: ignore[no-any-return]

        return encode_key, encode_value

    def _batch_encoders(
        self,
    ) -> tuple[Callable[[list[ChangelogRow]], list[bytes | None]] | None, Callable[[list[ChangelogRow]], list[bytes | None]] | None]:
        """(key, value) encoders of a batch of table rows: the formats' ``encode_values_many``
        (json) on the same inputs as the row encoders' direct path, else the row encoders mapped
        over the batch. Both None when the key format has no batch encoder (the per-row path is
        as fast)."""
        layout = self.layout
        key_many = getattr(self._key_format, "encode_values_many", None)
        value_many = getattr(self._value_format, "encode_values_many", None)
        encode_key, encode_value = self._encode_key, self._encode_value
        assert encode_key is not None and encode_value is not None
        if key_many is None and value_many is None:
            return None, None

        def keys(rows: list[ChangelogRow]) -> list[bytes | None]:
            if key_many is None:
                return [encode_key(r) for r in rows]
            if not layout.prefix:
                return key_many([r.values for r in rows])  # type: ignore[no-any-return]
            return key_many([layout.key_values(r.values) for r in rows])  # type: ignore[no-any-return]

        def values(rows: list[ChangelogRow]) -> list[bytes | None]:
            if value_many is None:
                return [encode_value(r) for r in rows]
            return value_many([r.values for r in rows])  # type: ignore[no-any-return]

        return keys, values

    @property
    def _max_queued(self) -> int:
        """The producer's ``queue.buffering.max.messages`` (librdkafka's default 100000)."""
        return int(self.options.properties.get("queue.buffering.max.messages", 100_000))

    def open(self) -> "UpsertKafkaSink":
        """Build the formats, create missing topics (compacted), start the producer (and with
        exactly-once ``init_transactions``, fencing an older producer with the same id).
        Raises KafkaUnavailableError when no broker answers (topic creation: within 30 s;
        exactly-once: within ``flush_timeout_s``), ConnectorError / SinkFlushError on other Kafka
        failures."""
        if self._producer is not None:
            return self
        self.build_formats()
        conf = self.producer_config()
        if self.create_topics and self.options.topics:
            ensure_topics(admin_config(conf), self.options.topics, self.topic_partitions, COMPACT_TOPIC_CONFIG)
        producer = KafkaProducer(conf, metrics=self.metrics, queue_timeout_s=self.flush_timeout_s)
        producer.open(self.flush_timeout_s)
        self._producer = producer
        if self.options.buffering_enabled:
            self._buffer = ReducingBuffer(
                self._emit_buffered, self.options.sink_buffer_flush_max_rows, self.options.buffer_flush_interval_ms,
                emit_batch=self._emit_buffered_batch,
            )
            self._timer_stop.clear()
            self._timer = threading.Thread(target=self._timer_loop, name="upsert-kafka-buffer-flush", daemon=True)
            self._timer.start()
        self._closed = False
        return self

    def __enter__(self) -> "UpsertKafkaSink":
        return self.open()

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None and self.guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
            self.flush()
        self.close()

    @property
    def producer(self) -> Producer:
        """The underlying confluent-kafka Producer (after :meth:`open`)."""
        return self._kafka.client

    @property
    def _kafka(self) -> KafkaProducer:
        if self._producer is None:
            raise ConnectorError("the upsert-kafka sink is not open; call open() first")
        return self._producer

    def close(self) -> None:
        """Stop the flush timer; with at-least-once/none flush pending records; with exactly-once
        abort an open (uncommitted) transaction; release the producer. Idempotent."""
        if self._closed or self._producer is None:
            self._closed = True
            return
        self._closed = True
        self._timer_stop.set()
        if self._timer is not None:
            self._timer.join(timeout=5)
            self._timer = None
        try:
            if self._producer.in_transaction:
                log.warning("closing exactly-once sink %s with an open transaction: aborting it", self.transactional_id)
            elif self._buffer is not None and self.guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
                self._buffer.flush()
            self._producer.close(self.flush_timeout_s)  # aborts an open transaction, else flushes
        finally:
            self._producer = None

    # -- writing ------------------------------------------------------------------------------------
    def topic_for(self, row: ChangelogRow) -> str:
        """The topic of a row: the single ``topic``, else ``row.metadata['topic']``, which must be in
        the topic list or match ``topic-pattern``. Raises ConnectorError (Flink's message)."""
        if len(self.options.topics) == 1:
            return self.options.topics[0]
        topic = row.metadata.get("topic") if row.metadata else None
        if self._pattern is not None:
            if isinstance(topic, str) and self._pattern.fullmatch(topic):
                return topic
            expected = f"topic to match the pattern '{self.options.topic_pattern}'"
        else:
            if topic in self.options.topics:
                return str(topic)
            expected = f"topic to be in: {list(self.options.topics)}"
        raise ConnectorError(
            f"The topic of the sink record is not valid. Expected {expected} but was: {topic!r}. "
            "Set row.metadata['topic'] when the sink has several topics or a topic pattern."
        )

    def to_record(self, row: ChangelogRow) -> KafkaRecord | None:
        """Serialize one row; None for -U (dropped). Raises EncodeError from the formats."""
        parts = self._serialize(row)
        return None if parts is None else KafkaRecord(*parts)

    def _serialize(self, row: ChangelogRow) -> tuple[str, bytes, bytes | None, int | None] | None:
        """(topic, key, value, timestamp ms) of a row, as :meth:`to_record`; None for -U."""
        kind = row.kind
        if kind is RowKind.UPDATE_BEFORE:
            return None
        encode_key, encode_value = self._encode_key, self._encode_value
        if encode_key is None or encode_value is None:
            raise ConnectorError("the upsert-kafka sink is not open; call open() first")
        topic = self.options.topics[0] if len(self.options.topics) == 1 else self.topic_for(row)
        key = encode_key(row)
        if key is None:
            raise ConnectorError(
                f"key format '{self.options.key_format}' wrote no bytes for key {self.layout.key_values(row.values)} "
                f"(topic {topic!r}); upsert-kafka records need a non-null key"
            )
        value = None if kind is RowKind.DELETE else encode_value(row)
        metadata = row.metadata
        ts = metadata.get("timestamp") if metadata else None
        return topic, key, value, int(ts) if isinstance(ts, (int, float)) else None

    def to_records(self, rows: Sequence[ChangelogRow]) -> list[KafkaRecord]:
        """:meth:`to_record` of each row (``-U`` left out), encoded as one batch where the formats
        can: the same records in the same order. Needs a single ``topic`` (else row by row).
        Raises EncodeError / ConnectorError as :meth:`to_record`."""
        if len(self.options.topics) != 1 or self._key_many is None:
            return [r for r in map(self.to_record, rows) if r is not None]
        topic = self.options.topics[0]
        return [KafkaRecord(topic, k, v, ts) for k, v, ts in self._serialize_many(rows)]  # type: ignore[arg-type]

    def _serialize_many(self, rows: Sequence[ChangelogRow]) -> list[tuple[bytes | None, bytes | None, int | None]]:
        """(key, value, timestamp ms) of each row but ``-U``, batch-encoded; single topic only."""
        key_many, value_many = self._key_many, self._value_many
        if key_many is None or value_many is None:
            raise ConnectorError("the upsert-kafka sink is not open; call open() first")
        kept = [r for r in rows if r.kind is not RowKind.UPDATE_BEFORE]
        if not kept:
            return []
        keys = key_many(kept)
        if None in keys:
            row = kept[keys.index(None)]
            raise ConnectorError(
                f"key format '{self.options.key_format}' wrote no bytes for key {self.layout.key_values(row.values)} "
                f"(topic {self.options.topics[0]!r}); upsert-kafka records need a non-null key"
            )
        delete = RowKind.DELETE
        if any(r.kind is delete for r in kept):
            live = [r for r in kept if r.kind is not delete]
            live_values = iter(value_many(live) if live else [])
            values = [None if r.kind is delete else next(live_values) for r in kept]
        else:
            values = value_many(kept)
        if not any(r.metadata for r in kept):
            return list(zip(keys, values, [None] * len(kept)))
        stamps: list[int | None] = []
        for r in kept:
            ts = r.metadata.get("timestamp") if r.metadata else None
            stamps.append(int(ts) if isinstance(ts, (int, float)) else None)
        return list(zip(keys, values, stamps))

    def write(self, row: ChangelogRow) -> None:
        """Write one changelog row (see module docstring). With exactly-once, a transaction is
        begun first if none is open. Raises SinkFlushError for an earlier failure of the flush
        timer, ConnectorError/EncodeError for a row that cannot be written."""
        if self._timer_error is not None:
            self._raise_timer_error()
        parts = self._serialize(row)
        if parts is None:
            return
        if self.guarantee is DeliveryGuarantee.EXACTLY_ONCE and not self.in_transaction:
            self.begin_transaction()
        if self._buffer is not None:
            record = KafkaRecord(*parts)
            self._buffer.add((record.topic, record.key), row.kind, record)
        else:
            self._produce_parts(*parts)

    def write_all(self, rows: Iterable[ChangelogRow]) -> int:
        """Write every row, as :meth:`write` of each in order; returns how many were given.

        A batch is encoded as a whole where the formats can (json: column by column, see
        ``JsonFormat.encode_values_many``) and handed to the producer in chunks
        (``KafkaProducer.produce_batch``) instead of one call per record; semantics are those of
        :meth:`write` (``-U`` dropped, ``-D`` a tombstone, the buffer's reduce by key, a
        transaction begun with exactly-once). Raises as :meth:`write`, except that a row that
        cannot be encoded fails the call before any row of the batch is sent or buffered.
        """
        batch = rows if isinstance(rows, list) else list(rows)
        if len(self.options.topics) != 1 or self._key_many is None:
            for row in batch:
                self.write(row)
            return len(batch)
        if self._timer_error is not None:
            self._raise_timer_error()
        topic = self.options.topics[0]
        records = self._serialize_many(batch)
        if not records:
            return len(batch)
        if self.guarantee is DeliveryGuarantee.EXACTLY_ONCE and not self.in_transaction:
            self.begin_transaction()
        if self._buffer is not None:
            kinds = [r.kind for r in batch if r.kind is not RowKind.UPDATE_BEFORE]
            self._buffer.add_many(
                ((topic, k), kind, KafkaRecord(topic, k, v, ts))  # type: ignore[arg-type]
                for kind, (k, v, ts) in zip(kinds, records)
            )
            return len(batch)
        producer = self._kafka
        producer.produce_batch(topic, records, max_queued=self._max_queued)
        producer.poll(0)
        return len(batch)

    def _emit_buffered(self, kind: RowKind, record: KafkaRecord) -> None:
        # the buffer normalised the kind: +U -> value, -D -> tombstone
        self._produce(record if kind is RowKind.UPDATE_AFTER else KafkaRecord(record.topic, record.key, None, record.timestamp_ms))

    def _emit_buffered_batch(self, items: list[tuple[RowKind, KafkaRecord]]) -> None:
        # one flush of the buffer: +U -> value, -D -> tombstone; one produce_batch per run of a topic
        producer = self._kafka
        run: list[tuple[bytes | None, bytes | None, int | None]] = []
        topic: str | None = None
        for kind, rec in items:
            if rec.topic != topic and run:
                producer.produce_batch(topic or "", run, max_queued=self._max_queued)
                run = []
            topic = rec.topic
            run.append((rec.key, rec.value if kind is RowKind.UPDATE_AFTER else None, rec.timestamp_ms))
        if run:
            producer.produce_batch(topic or "", run, max_queued=self._max_queued)
        producer.poll(0)

    def _produce(self, record: KafkaRecord) -> None:
        self._produce_parts(record.topic, record.key, record.value, record.timestamp_ms)

    def _produce_parts(self, topic: str, key: bytes, value: bytes | None, timestamp_ms: int | None) -> None:
        producer = self._kafka
        producer.produce(topic, key, value, timestamp_ms=timestamp_ms)
        producer.poll(0)

    # -- flushing ----------------------------------------------------------------------------------
    def flush(self, timeout_s: float | None = None) -> None:
        """Drain the buffer and, unless the guarantee is ``none``, wait until every record is
        acknowledged. Raises SinkFlushError naming topic/partition of a failed delivery, or the
        number of records still unacknowledged after ``timeout_s`` (default ``flush_timeout_s``)."""
        self._raise_timer_error()
        if self._buffer is not None:
            self._buffer.flush()
        producer = self._kafka
        if self.guarantee is DeliveryGuarantee.NONE:
            producer.poll(0)
            return
        producer.flush(self.flush_timeout_s if timeout_s is None else timeout_s)

    def _timer_loop(self) -> None:
        assert self._buffer is not None
        period = max(self._buffer.interval_ms / 4000.0, 0.005)
        while not self._timer_stop.wait(period):
            try:
                self._buffer.flush_if_due()
            except BaseException as exc:  # surfaced on the next write/flush
                self._timer_error = exc
                return

    def _raise_timer_error(self) -> None:
        if self._timer_error is not None:
            exc, self._timer_error = self._timer_error, None
            raise SinkFlushError(f"the buffer-flush timer failed: {exc}") from exc

    # -- transactions (exactly-once) -----------------------------------------------------------------
    def _require_eos(self, what: str) -> None:
        if self.guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
            raise ConnectorError(f"{what} needs sink.delivery-guarantee = exactly-once (got {self.guarantee.value})")

    def begin_transaction(self) -> None:
        """Begin a Kafka transaction (exactly-once only). Raises ConnectorError otherwise."""
        self._require_eos("begin_transaction()")
        self._kafka.begin()

    def commit_transaction(
        self,
        offsets: Sequence[TopicPartition] | None = None,
        group_metadata: Any = None,
    ) -> None:
        """Flush the buffer, add consumed ``offsets`` (next offsets to read, for
        consume-transform-produce; needs the consumer's ``consumer_group_metadata()``) and commit.

        Raises SinkFlushError (the transaction is aborted first, so the caller can rewind its
        input and retry); ConnectorError for ``offsets`` without ``group_metadata``."""
        self._require_eos("commit_transaction()")
        self._raise_timer_error()
        producer = self._kafka
        producer.begin()
        if offsets and group_metadata is None:
            raise ConnectorError("commit_transaction(offsets=...) needs the consumer's group_metadata")
        if self._buffer is not None:
            self._buffer.flush()
        producer.commit(self.flush_timeout_s, offsets=offsets, group_metadata=group_metadata)

    def abort_transaction(self) -> None:
        """Drop the buffer's pending records and abort the open transaction (its records are
        never visible to read_committed consumers). Raises SinkFlushError."""
        self._require_eos("abort_transaction()")
        if self._buffer is not None:
            self._buffer.discard()
        self._kafka.abort(self.flush_timeout_s)

    @property
    def in_transaction(self) -> bool:
        """True between begin and commit/abort."""
        return self._producer is not None and self._producer.in_transaction
