"""The ``kafka`` table sink: one Kafka record per changelog row, encoded by the value format.

As Flink's ``KafkaDynamicSink``: the sink's changelog mode is the value format's
(insert-only for json/csv/avro/raw/avro-confluent; all four kinds for debezium-json,
canal-json, maxwell-json). An updating changelog sent to an insert-only format is refused by
:meth:`KafkaTableSink.check_input_mode` at plan time, before any record is written, with
Flink's planner message (see :func:`changelake.changelog.modes.check_changelog_mode`).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable

from confluent_kafka import Producer, TopicPartition

from changelake.changelog.errors import UnsupportedChangelogError
from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.modes import check_changelog_mode, describe_mode
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.connectors.errors import ConnectorError, SinkFlushError
from changelake.connectors.kafka.sink import KafkaProducer
from changelake.connectors.kafka_table.options import DeliveryGuarantee, KafkaTableOptions, SinkPartitioner

__all__ = ["KafkaTableSink", "LIBRDKAFKA_PARTITIONER"]

#: librdkafka's partitioner matching the Java producer's default for keyed records (murmur2).
LIBRDKAFKA_PARTITIONER = "murmur2_random"


class KafkaTableSink:
    """Writes changelog rows to one topic, as Flink's ``kafka`` connector sink.

    Args:
        options: parsed options (:func:`~changelake.connectors.kafka_table.factory.create_sink`
            builds them from a WITH map or DDL).
        schema: the table schema (column order of the value).
        value_format: the value format instance (``encode(row) -> bytes | None``,
            ``changelog_mode``).
        key_format: the key format instance, or None for records without key.
        table_name: the sink's name in messages, e.g. ``default_catalog.default_database.t``.
        producer: an existing confluent-kafka Producer to write with (e.g. one transactional
            producer shared with another sink, so both write in one transaction); the sink then
            neither configures, begins, commits nor closes it.
        merge_updates: with a changelog format, write a ``-U`` directly followed by its ``+U``
            as ONE update message (debezium ``op: u``, canal/maxwell ``UPDATE``), so readers
            get -U/+U back, as Flink CDC's Kafka pipeline sink writes updates. False writes
            them row by row as Flink SQL's serializers do (-U -> ``d``, +U -> ``c``).

    Record layout: key = the 'key.fields' columns (prefix stripped) encoded by the key format;
    value = all columns ('ALL') or the non-key columns ('EXCEPT_KEY') encoded by the value format,
    which sees the row's kind (an insert-only format writes a plain row). Partition:
    'default' -> murmur2 of the key bytes (librdkafka ``murmur2_random``; keyless records go
    to librdkafka's sticky choice), 'fixed' -> partition 0 (Flink's FlinkFixedPartitioner for
    the single subtask), 'round-robin' -> partitions in turn.

    Delivery: 'at-least-once' waits for acknowledgements at :meth:`flush`; 'none' does not wait;
    'exactly-once' writes inside Kafka transactions (``transactional.id`` =
    ``<sink.transactional-id-prefix>-0``, stable so a restart fences a zombie and aborts its
    open transaction) opened by :meth:`begin_transaction` and committed, optionally with the
    consumed offsets, by :meth:`commit_transaction`.

    Example::

        sink = create_sink({"connector": "kafka", "topic": "out", "format": "debezium-json",
                            "properties.bootstrap.servers": "localhost:9092"}, schema)
        sink.check_input_mode(agg.changelog_mode, node_description=agg.describe())
        sink.open()
        for row in rows: sink.write(row)
        sink.flush(); sink.close()
    """

    def __init__(
        self,
        options: KafkaTableOptions,
        schema: Schema,
        value_format: Any,
        key_format: Any | None = None,
        *,
        table_name: str = "default_catalog.default_database.kafka_sink",
        producer: Producer | None = None,
        merge_updates: bool = True,
    ) -> None:
        self.options = options
        self.schema = schema
        self.value_format = value_format
        self.key_format = key_format
        self.table_name = table_name
        self.topic = options.topic
        self._external_producer = producer
        self._producer: KafkaProducer | None = None
        self._drop: frozenset[RowKind] = frozenset()
        self._rr: itertools.cycle[int] | None = None
        self.records_written = 0
        self.merge_updates = merge_updates and hasattr(value_format, "encode_event")
        self._pending_before: ChangelogRow | None = None
        key_set = set(options.key_fields)
        self._value_columns = [
            c for c in schema.names
            if not (options.value_fields_include.value == "EXCEPT_KEY" and c in key_set)
        ]

    # -- planning ---------------------------------------------------------------------------------
    @property
    def changelog_mode(self) -> frozenset[RowKind]:
        """The kinds this sink consumes: the value format's changelog mode."""
        return frozenset(getattr(self.value_format, "changelog_mode", frozenset({RowKind.INSERT})))

    def check_input_mode(self, mode: frozenset[RowKind], *, node_description: str | None = None) -> None:
        """Refuse, before anything is written, an input whose kinds this sink cannot consume.

        Raises:
            UnsupportedChangelogError: Flink's "Table sink '<name>' doesn't support consuming
                update and delete changes which is produced by node ..." (e.g. a GroupAggregate
                into json).
        """
        self._drop = check_changelog_mode(mode, self.changelog_mode, self.table_name, node_description=node_description)

    # -- lifecycle --------------------------------------------------------------------------------
    def producer_config(self) -> dict[str, str]:
        """The librdkafka config this sink's own producer is created with."""
        conf = dict(self.options.properties)
        conf.setdefault("partitioner", LIBRDKAFKA_PARTITIONER)
        g = self.options.sink_delivery_guarantee
        if g is DeliveryGuarantee.EXACTLY_ONCE:
            conf["transactional.id"] = f"{self.options.sink_transactional_id_prefix}-0"
            conf.setdefault("transaction.timeout.ms", "60000")
        elif g is DeliveryGuarantee.AT_LEAST_ONCE:
            conf.setdefault("enable.idempotence", "true")
        else:
            conf.setdefault("acks", "1")
        return conf

    def open(self) -> "KafkaTableSink":
        """Create the producer (or adopt the given one); exactly-once calls ``init_transactions``,
        which aborts a previous incarnation's open transaction. Returns self.

        Raises:
            KafkaUnavailableError: exactly-once and no broker answered within 30 s (names
                ``bootstrap.servers``).
            ConnectorError: fenced initialisation failed.
        """
        if self._producer is not None:
            return self
        if self._external_producer is not None:
            self._producer = KafkaProducer({}, client=self._external_producer, queue_timeout_s=10.0)
            return self
        producer = KafkaProducer(self.producer_config(), queue_timeout_s=10.0)
        producer.open(30)
        self._producer = producer
        return self

    def __enter__(self) -> "KafkaTableSink":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def producer(self) -> Producer:
        """The underlying confluent-kafka Producer (after :meth:`open`)."""
        return self._kafka.client

    @property
    def _kafka(self) -> KafkaProducer:
        if self._producer is None:
            raise ConnectorError(f"sink for topic {self.topic!r} is not open; call open() first")
        return self._producer

    def close(self) -> None:
        """Flush (unless in an open transaction, which is aborted) and release the producer.
        Idempotent. An adopted producer is left open."""
        if self._producer is None:
            return
        try:
            if self._producer.in_transaction:
                self._pending_before = None
            else:
                self._drain_pending()
            self._producer.close(30)  # aborts an open transaction, else flushes (an adopted producer: neither)
        finally:
            self._producer = None

    # -- writing ----------------------------------------------------------------------------------
    def _partition(self) -> int | None:
        p = self.options.sink_partitioner
        if p is SinkPartitioner.DEFAULT:
            return None
        if p is SinkPartitioner.FIXED:
            return 0
        if self._rr is None:
            md = self._kafka.client.list_topics(self.topic, timeout=10)
            t = md.topics.get(self.topic)
            n = len(t.partitions) if t is not None and t.partitions else 1
            self._rr = itertools.cycle(range(n))
        return next(self._rr)

    def encode(self, row: ChangelogRow) -> tuple[bytes | None, bytes | None]:
        """(key bytes, value bytes) of one row; value None means "no record"."""
        key = None
        if self.key_format is not None:
            names = self.options.key_names
            key_row = ChangelogRow(RowKind.INSERT, {n: row.values.get(f) for n, f in zip(names, self.options.key_fields)})
            key = self.key_format.encode(key_row)
        value_row = ChangelogRow(row.kind, {c: row.values.get(c) for c in self._value_columns}, row.table, row.metadata)
        return key, self.value_format.encode(value_row)

    def write(self, row: ChangelogRow) -> None:
        """Encode and send one row (asynchronously; :meth:`flush` waits).

        Rows of a kind :meth:`check_input_mode` said to drop (-U for an upsert-style sink) are
        skipped. Raises UnsupportedChangelogError for a kind the format cannot carry (nothing is
        sent), EncodeError from the formats, SinkFlushError if the local queue stays full.
        """
        if row.kind in self._drop:
            return
        if row.kind not in self.changelog_mode:
            raise UnsupportedChangelogError(
                f"Table sink '{self.table_name}' doesn't support consuming {row.kind} rows: its format "
                f"'{self.options.value_format}' accepts {describe_mode(self.changelog_mode)}. Use the "
                f"'upsert-kafka' connector or a changelog format (debezium-json, canal-json, maxwell-json)."
            )
        if self.merge_updates:
            pending, self._pending_before = self._pending_before, None
            if pending is not None:
                if row.kind is RowKind.UPDATE_AFTER:
                    self._write_update(pending, row)
                    return
                self._write_row(pending)
            if row.kind is RowKind.UPDATE_BEFORE:
                self._pending_before = row
                return
        self._write_row(row)

    def _write_row(self, row: ChangelogRow) -> None:
        key, value = self.encode(row)
        if value is None and key is None:
            return
        self._produce(key, value)

    def _write_update(self, before: ChangelogRow, after: ChangelogRow) -> None:
        table = after.table or TableId(None, self.table_name.rsplit(".", 1)[-1])
        event = DataChangeEvent(
            table,
            Op.UPDATE,
            {c: before.values.get(c) for c in self._value_columns},
            {c: after.values.get(c) for c in self._value_columns},
            ts_ms=int(after.metadata.get("ts_ms", 0) or 0) if after.metadata else 0,
        )
        key, _ = self.encode(after) if self.key_format is not None else (None, None)
        value = self.value_format.encode_event(event)
        if value is not None or key is not None:
            self._produce(key, value)

    def _drain_pending(self) -> None:
        """Write a held -U that no +U followed (as a row-level message)."""
        pending, self._pending_before = self._pending_before, None
        if pending is not None:
            self._write_row(pending)

    def _produce(self, key: bytes | None, value: bytes | None) -> None:
        producer = self._kafka
        producer.produce(self.topic, key, value, partition=self._partition())
        self.records_written += 1
        producer.poll(0)

    def write_all(self, rows: Iterable[ChangelogRow]) -> int:
        """Write every row (see :meth:`write`); returns how many were given."""
        n = 0
        for r in rows:
            self.write(r)
            n += 1
        return n

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until every sent record is acknowledged (no-op wait for 'none').

        Raises:
            SinkFlushError: a record failed (names topic and partition) or the timeout (s) passed.
        """
        producer = self._kafka
        try:
            self._drain_pending()
            if self.options.sink_delivery_guarantee is DeliveryGuarantee.NONE:
                producer.poll(0)
                return
            producer.flush(timeout_s)
        finally:
            producer.clear_errors()

    # -- transactions (exactly-once) ----------------------------------------------------------------
    def begin_transaction(self) -> None:
        """Start a Kafka transaction (exactly-once only). Raises ConnectorError otherwise."""
        if self.options.sink_delivery_guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
            raise ConnectorError(f"sink for topic {self.topic!r} is not exactly-once; no transactions")
        self._kafka.begin()

    def commit_transaction(
        self,
        offsets: list[TopicPartition] | None = None,
        group_metadata: Any | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        """Commit the open transaction; with ``offsets`` (next offsets to consume) and the
        consumer's ``group_metadata``, the consumed offsets commit atomically with the records
        (``send_offsets_to_transaction``: consume-transform-produce).

        Raises:
            SinkFlushError: a record failed, or the commit failed (the transaction is aborted).
        """
        producer = self._kafka
        try:
            self._drain_pending()
            producer.flush(timeout_s)
            producer.commit(timeout_s, offsets=offsets, group_metadata=group_metadata)
        except SinkFlushError as exc:
            try:
                producer.abort(timeout_s)  # a no-op when commit() already aborted
            except SinkFlushError:
                pass
            raise SinkFlushError(f"transaction on topic {self.topic!r} failed and was aborted: {exc}",
                                 topic=exc.topic, partition=exc.partition, failed=exc.failed) from exc

    def abort_transaction(self, timeout_s: float = 60.0) -> None:
        """Abort the open transaction: none of its records become visible to read_committed readers."""
        self._pending_before = None
        self._kafka.abort(timeout_s)

