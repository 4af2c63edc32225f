"""Options of the Kafka pipeline sink (``sink: {type: kafka, ...}``), as Flink CDC's KafkaDataSinkOptions.

Flink CDC options, spelled verbatim: ``properties.*``, ``value.format``, ``key.format``,
``partition.strategy``, ``topic``, ``sink.tableId-to-topic.mapping``,
``sink.add-tableId-to-header-enabled``, ``sink.custom-header``, ``sink.delivery-guarantee`` and the
format options ``<value.format>.*`` / ``<key.format>.*`` (e.g. ``debezium-json.include-schema.enabled``).

changelake additions (Flink CDC has no equivalent): ``sink.transactional-id-prefix``,
``sink.offsets-topic``, ``sink.topic.auto-create``, ``sink.topic.partitions``,
``sink.topic.replication-factor``, ``sink.flush.timeout``, ``sink.schema-topic`` (the compacted topic
of table schemas named by each record's ``changelake.schema.id`` header, see
:mod:`changelake.connectors.kafka.schemas`; empty turns the headers off).

Example::

    opts = KafkaSinkOptions.from_options(
        {"properties.bootstrap.servers": "127.0.0.1:9092", "partition.strategy": "hash-by-key"},
        pipeline_name="mysql-to-kafka",
    )
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Mapping

from changelake.connectors.options import DeliveryGuarantee
from changelake.changelog.selectors import SelectorError, Selectors, split_unescaped
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import PROPERTIES_PREFIX
from changelake.formats.json_values import KeyFormat
from changelake.connectors.options import (
    ConfigOption,
    key,
    prefixed,
    validate_required_options,
    validate_unsupported_options,
)

__all__ = [
    "IDENTIFIER",
    "ValueFormat",
    "KeyFormat",
    "PartitionStrategy",
    "DeliveryGuarantee",
    "KafkaSinkOptions",
    "SINK_OPTIONS",
    "parse_topic_mapping",
    "parse_custom_headers",
]

IDENTIFIER = "kafka"


class ValueFormat(enum.Enum):
    """``value.format``: how the record value is encoded (Flink CDC's JsonSerializationType + json)."""

    DEBEZIUM_JSON = "debezium-json"
    CANAL_JSON = "canal-json"
    JSON = "json"  # after-row for c/r/u, tombstone for d (an upsert topic)


class PartitionStrategy(enum.Enum):
    """``partition.strategy`` (Flink CDC PartitionStrategy)."""

    ALL_TO_ZERO = "all-to-zero"  # every record to partition 0
    HASH_BY_KEY = "hash-by-key"  # murmur2(key bytes) as Kafka's Java client


BOOTSTRAP_SERVERS = key(PROPERTIES_PREFIX + "bootstrap.servers").string_type().required().with_description(
    "Comma-separated host:port list of Kafka brokers.")
VALUE_FORMAT = key("value.format").enum_type(ValueFormat).default_value(ValueFormat.DEBEZIUM_JSON).with_description(
    "Format of record values: debezium-json (default), canal-json or json.")
KEY_FORMAT = key("key.format").enum_type(KeyFormat).default_value(KeyFormat.JSON).with_description(
    "Format of record keys: json (default) or csv.")
PARTITION_STRATEGY = key("partition.strategy").enum_type(PartitionStrategy).default_value(
    PartitionStrategy.ALL_TO_ZERO).with_description(
    "all-to-zero (default): partition 0; hash-by-key: murmur2 of the key bytes.")
TOPIC = key("topic").string_type().no_default_value().with_description(
    "If set, every table is written to this one topic.")
TABLE_MAPPING = key("sink.tableId-to-topic.mapping").string_type().no_default_value().with_description(
    "'selector:topic;selector:topic'; the first matching selector names the topic.")
ADD_TABLE_ID_HEADER = key("sink.add-tableId-to-header-enabled").bool_type().default_value(False).with_description(
    "Add headers namespace, schemaName and tableName (UTF-8) to every record.")
CUSTOM_HEADER = key("sink.custom-header").string_type().default_value("").with_description(
    "'k1:v1;k2:v2' headers added to every record.")
DELIVERY_GUARANTEE = key("sink.delivery-guarantee").enum_type(DeliveryGuarantee).default_value(
    DeliveryGuarantee.AT_LEAST_ONCE).with_description("none, at-least-once (default) or exactly-once.")
TRANSACTIONAL_ID_PREFIX = key("sink.transactional-id-prefix").string_type().no_default_value().with_description(
    "transactional.id of the exactly-once producer; default 'changelake-<pipeline name>'. Must be unique per "
    "pipeline.").from_origin("changelake")
OFFSETS_TOPIC = key("sink.offsets-topic").string_type().default_value("changelake-offsets").with_description(
    "Compacted topic holding the source position per pipeline name.").from_origin("changelake")
SCHEMA_TOPIC = key("sink.schema-topic").string_type().default_value("changelake-schemas").with_description(
    "Compacted topic of table schemas; each record names its schema in the header 'changelake.schema.id' "
    "(payload unchanged). Empty: no schema headers.").from_origin("changelake")
AUTO_CREATE = key("sink.topic.auto-create").bool_type().default_value(True).with_description(
    "Create missing topics with the AdminClient.").from_origin("changelake")
TOPIC_PARTITIONS = key("sink.topic.partitions").int_type(minimum=1).default_value(1).with_description(
    "Partitions of topics the sink creates.").from_origin("changelake")
TOPIC_REPLICATION = key("sink.topic.replication-factor").int_type(minimum=1).default_value(1).with_description(
    "Replication factor of topics the sink creates.").from_origin("changelake")
FLUSH_TIMEOUT = key("sink.flush.timeout").duration_type().default_value(timedelta(seconds=60)).with_description(
    "How long flush/commit waits for acknowledgements before failing.").from_origin("changelake")
TOPIC_PREFIX = key("topic.prefix").string_type().no_default_value().with_description(
    "Debezium's topic prefix of the transaction and heartbeat topics; default the pipeline name.").from_origin("debezium")
TOPIC_TRANSACTION = key("topic.transaction").string_type().default_value("transaction").with_description(
    "Debezium's: the transaction metadata topic is '<topic.prefix>.<topic.transaction>' (source option "
    "'provide.transaction.metadata').").from_origin("debezium")
TOPIC_HEARTBEAT_PREFIX = key("topic.heartbeat.prefix").string_type().default_value("__debezium-heartbeat").with_description(
    "Debezium's: heartbeat records (source option 'heartbeat.interval.ms') go to "
    "'<topic.heartbeat.prefix>.<topic.prefix>'.").from_origin("debezium")
# keys of the YAML block itself (Flink CDC strips them before the factory sees the options)
TYPE = key("type").string_type().default_value(IDENTIFIER).with_description("Connector identifier, 'kafka'.")
NAME = key("name").string_type().no_default_value().with_description("Display name of the sink.")

SINK_OPTIONS: tuple[ConfigOption[Any], ...] = (
    VALUE_FORMAT, KEY_FORMAT, PARTITION_STRATEGY, TOPIC, TABLE_MAPPING, ADD_TABLE_ID_HEADER, CUSTOM_HEADER,
    DELIVERY_GUARANTEE, TRANSACTIONAL_ID_PREFIX, OFFSETS_TOPIC, SCHEMA_TOPIC, AUTO_CREATE, TOPIC_PARTITIONS, TOPIC_REPLICATION,
    FLUSH_TIMEOUT, TOPIC_PREFIX, TOPIC_TRANSACTION, TOPIC_HEARTBEAT_PREFIX, TYPE, NAME,
)


def parse_topic_mapping(text: str | None) -> tuple[tuple[Selectors, str], ...]:
    """Parse ``sink.tableId-to-topic.mapping`` (``sel1:topicA;sel2:topicB``), keeping declaration order.

    As Flink CDC's ``KafkaSinkUtils.parseSelectorsToTopicMap``: pairs split on ``;``, selector and
    topic on ``:``; the selector uses the ``tables`` syntax.

    Raises:
        OptionValidationError: a pair is not ``selector:topic`` ("Please check your configuration of
            sink.tableId-to-topic.mapping") or a selector is invalid.
    """
    key = TABLE_MAPPING.key
    if not text:
        return ()
    out = []
    for pair in text.split(";"):
        parts = pair.split(":")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise OptionValidationError(f"Please check your configuration of {key}", option=key)
        try:
            selectors = Selectors.parse(parts[0].strip())
        except SelectorError as exc:
            raise OptionValidationError(f"Please check your configuration of {key}: {exc}", option=key) from exc
        out.append((selectors, parts[1].strip()))
    return tuple(out)


def parse_custom_headers(text: str | None) -> tuple[tuple[str, str], ...]:
    """Parse ``sink.custom-header`` (``k1:v1;k2:v2``; the code splits on ``;`` although Flink's doc
    shows ``,``). Raises OptionValidationError "sink.custom-header is malformed, please refer to the
    documents" as Flink CDC."""
    if not text:
        return ()
    out: dict[str, str] = {}
    for item in text.split(";"):
        parts = item.split(":")
        if len(parts) != 2:
            raise OptionValidationError(
                f"{CUSTOM_HEADER.key} is malformed, please refer to the documents", option=CUSTOM_HEADER.key
            )
        out[parts[0].strip()] = parts[1].strip()
    return tuple(out.items())


def default_transactional_id_prefix(pipeline_name: str) -> str:
    """``changelake-<pipeline name>`` with characters outside ``[A-Za-z0-9._-]`` replaced by ``-``."""
    return "changelake-" + re.sub(r"[^A-Za-z0-9._-]+", "-", pipeline_name).strip("-")


@dataclass(frozen=True)
class KafkaSinkOptions:
    """Validated, typed options of :class:`~changelake.connectors.kafka.sink.KafkaPipelineSink`.

    Attributes:
        properties: producer/admin client config from ``properties.*`` (prefix stripped).
        value_format, key_format, partition_strategy, delivery_guarantee: closed choices.
        topic: the one topic for every table, or None.
        topic_mapping: (selectors, topic) pairs in declaration order.
        add_table_id_to_header: add namespace/schemaName/tableName headers.
        custom_headers: extra (key, value) headers.
        value_format_options / key_format_options: ``<format>.*`` options, prefix stripped.
        transactional_id_prefix: transactional.id of the exactly-once producer.
        offsets_topic: compacted topic of source positions, keyed by pipeline name.
        schema_topic: compacted topic of table schemas keyed by fingerprint, or None (no schema
            headers).
        auto_create_topics, topic_partitions, topic_replication_factor: topic creation.
        flush_timeout: max wait for acknowledgements (flush, commit).
        pipeline_name: key of this pipeline's position record.
        transaction_topic: Debezium's ``<topic.prefix>.<topic.transaction>``.
        heartbeat_topic: Debezium's ``<topic.heartbeat.prefix>.<topic.prefix>``.
        topic_prefix: Debezium's ``topic.prefix`` (the heartbeat key's ``serverName``).
    """

    properties: Mapping[str, str] = field(repr=False)  # may hold secrets (sasl.password)
    pipeline_name: str = "changelake"
    value_format: ValueFormat = ValueFormat.DEBEZIUM_JSON
    key_format: KeyFormat = KeyFormat.JSON
    partition_strategy: PartitionStrategy = PartitionStrategy.ALL_TO_ZERO
    topic: str | None = None
    topic_mapping: tuple[tuple[Selectors, str], ...] = ()
    add_table_id_to_header: bool = False
    custom_headers: tuple[tuple[str, str], ...] = ()
    delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE
    transactional_id_prefix: str = ""
    offsets_topic: str = "changelake-offsets"
    schema_topic: str | None = "changelake-schemas"
    auto_create_topics: bool = True
    topic_partitions: int = 1
    topic_replication_factor: int = 1
    flush_timeout: timedelta = timedelta(seconds=60)
    value_format_options: Mapping[str, str] = field(default_factory=dict)
    key_format_options: Mapping[str, str] = field(default_factory=dict)
    topic_prefix: str = "changelake"
    transaction_topic: str = "changelake.transaction"
    heartbeat_topic: str = "__debezium-heartbeat.changelake"

    @property
    def bootstrap_servers(self) -> str:
        return self.properties["bootstrap.servers"]

    @classmethod
    def from_options(cls, raw: Mapping[str, Any], pipeline_name: str) -> "KafkaSinkOptions":
        """Validate ``raw`` (Flink CDC keys -> strings) and build typed options.

        Order as Flink: unknown keys, required keys, values, cross-option rules.

        Raises:
            OptionValidationError: "Unsupported options found for 'kafka'." (listing unsupported and
                supported keys), a missing ``properties.bootstrap.servers``, an unparsable value, or a
                cross-option rule (see :func:`validate_delivery_guarantee`).
        """
        raw = {str(k): ("" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))) for k, v in raw.items()}
        value_format = VALUE_FORMAT.get(raw)
        key_format = KEY_FORMAT.get(raw)
        assert value_format is not None and key_format is not None
        validate_unsupported_options(IDENTIFIER, raw, SINK_OPTIONS,
                                     (PROPERTIES_PREFIX, key_format.value + ".", value_format.value + "."))
        validate_required_options(raw, [BOOTSTRAP_SERVERS])
        if TYPE.get(raw) != IDENTIFIER:
            raise OptionValidationError(f"Option 'type' must be '{IDENTIFIER}', got '{raw['type']}'", option="type")
        props = prefixed(raw, PROPERTIES_PREFIX)
        prefix = TOPIC_PREFIX.get(raw) or pipeline_name
        opts = cls(
            properties=props,
            pipeline_name=pipeline_name,
            value_format=value_format,
            key_format=key_format,
            partition_strategy=PARTITION_STRATEGY.get(raw),  # type: ignore[arg-type]
            topic=TOPIC.get(raw) or None,
            topic_mapping=parse_topic_mapping(TABLE_MAPPING.get(raw)),
            add_table_id_to_header=bool(ADD_TABLE_ID_HEADER.get(raw)),
            custom_headers=parse_custom_headers(CUSTOM_HEADER.get(raw)),
            delivery_guarantee=DELIVERY_GUARANTEE.get(raw),  # type: ignore[arg-type]
            transactional_id_prefix=TRANSACTIONAL_ID_PREFIX.get(raw) or default_transactional_id_prefix(pipeline_name),
            offsets_topic=OFFSETS_TOPIC.get(raw) or "changelake-offsets",
            schema_topic=(SCHEMA_TOPIC.get(raw) or None) if SCHEMA_TOPIC.key in raw else SCHEMA_TOPIC.default,
            auto_create_topics=bool(AUTO_CREATE.get(raw)),
            topic_partitions=TOPIC_PARTITIONS.get(raw) or 1,
            topic_replication_factor=TOPIC_REPLICATION.get(raw) or 1,
            flush_timeout=FLUSH_TIMEOUT.get(raw) or timedelta(seconds=60),
            value_format_options=prefixed(raw, value_format.value + "."),
            key_format_options=prefixed(raw, key_format.value + ".") if key_format.value != value_format.value else {},
            topic_prefix=prefix,
            transaction_topic=f"{prefix}.{TOPIC_TRANSACTION.get(raw) or 'transaction'}",
            heartbeat_topic=f"{TOPIC_HEARTBEAT_PREFIX.get(raw) or '__debezium-heartbeat'}.{prefix}",
        )
        validate_delivery_guarantee(opts)
        return opts


def validate_delivery_guarantee(opts: KafkaSinkOptions) -> None:
    """Cross-option rules of ``sink.delivery-guarantee``.

    - exactly-once needs an idempotent producer: ``properties.enable.idempotence=false`` is refused
      (ApsaraMQ users, as the seed says, must use at-least-once or none);
    - ``properties.transactional.id`` is refused: the id comes from ``sink.transactional-id-prefix``.

    Raises:
        OptionValidationError naming the options and the value found.
    """
    key = DELIVERY_GUARANTEE.key
    if "transactional.id" in opts.properties:
        raise OptionValidationError(
            "'properties.transactional.id' is not supported; set 'sink.transactional-id-prefix' instead",
            option="properties.transactional.id",
        )
    if opts.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE:
        if opts.properties.get("enable.idempotence", "true").strip().lower() == "false":
            raise OptionValidationError(
                f"'{key}' = 'exactly-once' needs a transactional, idempotent producer, but "
                f"'properties.enable.idempotence' = 'false'; use 'at-least-once' or 'none' instead",
                option=key,
            )
        if not opts.transactional_id_prefix:
            raise OptionValidationError(
                f"'{key}' = 'exactly-once' requires 'sink.transactional-id-prefix'", option=key
            )
