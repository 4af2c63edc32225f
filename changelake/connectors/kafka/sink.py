"""The Kafka pipeline sink (Pipeline 1's output): change events -> Kafka records, with positions;
and :class:`KafkaProducer`, the transactional producer it writes with.

As Flink's ``org.apache.flink.connector.kafka.sink`` package keeps the ``KafkaWriter`` and its
transactional producer together (and the ``kafka`` table and ``upsert-kafka`` sinks write through
the same package), the producer lives here: the ``kafka`` table sink
(:mod:`changelake.connectors.kafka_table.sink`), the ``upsert-kafka`` sinks
(:mod:`changelake.connectors.upsert_kafka.sink`) and the dead-letter copies
(:mod:`changelake.connectors.kafka.dead_letter`) import it from this module.

Record construction follows Flink CDC's Kafka pipeline sink (``PipelineKafkaRecordSerializationSchema``):

- topic per table (:mod:`.topics`): ``topic`` option, else the first matching
  ``sink.tableId-to-topic.mapping`` selector, else ``db.table``; missing topics are created;
- key (:mod:`changelake.formats.json_values`): ``{"TableId":"db.table",<pk columns>}`` (before-image for deletes);
- value: the value format's ``encode_event`` (debezium-json, canal-json); for plain ``json`` the
  after-row for c/r/u and a tombstone (null value) for d, so the topic is an upsert topic (an
  update that changes the primary key first writes a tombstone for the old key);
- partition: 0 (``all-to-zero``) or left to the producer with ``partitioner=murmur2_random``
  (``hash-by-key``), which places keys as Kafka's Java client does;
- headers: ``namespace``/``schemaName``/``tableName`` (``sink.add-tableId-to-header-enabled``),
  ``sink.custom-header``, and (changelake) ``changelake.schema.id`` / ``changelake.schema.topic``
  naming the table's exact schema, stored once in the compacted ``sink.schema-topic`` in the same
  transaction (:mod:`.schemas`); the payload stays what Flink's readers expect by default.

Positions (DESIGN.md "Exactly-once, end to end"): :meth:`KafkaPipelineSink.commit` stores the
source position as JSON in a compacted offsets topic (default ``changelake-offsets``) keyed by the
pipeline name, as Kafka Connect stores source offsets:

- ``exactly-once``: a transactional producer (``transactional.id`` =
  ``sink.transactional-id-prefix``) writes the batch and the position record in one Kafka
  transaction; :meth:`open` fences an older producer with the same id and aborts its open
  transaction, so a restart that resumes from :meth:`stored_position` neither loses nor duplicates;
- ``at-least-once``: the data is flushed (acknowledged) before the position record is written;
  the producer uses ``acks=all`` and ``enable.idempotence=true`` unless ``properties.*`` say
  otherwise (Kafka's Java producer defaults, so retries keep per-partition order);
- ``none``: records and position are sent without waiting for acknowledgements.

Example::

    sink = KafkaPipelineSink({"properties.bootstrap.servers": "127.0.0.1:9092",
                              "sink.delivery-guarantee": "exactly-once"}, pipeline_name="p1")
    sink.open()
    start = sink.stored_position()          # None on first run
    sink.write(events)                      # events: list[DataChangeEvent]
    sink.commit({"file": "mysql-bin.000003", "pos": 4711})
    sink.close()
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RETRACT, RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.connectors.errors import ConnectorError, SinkFlushError
from changelake.formats import create_format
from changelake.formats.json_values import encode_table_key, table_key_encoder
from changelake.connectors.kafka.schemas import (
    SCHEMA_ID_HEADER,
    SCHEMA_TOPIC_CONFIG,
    SCHEMA_TOPIC_HEADER,
    encode_schema_record,
    schema_fingerprint,
)
from changelake.connectors.kafka.sink_options import (
    DeliveryGuarantee,
    KafkaSinkOptions,
    PartitionStrategy,
    ValueFormat,
)
from changelake.connectors.kafka.topics import TopicCreator, TopicNamer
from changelake.connectors.kafka.side_topics import side_record
from changelake.changelog.side_records import SideRecord
from changelake.connectors.kafka.truncate_scope import SCHEMA_CHANGE_HEADER, truncate_scope_headers
from changelake.connectors.kafka_common import client_logger, require_broker, unavailable_error, watermarks, with_logger
from changelake.connectors.metrics import SinkMetrics

__all__ = ["KafkaPipelineSink", "UnrepresentableChangeError", "read_stored_position", "OFFSETS_TOPIC_CONFIG", "KafkaProducer", "PRODUCER_ONLY_KEYS",
           "admin_config"]

log = logging.getLogger(__name__)

#: config of the offsets topic (compacted, as Kafka Connect's offset storage topic)
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact"}

#: key value types whose equality (same type) means equal key bytes in every key format
_EXACT_KEY_TYPES = (int, str, bytes)


def _same_key_values(schema: Schema | None, before: Mapping[str, Any], after: Mapping[str, Any] | None) -> bool:
    """True when the before and after images hold the same primary-key values, of one exact type
    (int, str, bytes: equal values encode to equal key bytes), so the update keeps its key and the
    before key need not be encoded. False means "not known": the caller compares encoded keys
    (floats, decimals, dates, None... are left to that, e.g. ``-0.0 == 0.0`` encode differently)."""
    if schema is None or after is None:
        return False
    for name in schema.primary_key:
        old, new = before.get(name), after.get(name)
        if type(old) is not type(new) or not isinstance(old, _EXACT_KEY_TYPES) or old != new:
            return False
    return True


class UnrepresentableChangeError(ConnectorError):
    """A change event the sink's format cannot write (names the table); Pipeline 1 stops rather
    than skip it.

    Attributes:
        table: the source table, ``db.table``.
    """

    def __init__(self, message: str, *, table: str) -> None:
        self.table = table
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class _TablePlan:
    """What the records of one table and schema object share (:meth:`KafkaPipelineSink._plan`)."""

    schema: Schema | None
    topic: str
    table_text: str
    headers: list[tuple[str, bytes]]  # table headers, then the schema headers; shared, never mutated
    fingerprint: str | None
    key: Callable[[Mapping[str, Any] | None], bytes]
    fmt: Any
    value: Callable[[DataChangeEvent], bytes | None]


def _no_event_encoding(event: DataChangeEvent) -> bytes | None:
    raise TypeError("this value format encodes rows, not change events")  # never called: _records


class KafkaPipelineSink:
    """Writes change events to Kafka as Flink CDC's Kafka pipeline sink, and stores source positions.

    Args:
        options: raw Flink CDC sink options (validated here), or :class:`KafkaSinkOptions`.
        pipeline_name: names the position record (key in the offsets topic) and the default
            ``transactional.id`` (``changelake-<name>``).

    Raises:
        OptionValidationError: invalid options (see :meth:`KafkaSinkOptions.from_options`).

    The constructor does no I/O; :meth:`open` connects. Not thread-safe.
    """

    #: Row kinds this sink accepts: all (debezium-json and canal-json carry before and after images).
    changelog_mode: frozenset[RowKind] = RETRACT

    def __init__(self, options: Mapping[str, Any] | KafkaSinkOptions, pipeline_name: str) -> None:
        if isinstance(options, KafkaSinkOptions):
            self.options = replace(options, pipeline_name=pipeline_name)
        else:
            self.options = KafkaSinkOptions.from_options(options, pipeline_name)
        self.pipeline_name = pipeline_name
        self._namer = TopicNamer(self.options.topic, self.options.topic_mapping)
        self._producer: KafkaProducer | None = None
        self._admin: AdminClient | None = None
        self._creator: TopicCreator | None = None
        self._formats: dict[tuple[TableId, Schema | None], Any] = {}
        #: id(schema) -> (schema, table, format): the per-event lookup without hashing the schema
        self._formats_by_id: dict[int, tuple[Schema | None, TableId, Any]] = {}
        self._records_since_commit = 0
        self._schemas_sent: set[str] = set()  # fingerprints durably in the schema topic
        self._schemas_pending: set[str] = set()  # written in the open transaction
        self._fingerprints: dict[Schema, str] = {}
        #: id(schema) -> (schema, fingerprint): the per-event lookup without hashing the schema
        self._fingerprints_by_id: dict[int, tuple[Schema, str]] = {}
        #: exactly-once: the transaction commit running in the background (start_commit), its
        #: schema fingerprints, and the records encoded while it runs (produced once it is done)
        self._committing: "concurrent.futures.Future[None] | None" = None
        self._schemas_committing: set[str] = set()
        self._committer: concurrent.futures.ThreadPoolExecutor | None = None
        #: the records of the batch being encoded by write() (then produced by produce_many), and
        #: how many of them are not counted as records (schema records)
        self._deferred: list[tuple[str, bytes | None, bytes | None, int | None, list[tuple[str, bytes]]]] | None = None
        self._deferred_uncounted = 0
        #: (id(schema), table) -> what the records of that table and schema object share
        self._plans: dict[tuple[int, TableId], _TablePlan] = {}
        #: counters for metrics: records written, tombstones, skipped events, commits, schema records
        self.metrics = {"records": 0, "tombstones": 0, "skipped": 0, "commits": 0, "schemas": 0}

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def exactly_once(self) -> bool:
        return self.options.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE

    @property
    def producer(self) -> Producer:
        """The underlying confluent-kafka Producer (after :meth:`open`). Raises SinkFlushError before."""
        return self._require_open().client

    def open(self) -> None:
        """Connect: AdminClient, offsets topic, producer; with exactly-once ``init_transactions()``
        (fences an older producer with the same transactional.id and aborts its open transaction).

        Raises:
            KafkaUnavailableError: no broker answered within ``sink.flush.timeout`` (when open needs
                one: topic auto-creation or exactly-once); names ``bootstrap.servers``.
            TopicCreationError: the offsets topic cannot be created.
            SinkFlushError: the transactional producer cannot be initialised.
        """
        if self._producer is not None:
            return
        opts = self.options
        timeout_s = opts.flush_timeout.total_seconds()
        admin_conf = admin_config(opts.properties)
        self._admin = AdminClient(with_logger(admin_conf))
        if opts.auto_create_topics or self.exactly_once:
            require_broker(self._admin, admin_conf, timeout_s)
        self._creator = TopicCreator(self._admin, opts.topic_partitions, opts.topic_replication_factor, timeout_s)
        if opts.auto_create_topics:
            self._creator.ensure([opts.offsets_topic], OFFSETS_TOPIC_CONFIG, partitions=1)
            if opts.schema_topic:
                self._creator.ensure([opts.schema_topic], SCHEMA_TOPIC_CONFIG, partitions=1)
        conf: dict[str, Any] = dict(opts.properties)
        # only failed records need a delivery report (success is seen by flush and by the
        # transaction commit): no Python callback per acknowledged record, as the upsert-kafka sink
        only_errors = conf.get("delivery.report.only.error", True)  # a client (Python) setting: a bool
        conf["delivery.report.only.error"] = (
            only_errors if isinstance(only_errors, bool) else str(only_errors).strip().lower() == "true"
        )
        if opts.partition_strategy is PartitionStrategy.HASH_BY_KEY:
            conf.setdefault("partitioner", "murmur2_random")
        if self.exactly_once:
            conf["transactional.id"] = opts.transactional_id_prefix
            conf.setdefault("transaction.timeout.ms", "60000")
        elif opts.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
            conf.setdefault("acks", "all")
            # Kafka's Java producer (>= 3.0) is idempotent by default, so retries keep per-partition
            # order; do the same unless the user opts out (ApsaraMQ needs enable.idempotence=false).
            conf.setdefault("enable.idempotence", "true")
        producer = KafkaProducer(conf, queue_timeout_s=timeout_s)
        producer.open(timeout_s)
        self._producer = producer

    def close(self) -> None:
        """Abort an uncommitted transaction (exactly-once) or flush (otherwise), then disconnect.

        Idempotent. A commit started by :meth:`start_commit` is finished first (its failure is
        raised, after the producer is closed). Events written after the last commit are aborted
        under exactly-once — resume from :meth:`stored_position`; otherwise queued records are
        flushed (up to ``sink.flush.timeout``).
        """
        if self._producer is None:
            return
        try:
            self.finish_commit()
        finally:
            self._close_producer()

    def _close_producer(self) -> None:
        producer, self._producer = self._producer, None
        committer, self._committer = self._committer, None
        if committer is not None:
            committer.shutdown(wait=True)
        self._committing = None
        if producer is None:
            return
        try:
            # aborts an open transaction; otherwise delivers what is queued, also with 'none'
            # (which only skips waiting at commit)
            producer.close(self.options.flush_timeout.total_seconds())
        finally:
            self._admin = None
            self._creator = None
            self._schemas_pending.clear()

    def __enter__(self) -> "KafkaPipelineSink":
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------
    def topic_for(self, table_id: TableId) -> str:
        """The topic of a table (``topic`` > mapping > ``db.table``)."""
        return self._namer.topic_for(table_id)

    def write(self, events: Sequence[DataChangeEvent]) -> None:
        """Send the records of ``events`` (in order). Under exactly-once they join the open
        transaction (begun here if needed) and become visible at :meth:`commit`.

        A truncate is written by the changelog formats (debezium-json ``t``, canal-json
        ``TRUNCATE``; see :meth:`_truncate_records`) so it reaches Pipeline 2; the plain ``json``
        format, an upsert topic, has no record for it. (Flink CDC writes no truncate at all.)

        Raises:
            SinkFlushError: an earlier record failed delivery, or the producer queue stays full.
            TopicCreationError: a topic cannot be created.
            EncodeError: a value cannot be encoded by the format.
        """
        producer = self._require_open()
        committing = self._committing is not None and bool(events)
        if not committing:
            self.finish_commit()
            producer.raise_delivery_errors()
        # encode the whole batch first (while a previous transaction may still be committing),
        # then hand it to the producer in one loop (KafkaProducer.produce_many), in order
        self._deferred, self._deferred_uncounted = [], 0
        try:
            self._write_events(producer, events)
            records, uncounted = self._deferred, self._deferred_uncounted
        finally:
            self._deferred = None
        if committing:
            self.finish_commit()
            producer.raise_delivery_errors()
        if self.exactly_once and events:
            producer.begin()
        if records:
            tombstones = producer.tombstones_sent
            producer.produce_many(records)
            self.metrics["records"] += len(records) - uncounted
            self.metrics["tombstones"] += producer.tombstones_sent - tombstones
            self._records_since_commit += len(records)
        producer.poll(0)

    def _write_events(self, producer: KafkaProducer, events: Sequence[DataChangeEvent]) -> None:
        opts = self.options
        json_values_format = opts.value_format is ValueFormat.JSON
        zero = 0 if opts.partition_strategy is PartitionStrategy.ALL_TO_ZERO else None
        out = self._deferred
        assert out is not None
        sent = self._schemas_sent
        plans = self._plans
        UPDATE, DELETE, TRUNCATE = Op.UPDATE, Op.DELETE, Op.TRUNCATE
        hooked = type(self)._records is not KafkaPipelineSink._records  # a subclass writes its own records
        for event in events:
            op = event.op
            if op is TRUNCATE:
                for topic, key, value, headers, partition in self._truncate_records(producer, event):
                    self._produce(producer, topic, key, value, headers, partition)
                continue
            if hooked:
                for record in self._records(event):
                    self._produce(producer, *record)
                continue
            schema = event.schema
            plan = plans.get((id(schema), event.table))
            if plan is None or plan.schema is not schema:
                plan = self._plan(event)
            if plan.fingerprint is not None and plan.fingerprint not in sent:
                self._ensure_schema_record(producer, event.table, plan.schema, plan.fingerprint)
            if json_values_format or (op is UPDATE and not _same_key_values(schema, event.before or {}, event.after)):
                for record in self._planned_records(event, plan):
                    self._produce(producer, *record)
                continue
            # the common case: one record, the event's key (the before image for a delete)
            key = plan.key(event.before if op is DELETE else event.after)
            encoded = plan.value(event)
            if encoded is None:
                self.metrics["skipped"] += 1
                continue
            out.append((plan.topic, key, encoded, zero, plan.headers))

    def _truncate_records(
        self, producer: KafkaProducer, event: DataChangeEvent
    ) -> list[tuple[str, bytes, bytes, list[tuple[str, bytes]], int | None]]:
        """A truncate as the changelog format writes it (debezium-json ``t``, canal-json
        ``TRUNCATE``), keyed ``{"TableId": ...}``; with ``hash-by-key`` it goes to every partition
        of the topic, since the table's keys are spread over all of them, each copy with the
        ``changelake.truncate.partitions`` / ``changelake.truncate.key-format`` headers: the copy in
        partition p deletes only the keys murmur2 places in p, so it stays ordered with the rows
        of its partition whatever order Pipeline 2 reads the partitions in.

        Raises:
            UnrepresentableChangeError: the plain ``json`` (upsert) format has no record for a
                truncate or a DROP TABLE (an upsert topic holds one row per key, nothing that
                deletes every key); skipping it would leave the lake with rows MySQL deleted.
        """
        opts = self.options
        if opts.value_format is ValueFormat.JSON:
            what = "DROP TABLE" if event.schema_change else "TRUNCATE TABLE"
            raise UnrepresentableChangeError(
                f"{what} of table {event.table} cannot be written to topic {self.topic_for(event.table)!r} in "
                "value.format 'json': an upsert topic has no record that deletes every key of a table. Use "
                "value.format 'debezium-json' or 'canal-json' for tables that are truncated or dropped",
                table=str(event.table))
        value = self._format(event).encode_event(event)
        if value is None:
            self.metrics["skipped"] += 1
            return []
        topic = self.topic_for(event.table)
        if opts.auto_create_topics and self._creator is not None:
            self._creator.ensure([topic])
        key = encode_table_key(str(event.table), None, None, opts.key_format)
        headers = self._headers(event.table) + self._schema_headers(producer, event)
        if event.schema_change:  # a DROP TABLE travels as a truncate marked drop.table
            headers.append((SCHEMA_CHANGE_HEADER, event.schema_change.encode("utf-8")))
        if opts.partition_strategy is PartitionStrategy.ALL_TO_ZERO:
            return [(topic, key, value, headers, 0)]
        metadata = producer.client.list_topics(topic, timeout=opts.flush_timeout.total_seconds())
        partitions = sorted(metadata.topics[topic].partitions)
        if len(partitions) > 1:
            # each copy covers the keys hash-by-key placed in its partition (truncate_scope.py)
            headers = headers + truncate_scope_headers(len(partitions), opts.key_format)
        return [(topic, key, value, headers, p) for p in partitions]

    def _plan(self, event: DataChangeEvent) -> "_TablePlan":
        """What every record of ``event``'s table and schema object shares (topic, headers, key
        and value encoders, schema fingerprint), built once; the topic is created if missing."""
        opts = self.options
        topic = self.topic_for(event.table)
        if opts.auto_create_topics and self._creator is not None:
            self._creator.ensure([topic])
        table_text = str(event.table)
        headers = self._headers(event.table)
        fingerprint: str | None = None
        if opts.schema_topic and event.schema is not None:
            fingerprint = self._fingerprint(event.schema)
            headers += [(SCHEMA_ID_HEADER, fingerprint.encode("ascii")),
                        (SCHEMA_TOPIC_HEADER, opts.schema_topic.encode("utf-8"))]
        fmt = self._format(event)
        # the changelog formats encode events (the plain json format encodes rows, in _records)
        event_encoder = getattr(fmt, "event_encoder", None)
        value = event_encoder(event.schema) if event_encoder is not None else getattr(fmt, "encode_event", None)
        plan = _TablePlan(
            schema=event.schema, topic=topic, table_text=table_text, headers=headers, fingerprint=fingerprint,
            key=table_key_encoder(table_text, event.schema, opts.key_format), fmt=fmt,
            value=value if value is not None else _no_event_encoding,
        )
        if len(self._plans) > 1000:
            self._plans.clear()
        self._plans[(id(event.schema), event.table)] = plan
        return plan

    def _records(self, event: DataChangeEvent) -> list[tuple[str, bytes, bytes | None, list[tuple[str, bytes]]]]:
        """The records of one event (topic, key, value, headers); :meth:`write`'s hook, which a
        subclass may replace (``UpsertKafkaIngestionSink``): then every event goes through it."""
        return self._planned_records(event, None)

    def _planned_records(self, event: DataChangeEvent, plan: "_TablePlan | None"
                         ) -> list[tuple[str, bytes, bytes | None, list[tuple[str, bytes]]]]:
        opts = self.options
        if plan is None or plan.schema is not event.schema:
            plan = self._plan(event)
            if self._producer is not None and plan.fingerprint is not None:
                self._ensure_schema_record(self._producer, event.table, plan.schema, plan.fingerprint)
        topic, headers = plan.topic, plan.headers
        key_row = event.before if event.op is Op.DELETE else event.after
        key = plan.key(key_row)
        if (
            event.op is Op.UPDATE
            and opts.value_format is not ValueFormat.JSON
            and event.before is not None
            and not _same_key_values(event.schema, event.before, event.after)
            and plan.key(event.before) != key
        ):
            # As Debezium: an update that changes the primary key is a delete of the old key
            # (keyed, and so partitioned, by the old key) followed by a create of the new one.
            return [
                *self._planned_records(replace(event, op=Op.DELETE, after=None), plan),
                *self._planned_records(replace(event, op=Op.CREATE, before=None), plan),
            ]
        fmt = plan.fmt
        if opts.value_format is ValueFormat.JSON:
            if event.op is Op.DELETE:
                return [(topic, key, None, headers)]
            out: list[tuple[str, bytes, bytes | None, list[tuple[str, bytes]]]] = []
            if event.op is Op.UPDATE and event.before is not None:
                old_key = plan.key(event.before)
                if old_key != key:
                    out.append((topic, old_key, None, headers))
            value = fmt.encode(ChangelogRow.insert(dict(event.after or {}), event.table))
            out.append((topic, key, value, headers))
            return out
        value = plan.value(event)
        if value is None:
            self.metrics["skipped"] += 1
            return []
        return [(topic, key, value, headers)]

    def _format(self, event: DataChangeEvent) -> Any:
        # by identity first: hashing a Schema (every column and type) for each event costs more
        # than encoding a small row; events of one table share their Schema object
        hit = self._formats_by_id.get(id(event.schema))
        if hit is not None and hit[0] is event.schema and hit[1] == event.table:
            return hit[2]
        cache_key = (event.table, event.schema)
        fmt = self._formats.get(cache_key)
        if fmt is not None:
            self._remember_format(event, fmt)
        if fmt is None:
            fmt = create_format(self.options.value_format.value, event.schema, dict(self.options.value_format_options))
            if len(self._formats) > 10_000:
                self._formats.clear()
            self._formats[cache_key] = fmt
            self._remember_format(event, fmt)
        return fmt

    def _remember_format(self, event: DataChangeEvent, fmt: Any) -> None:
        if len(self._formats_by_id) > 1000:
            self._formats_by_id.clear()
        self._formats_by_id[id(event.schema)] = (event.schema, event.table, fmt)

    def _headers(self, table_id: TableId) -> list[tuple[str, bytes]]:
        headers: list[tuple[str, bytes]] = []
        if self.options.add_table_id_to_header:
            # Flink CDC TableId(namespace, schemaName, tableName); MySQL has no namespace.
            headers.append(("namespace", b""))
            headers.append(("schemaName", (table_id.database or "").encode("utf-8")))
            headers.append(("tableName", table_id.table.encode("utf-8")))
        headers.extend((k, v.encode("utf-8")) for k, v in self.options.custom_headers)
        return headers

    def _fingerprint(self, schema: Schema) -> str:
        # by identity first, as _format: hashing a Schema for each event costs more than the rest
        by_id = self._fingerprints_by_id.get(id(schema))
        if by_id is not None and by_id[0] is schema:
            return by_id[1]
        fingerprint = self._fingerprints.get(schema) or schema_fingerprint(schema)
        if len(self._fingerprints) > 10_000:
            self._fingerprints.clear()
        self._fingerprints[schema] = fingerprint
        if len(self._fingerprints_by_id) > 1000:
            self._fingerprints_by_id.clear()
        self._fingerprints_by_id[id(schema)] = (schema, fingerprint)
        return fingerprint

    def _ensure_schema_record(self, producer: KafkaProducer, table: TableId, schema: Schema | None,
                              fingerprint: str) -> None:
        """Produce the schema record of ``fingerprint`` first when this sink has not written it
        yet (joining the open transaction under exactly-once)."""
        topic = self.options.schema_topic
        if (not topic or schema is None or fingerprint in self._schemas_sent or fingerprint in self._schemas_pending
                or fingerprint in self._schemas_committing):
            return
        key, value = encode_schema_record(table, schema)
        self._produce(producer, topic, key, value, [], partition=0, counted=False)
        self.metrics["schemas"] += 1
        if self.exactly_once:
            self._schemas_pending.add(fingerprint)
        else:
            self._schemas_sent.add(fingerprint)

    def _schema_headers(self, producer: KafkaProducer, event: DataChangeEvent) -> list[tuple[str, bytes]]:
        """``changelake.schema.id`` / ``changelake.schema.topic`` for an event with a schema; the
        schema record is produced first when this sink has not written it yet (joining the open
        transaction under exactly-once). ``[]`` without a schema or ``sink.schema-topic``."""
        topic = self.options.schema_topic
        if not topic or event.schema is None:
            return []
        fingerprint = self._fingerprint(event.schema)
        self._ensure_schema_record(producer, event.table, event.schema, fingerprint)
        return [(SCHEMA_ID_HEADER, fingerprint.encode("ascii")), (SCHEMA_TOPIC_HEADER, topic.encode("utf-8"))]

    def _produce(self, producer: KafkaProducer, topic: str, key: bytes, value: bytes | None,
                 headers: list[tuple[str, bytes]], partition: int | None = None, counted: bool = True) -> None:
        if self._deferred is not None:  # write: the batch is encoded first, then produced in one loop
            if partition is None and self.options.partition_strategy is PartitionStrategy.ALL_TO_ZERO:
                partition = 0
            self._deferred.append((topic, key, value, partition, headers))
            if not counted:
                self._deferred_uncounted += 1
            return
        if partition is None and self.options.partition_strategy is PartitionStrategy.ALL_TO_ZERO:
            partition = 0
        producer.produce(topic, key, value, partition=partition, headers=headers)
        if counted:
            self.metrics["records"] += 1
        if value is None:
            self.metrics["tombstones"] += 1
        self._records_since_commit += 1

    def write_side_records(self, records: Sequence[SideRecord]) -> None:
        """Write Debezium's transaction metadata / heartbeat records (:mod:`.side_topics`) to
        partition 0 of their topics (created with one partition when missing); under exactly-once
        they join the open transaction, so they become visible with the data and position of
        the same :meth:`commit`.

        Raises:
            SinkFlushError, TopicCreationError: as :meth:`write`.
        """
        if not records:
            return
        producer = self._require_open()
        self.finish_commit()
        producer.raise_delivery_errors()
        if self.exactly_once:
            producer.begin()
        opts = self.options
        for record in records:
            topic, key, value, headers = side_record(record, opts.transaction_topic, opts.heartbeat_topic,
                                                     opts.topic_prefix)
            if opts.auto_create_topics and self._creator is not None:
                self._creator.ensure([topic], partitions=1)
            self._produce(producer, topic, key, value, headers, partition=0, counted=False)
            self.metrics["side_records"] = self.metrics.get("side_records", 0) + 1

    # -- commit ----------------------------------------------------------------------------------
    def commit(self, position: Mapping[str, Any]) -> None:
        """Make everything written so far durable together with ``position`` (JSON-serialisable).

        Exactly-once: the position record joins the open transaction, which is committed (both
        visible atomically to read_committed consumers). At-least-once: flush, then write and flush
        the position record. None: send the position record without waiting.

        Raises:
            SinkFlushError: delivery or the transaction commit failed (the transaction is aborted;
                restart from :meth:`stored_position`).
        """
        self.start_commit(position)
        self.finish_commit()

    def start_commit(self, position: Mapping[str, Any]) -> None:
        """:meth:`commit`, returning before the broker has confirmed an exactly-once commit.

        Exactly-once: the position record joins the open transaction, as in :meth:`commit`, and
        ``commit_transaction`` runs in a background thread. The next :meth:`write` encodes its
        events meanwhile and produces them once the commit is done (records cannot join a
        transaction that is committing). :meth:`write`, :meth:`write_side_records`,
        :meth:`commit`, :meth:`stored_position` and :meth:`close` first wait for it and raise its
        failure, so no record is produced after a failed commit. Each transaction still holds
        exactly its own events and, last, the position after them. At-least-once and none: the
        same as :meth:`commit`.

        Raises:
            SinkFlushError: the previous background commit failed, or (not exactly-once) as
                :meth:`commit`.
        """
        producer = self._require_open()
        self.finish_commit()
        opts = self.options
        timeout_s = opts.flush_timeout.total_seconds()
        # position records always go to partition 0, so the last one for a key is well defined
        value = json.dumps(dict(position), sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")
        key = self.pipeline_name.encode("utf-8")
        if self.exactly_once:
            producer.begin()
            self._produce(producer, opts.offsets_topic, key, value, [], partition=0)
            self._schemas_committing, self._schemas_pending = self._schemas_pending, set()
            if self._committer is None:
                self._committer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafka-commit")
            self._committing = self._committer.submit(producer.commit, timeout_s)
            return
        if opts.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
            producer.flush(timeout_s)
            self._produce(producer, opts.offsets_topic, key, value, [], partition=0)
            producer.flush(timeout_s)
        else:
            self._produce(producer, opts.offsets_topic, key, value, [], partition=0)
            producer.poll(0)
        self._after_commit()

    def finish_commit(self) -> bool:
        """Wait for the commit started by :meth:`start_commit`; True if there was one (it is
        durable now), False if none was running.

        Raises:
            SinkFlushError: the commit failed (the transaction was aborted; restart from
                :meth:`stored_position`).
        """
        future, self._committing = self._committing, None
        if future is None:
            return False
        try:
            future.result()  # aborts on failure; names a fenced producer
        except BaseException:
            self._schemas_committing = set()  # aborted with the transaction
            raise
        self._schemas_sent |= self._schemas_committing
        self._schemas_committing = set()
        self._after_commit()
        return True

    def _after_commit(self) -> None:
        if self._admin is not None:
            self._admin.poll(0)  # hand the admin client's queued log lines to Python logging
        self._records_since_commit = 0
        self.metrics["commits"] += 1

    def abort(self) -> None:
        """Abort the open transaction (exactly-once): its records are never visible to
        read_committed consumers. A no-op otherwise."""
        producer = self._require_open()
        try:
            self.finish_commit()
        finally:
            producer.abort(self.options.flush_timeout.total_seconds())
            self._schemas_pending.clear()

    def _require_open(self) -> KafkaProducer:
        if self._producer is None:
            raise SinkFlushError("the Kafka pipeline sink is not open; call open() first")
        return self._producer

    # -- positions -------------------------------------------------------------------------------
    def stored_position(self, timeout_s: float = 30.0) -> dict[str, Any] | None:
        """The last committed position of this pipeline (read_committed), or None.

        Works before :meth:`open`. Raises SinkFlushError if the offsets topic cannot be read,
        KafkaUnavailableError if no broker answers within ``timeout_s`` seconds. A commit started
        by :meth:`start_commit` is finished first (SinkFlushError if it failed).
        """
        if self._producer is not None:
            self.finish_commit()
        return read_stored_position(self.options.properties, self.options.offsets_topic, self.pipeline_name,
                                    timeout_s)


def read_stored_position(properties: Mapping[str, str], offsets_topic: str, pipeline_name: str,
                         timeout_s: float = 30.0) -> dict[str, Any] | None:
    """Read the latest committed position record keyed ``pipeline_name`` in ``offsets_topic``.

    Reads every partition from the beginning to its end with ``isolation.level=read_committed`` (so
    aborted or still-open transactions are invisible); a tombstone clears the position.

    Returns:
        The position dict, or None when there is none (or the topic does not exist).

    Raises:
        SinkFlushError: the topic cannot be read within ``timeout_s`` seconds.
        KafkaUnavailableError: no broker answered within ``timeout_s`` seconds (names
            ``bootstrap.servers``).
    """
    conf = admin_config(properties)
    conf.update({
        "group.id": f"changelake-position-reader-{pipeline_name}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })
    consumer = Consumer(with_logger(conf))
    try:
        require_broker(consumer, conf, timeout_s)  # unreachable: reported within ~10 s
        pending = {p for p, (low, high) in watermarks(consumer, offsets_topic, timeout_s).items() if high > low}
        if not pending:
            return None
        consumer.assign([TopicPartition(offsets_topic, p, 0) for p in sorted(pending)])
        wanted = pipeline_name.encode("utf-8")
        found: bytes | None = None
        have = False
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise SinkFlushError(f"timed out after {timeout_s:g} s reading positions from topic "
                                     f"{offsets_topic!r} partitions {sorted(pending)}")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                    continue
                raise SinkFlushError(f"cannot read topic {offsets_topic!r} partition {msg.partition()}: "
                                     f"{err.str()}")
            if msg.key() == wanted:
                found, have = msg.value(), True
        if not have or found is None:
            return None
        return dict(json.loads(found.decode("utf-8")))
    except KafkaException as exc:
        unavailable = unavailable_error(exc, conf, timeout_s)
        if unavailable is not None:
            raise unavailable from exc
        raise SinkFlushError(f"cannot read positions from topic {offsets_topic!r}: {exc}") from exc
    finally:
        consumer.close()


# -- the producer every Kafka sink writes with ---------------------------------------------------
# :class:`KafkaProducer` wraps one confluent-kafka ``Producer`` (librdkafka) and is what the Kafka
# pipeline sink (:class:`KafkaPipelineSink`, above), the ``kafka`` table sink
# (:mod:`changelake.connectors.kafka_table.sink`) and the upsert-kafka sinks
# (:mod:`changelake.connectors.upsert_kafka.sink`) write with:
#
# - :meth:`~KafkaProducer.produce` sends one record; a full local queue is served (``poll``) until
#   ``queue_timeout_s`` passes, then :class:`SinkFlushError` names the topic;
# - delivery reports are collected (thread-safe); :meth:`~KafkaProducer.raise_delivery_errors`
#   raises the first failure as :class:`SinkFlushError` naming topic and partition and counting the
#   others, as Flink's ``KafkaWriter`` rethrows an async send failure;
# - :meth:`~KafkaProducer.flush` waits for every acknowledgement, then raises;
# - with ``transactional.id`` in the config: :meth:`~KafkaProducer.open` calls
#   ``init_transactions`` (fencing an older producer with that id and aborting its open
#   transaction), then :meth:`~KafkaProducer.begin`, :meth:`~KafkaProducer.send_offsets`,
#   :meth:`~KafkaProducer.commit` (aborts first when the failure needs it; a fenced producer is
#   named as such) and :meth:`~KafkaProducer.abort`;
# - every record sent and every failure updates a :class:`~changelake.connectors.metrics.SinkMetrics`.
#
# Example::
#
#     producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:9092", "transactional.id": "tx-0"})
#     producer.open(timeout_s=30)
#     producer.begin()
#     producer.produce("orders", b'{"id":1}', b'{"id":1,"v":"a"}')
#     producer.commit(timeout_s=30)           # visible to read_committed readers now
#     producer.close()

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
