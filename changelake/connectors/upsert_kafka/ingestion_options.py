"""Options of the upsert-kafka INGESTION sink (pipeline YAML ``sink: {type: upsert-kafka, ...}``).

Keys as Alibaba's "Upsert Kafka — data ingestion" page (the seed) lists them:

- ``type`` (``upsert-kafka``) and ``name`` (display name);
- ``properties.bootstrap.servers`` (required) and ``properties.*`` (producer config, prefix stripped);
- ``sink.delivery-guarantee``: ``none`` | ``at-least-once`` (default) | ``exactly-once``;
- ``sink.add-tableId-to-header-enabled``: headers ``namespace``/``schemaName``/``tableName``.

changelake additions, shared with the Kafka pipeline sink (:mod:`changelake.connectors.kafka.sink_options`):
``sink.transactional-id-prefix``, ``sink.offsets-topic``, ``sink.topic.auto-create``,
``sink.topic.partitions``, ``sink.topic.replication-factor``, ``sink.flush.timeout``.

``aliyun.kafka.*`` (``accessKeyId``, ``accessKeySecret``, ``instanceId``, ``endpoint``,
``regionId``) configure Alibaba's ApsaraMQ client, which changelake does not have. They are
ACCEPTED AND IGNORED (so the seed's YAML runs unchanged against Apache Kafka); the sink logs a
warning naming the keys, never their values. To reach a secured cluster use ``properties.*``
(``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``). ApsaraMQ has no
idempotent or transactional writes, so there set ``properties.enable.idempotence: false`` and
``sink.delivery-guarantee: at-least-once`` or ``none``.

There is no ``value.format``/``key.format``/``partition.strategy``/``topic``: the record layout of
this sink is fixed (JSON key of the primary key, JSON value of the full row, murmur2 by key) and
the topic is the table's (after ``route``), see :mod:`changelake.connectors.upsert_kafka.ingestion`.

Example::

    opts = UpsertKafkaIngestionOptions.from_options(
        {"properties.bootstrap.servers": "127.0.0.1:9092", "sink.delivery-guarantee": "exactly-once"},
        pipeline_name="mysql-to-upsert-kafka",
    )
    opts.kafka.delivery_guarantee      # DeliveryGuarantee.EXACTLY_ONCE
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import PROPERTIES_PREFIX
from changelake.connectors.options import (
    ConfigOption,
    key,
    prefixed,
    validate_required_options,
    validate_unsupported_options,
)
from changelake.connectors.kafka.sink_options import (
    ADD_TABLE_ID_HEADER,
    BOOTSTRAP_SERVERS,
    AUTO_CREATE,
    DELIVERY_GUARANTEE,
    FLUSH_TIMEOUT,
    NAME,
    OFFSETS_TOPIC,
    TOPIC_PARTITIONS,
    TOPIC_REPLICATION,
    TRANSACTIONAL_ID_PREFIX,
    KafkaSinkOptions,
    KeyFormat,
    PartitionStrategy,
    ValueFormat,
)
from changelake.connectors.upsert_kafka.options import REFUSED_PROPERTIES
from changelake.connectors.upsert_kafka.partitioner import LIBRDKAFKA_PARTITIONER

__all__ = [
    "IDENTIFIER",
    "INGESTION_OPTIONS",
    "IGNORED_PREFIX",
    "UpsertKafkaIngestionOptions",
    "validate_partitioner",
    "validate_properties",
]

#: The ``type`` of the YAML sink block.
IDENTIFIER = "upsert-kafka"
#: Alibaba ApsaraMQ options: accepted and ignored (see the module docstring).
IGNORED_PREFIX = "aliyun.kafka."
#: librdkafka partitioners that place a non-null key as Kafka's Java client does (murmur2).
MURMUR2_PARTITIONERS = (LIBRDKAFKA_PARTITIONER, "murmur2")

TYPE = key("type").string_type().default_value(IDENTIFIER).with_description("Connector identifier, 'upsert-kafka'.")

INGESTION_OPTIONS: tuple[ConfigOption[Any], ...] = (
    TYPE, NAME, DELIVERY_GUARANTEE, ADD_TABLE_ID_HEADER, TRANSACTIONAL_ID_PREFIX, OFFSETS_TOPIC, AUTO_CREATE,
    TOPIC_PARTITIONS, TOPIC_REPLICATION, FLUSH_TIMEOUT,
)


def validate_properties(raw: Mapping[str, str]) -> None:
    """Refuse ``properties.*`` keys the connector manages itself (key/value (de)serializers, as the
    seed says). Raises OptionValidationError naming the key."""
    for key in REFUSED_PROPERTIES:
        if key in raw:
            raise OptionValidationError(
                f"'{key}' is not supported for '{IDENTIFIER}': the connector serializes keys and values itself",
                option=key,
            )


def validate_partitioner(properties: Mapping[str, str]) -> None:
    """``properties.partitioner`` may only be a murmur2 partitioner.

    Upsert topics are partitioned by key as Kafka's Java producer does (``murmur2``, Flink's
    upsert-kafka sink); another partitioner (e.g. librdkafka's default ``consistent_random``) would
    put a key on a different partition than Flink and break per-key order after a change.

    Raises:
        OptionValidationError naming the option and the value found.
    """
    value = properties.get("partitioner")
    if value is not None and value.strip() not in MURMUR2_PARTITIONERS:
        raise OptionValidationError(
            f"'properties.partitioner' = '{value}' is not supported for '{IDENTIFIER}': records are partitioned "
            f"by key with murmur2 as Kafka's Java client does; use one of {list(MURMUR2_PARTITIONERS)} or leave it unset",
            option="properties.partitioner",
        )


@dataclass(frozen=True)
class UpsertKafkaIngestionOptions:
    """Validated options of :class:`~changelake.connectors.upsert_kafka.ingestion.UpsertKafkaIngestionSink`.

    Attributes:
        kafka: the options of the underlying Kafka pipeline sink machinery, fixed to ``value.format =
            json`` (full row), ``key.format = json`` and ``partition.strategy = hash-by-key``
            (producer ``partitioner=murmur2_random``).
        ignored: the ``aliyun.kafka.*`` keys that were given and are ignored (sorted; no values).
    """

    kafka: KafkaSinkOptions
    ignored: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, raw: Mapping[str, Any], pipeline_name: str) -> "UpsertKafkaIngestionOptions":
        """Validate ``raw`` (option key -> string; ``type``/``name`` may be present) and build typed options.

        Order as Flink's FactoryHelper: unknown keys, required keys, values, cross-option rules.

        Raises:
            OptionValidationError: "Unsupported options found for 'upsert-kafka'." (listing the
                unsupported and the supported keys), a missing ``properties.bootstrap.servers``, a
                value that does not parse, a refused ``properties.*`` key, a non-murmur2
                ``properties.partitioner``, or a delivery-guarantee rule (exactly-once with
                ``properties.enable.idempotence=false``, ``properties.transactional.id``).
        """
        text = {str(k): ("" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))) for k, v in raw.items()}
        validate_unsupported_options(IDENTIFIER, text, INGESTION_OPTIONS, (PROPERTIES_PREFIX, IGNORED_PREFIX))
        validate_required_options(text, [BOOTSTRAP_SERVERS])
        if TYPE.get(text) != IDENTIFIER:
            raise OptionValidationError(f"Option 'type' must be '{IDENTIFIER}', got '{text['type']}'", option="type")
        validate_properties(text)
        props = prefixed(text, PROPERTIES_PREFIX)
        validate_partitioner(props)
        # The Kafka pipeline sink's own options and defaults, with its formats and partitioning
        # fixed to upsert-kafka's: JSON key and value, key-hashed partitions.
        kafka = KafkaSinkOptions.from_options(
            {
                **{k: v for k, v in text.items() if k not in ("type", "name") and not k.startswith(IGNORED_PREFIX)},
                "value.format": ValueFormat.JSON.value,
                "key.format": KeyFormat.JSON.value,
                "partition.strategy": PartitionStrategy.HASH_BY_KEY.value,
            },
            pipeline_name,
        )
        ignored = tuple(sorted(k for k in text if k.startswith(IGNORED_PREFIX)))
        return cls(kafka=kafka, ignored=ignored)
