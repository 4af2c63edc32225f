"""The upsert-kafka INGESTION sink: Pipeline 1's ``sink: {type: upsert-kafka}`` (MySQL -> keyed topics).

As Alibaba's upsert-kafka data-ingestion sink (the seed, "Ingestão de dados") with the record
semantics of Flink's upsert-kafka sink (reference §1.5, ``DynamicKafkaRecordSerializationSchema``):

- topic: one per table, ``db.table`` — or the route's ``sink-table`` (routing is done by the runner
  before the sink, so the event's TableId already is the sink table); missing topics are created
  with ``cleanup.policy=compact`` (``sink.topic.partitions`` partitions); existing topics are left
  as they are;
- key: compact JSON object of the primary-key columns in primary-key order, values as Flink's JSON
  encoders write them (:mod:`changelake.formats.json_values`), e.g. ``{"region":"eu","id":1}`` —
  exactly what the upsert-kafka SQL connector with ``'key.format' = 'json'`` reads back;
- value: the ``json`` format of the FULL after-row (primary-key fields included in the body, as the
  seed says) for ``c``/``r``/``u``; a tombstone (null value) for ``d``, keyed by the before-image;
- an update that changes the primary key first writes a tombstone for the OLD key, then the new row
  (so the old key disappears from the compacted topic);
- truncate (``Op.TRUNCATE``) writes NOTHING: an upsert topic cannot express "delete every key"
  without knowing the keys; the event is counted in ``metrics["skipped"]``;
- ``-U`` never reaches Kafka (an update is one record for the after-row);
- partition: by key, murmur2 as Kafka's Java client (producer ``partitioner=murmur2_random``);
- headers ``namespace`` (empty), ``schemaName`` (database), ``tableName`` (UTF-8) with
  ``sink.add-tableId-to-header-enabled``;
- a table without a primary key is refused (:class:`MissingPrimaryKeyError`) before any record of the
  batch is produced.

Delivery guarantees, the offsets topic with the source position (in the same Kafka transaction under
``exactly-once``), fencing, topic creation and delivery errors are the Kafka pipeline sink's
(:class:`~changelake.connectors.kafka.sink.KafkaPipelineSink`, which this class extends).

Example::

    sink = UpsertKafkaIngestionSink({"properties.bootstrap.servers": "127.0.0.1:9092",
                                     "sink.delivery-guarantee": "exactly-once"}, pipeline_name="p1")
    with sink:
        start = sink.stored_position()          # None on first run
        sink.write(events)                      # events: list[DataChangeEvent]
        sink.commit({"file": "mysql-bin.000003", "pos": 4711})

Read the topic back with the upsert-kafka SQL source (``create_source``) declared with the table's
columns, its PRIMARY KEY and ``'key.format' = 'json', 'value.format' = 'json'``.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, NamedTuple, Sequence

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import UPSERT, RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.kafka.sink import KafkaPipelineSink
from changelake.connectors.upsert_kafka.ingestion_options import IDENTIFIER, UpsertKafkaIngestionOptions
from changelake.formats import json_values

__all__ = [
    "UpsertKafkaIngestionSink",
    "UpsertRecord",
    "MissingPrimaryKeyError",
    "TOPIC_CONFIG",
    "encode_upsert_key",
    "validate_event_primary_key",
]

log = logging.getLogger(__name__)

#: config of the topics this sink creates (upsert topics are compacted: the last value per key wins)
TOPIC_CONFIG = {"cleanup.policy": "compact"}


class MissingPrimaryKeyError(OptionValidationError):
    """A table without a primary key (or without a schema) reached the upsert-kafka sink.

    An upsert topic is keyed by the primary key, so every table needs one. Declare it in the
    pipeline YAML with a ``transform`` rule, e.g.
    ``transform: [{source-table: db.t, projection: \\*, primary-keys: id}]``, or add a PRIMARY KEY
    to the MySQL table.

    Attributes:
        table: the table (``db.table``, after routing).
    """

    def __init__(self, table: TableId, reason: str = "has no primary key") -> None:
        self.table = table
        super().__init__(
            f"table {table} {reason}: the '{IDENTIFIER}' sink writes one keyed record per primary key; add "
            f"'primary-keys' in a 'transform' rule (e.g. transform: [{{source-table: {table}, projection: \\*, "
            f"primary-keys: <col>[,<col>...]}}]) or a PRIMARY KEY to the table",
            option="transform.primary-keys",
        )


class UpsertRecord(NamedTuple):
    """One Kafka record: ``topic``, ``key`` bytes, ``value`` bytes or None (tombstone), ``headers``."""

    topic: str
    key: bytes
    value: bytes | None
    headers: list[tuple[str, bytes]]


def validate_event_primary_key(event: DataChangeEvent) -> Schema:
    """The event's schema, which must have a primary key (truncate events need none).

    Raises:
        MissingPrimaryKeyError: naming the table, when the schema is missing or has no primary key.
    """
    if event.schema is None:
        raise MissingPrimaryKeyError(event.table, "has no schema (its primary key is unknown)")
    if not event.schema.primary_key:
        raise MissingPrimaryKeyError(event.table)
    return event.schema


def encode_upsert_key(schema: Schema, row: Mapping[str, Any]) -> bytes:
    """Key bytes of ``row``: compact JSON ``{"<pk1>":v1,...}`` in primary-key order (UTF-8).

    Values as Flink's JSON encoders (DECIMAL a plain number, DATETIME ``yyyy-MM-dd HH:mm:ss``...), so the
    bytes equal what Flink's upsert-kafka sink with ``'key.format' = 'json'`` writes and murmur2 places
    the key on the same partition.

    Raises:
        SchemaError: a primary-key column is not in ``schema``.
        EncodeError: a value does not suit its column type (names the column).
    """
    obj = {
        name: json_values.to_json_value(row.get(name), schema.column(name).type, name)
        for name in schema.primary_key
    }
    return json_values.dumps(obj)


class UpsertKafkaIngestionSink(KafkaPipelineSink):
    """Writes change events to upsert (keyed, compacted) topics, and stores source positions.

    Same interface as :class:`~changelake.connectors.kafka.sink.KafkaPipelineSink`: :meth:`open`,
    :meth:`write`, :meth:`commit`, :meth:`abort`, :meth:`close`, :meth:`stored_position` (see the
    module docstring for the records).

    Args:
        options: raw YAML sink options (validated here; ``type``/``name`` may be present), or
            :class:`UpsertKafkaIngestionOptions`.
        pipeline_name: names the position record in the offsets topic and the default
            ``transactional.id`` (``changelake-<name>``).

    Raises:
        OptionValidationError: invalid options (see :meth:`UpsertKafkaIngestionOptions.from_options`).

    The constructor does no I/O; :meth:`open` connects. Not thread-safe.
    """

    #: Row kinds this sink accepts, as Flink's upsert-kafka sink (``EncodingFormatWrapper``): +I, +U, -D.
    changelog_mode: frozenset[RowKind] = UPSERT

    def __init__(self, options: Mapping[str, Any] | UpsertKafkaIngestionOptions, pipeline_name: str) -> None:
        if not isinstance(options, UpsertKafkaIngestionOptions):
            options = UpsertKafkaIngestionOptions.from_options(options, pipeline_name)
        super().__init__(options.kafka, pipeline_name)
        self.ingestion_options = options

    def open(self) -> None:
        """Connect as :meth:`KafkaPipelineSink.open`; warns once about ignored ``aliyun.kafka.*`` keys."""
        if self._producer is None and self.ingestion_options.ignored:
            log.warning(
                "upsert-kafka sink of pipeline %r ignores %s (ApsaraMQ client options); configure the Kafka client "
                "with properties.* instead", self.pipeline_name, ", ".join(self.ingestion_options.ignored),
            )
        super().open()

    def write(self, events: Sequence[DataChangeEvent]) -> None:
        """Send the records of ``events`` in order (see the module docstring for the layout).

        Every table of the batch is checked for a primary key BEFORE any record is produced, so a
        refused batch leaves nothing behind. Under exactly-once the records join the open
        transaction and become visible at :meth:`commit`.

        Raises:
            MissingPrimaryKeyError: an event's table has no primary key (or no schema).
            SinkFlushError: an earlier record failed delivery, or the producer queue stays full.
            TopicCreationError: a topic cannot be created.
            EncodeError: a value does not suit its column type.
        """
        for event in events:
            if event.op is not Op.TRUNCATE:
                validate_event_primary_key(event)
        super().write(events)

    def records(self, event: DataChangeEvent) -> list[UpsertRecord]:
        """The Kafka records of one event, without I/O (see the module docstring).

        c/r -> [value]; u -> [value], or [tombstone(old key), value] when the key changed;
        d -> [tombstone]; t -> [].

        Raises:
            MissingPrimaryKeyError: the table has no primary key (or no schema).
            EncodeError: a value does not suit its column type.
        """
        if event.op is Op.TRUNCATE:
            return []
        schema = validate_event_primary_key(event)
        topic = self.topic_for(event.table)
        headers = self._headers(event.table)
        if event.op is Op.DELETE:
            return [UpsertRecord(topic, encode_upsert_key(schema, event.before or {}), None, headers)]
        after = dict(event.after or {})
        key = encode_upsert_key(schema, after)
        out: list[UpsertRecord] = []
        if event.op is Op.UPDATE and event.before is not None:
            old_key = encode_upsert_key(schema, event.before)
            if old_key != key:
                out.append(UpsertRecord(topic, old_key, None, headers))
        value = self._format(event).encode(ChangelogRow.insert(after, event.table))
        out.append(UpsertRecord(topic, key, value, headers))
        return out

    def _records(self, event: DataChangeEvent) -> list[tuple[str, bytes, bytes | None, list[tuple[str, bytes]]]]:
        # KafkaPipelineSink.write's hook: records of one event, creating the (compacted) topic first.
        records = self.records(event)
        if not records:
            self.metrics["skipped"] += 1
            return []
        if self.options.auto_create_topics and self._creator is not None:
            self._creator.ensure([records[0].topic], TOPIC_CONFIG)
        out: list[tuple[str, bytes, bytes | None, list[tuple[str, bytes]]]] = list(records)
        return out
