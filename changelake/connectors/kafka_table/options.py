"""WITH options of Flink's plain ``kafka`` SQL connector, declared once and validated as Flink does.

Source of the option set and the messages: ``KafkaConnectorOptions`` and
``KafkaConnectorOptionsUtil`` / ``KafkaDynamicTableFactory`` of apache/flink-connector-kafka.
:func:`parse_options` is the only place where raw strings become typed values; it validates in
Flink's order: unknown keys, required keys, values, then rules across options (each a named
``validate_*`` function).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Mapping

from changelake.connectors.options import (
    ConfigOption,
    DeliveryGuarantee,
    ValueFieldsInclude,
    key,
    parse_partition_offsets,
    validate_required_options,
    validate_topic_or_pattern,
    validate_unsupported_options,
)
from changelake.connectors.options import validate_delivery_guarantee as _validate_delivery_guarantee
from changelake.changelog.schema import Schema
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import PROPERTIES_PREFIX

__all__ = [
    "IDENTIFIER",
    "OPTIONS",
    "DeliveryGuarantee",
    "KafkaTableOptions",
    "ScanBoundedMode",
    "ScanStartupMode",
    "SinkPartitioner",
    "ValueFieldsInclude",
    "parse_options",
    "parse_specific_offsets",
]

IDENTIFIER = "kafka"


class ScanStartupMode(enum.Enum):
    """``scan.startup.mode``: where a source starts reading."""

    EARLIEST_OFFSET = "earliest-offset"  # from the earliest offset possible
    LATEST_OFFSET = "latest-offset"  # from the end: only new records
    GROUP_OFFSETS = "group-offsets"  # from the consumer group's committed offsets
    TIMESTAMP = "timestamp"  # from 'scan.startup.timestamp-millis'
    SPECIFIC_OFFSETS = "specific-offsets"  # from 'scan.startup.specific-offsets'


class ScanBoundedMode(enum.Enum):
    """``scan.bounded.mode``: where a bounded source stops (exclusive end offsets)."""

    UNBOUNDED = "unbounded"
    LATEST_OFFSET = "latest-offset"  # the end offsets seen when the source opens
    GROUP_OFFSETS = "group-offsets"  # the committed offsets of the group
    TIMESTAMP = "timestamp"  # 'scan.bounded.timestamp-millis'
    SPECIFIC_OFFSETS = "specific-offsets"  # 'scan.bounded.specific-offsets'


class SinkPartitioner(enum.Enum):
    """``sink.partitioner``: how a sink picks the Kafka partition."""

    DEFAULT = "default"  # Kafka's default: murmur2 of the key bytes, or sticky without a key
    FIXED = "fixed"  # each sink subtask writes to one partition (changelake has subtask 0: partition 0)
    ROUND_ROBIN = "round-robin"  # partitions in turn, whatever the key


_DEFAULT_STARTUP = ScanStartupMode.GROUP_OFFSETS

CONNECTOR = key("connector").string_type().required().with_description("Must be 'kafka'.")
TOPIC = key("topic").string_type().no_default_value().with_description(
    "Topic name(s) to read from or write to; several separated by ';'.")
TOPIC_PATTERN = key("topic-pattern").string_type().no_default_value().with_description(
    "Java-style regex of topics to read from (source only); not with 'topic'.").for_scope("source")
BOOTSTRAP_SERVERS = key("properties.bootstrap.servers").string_type().required().with_description(
    "Comma-separated host:port list of Kafka brokers. Required.")
GROUP_ID = key("properties.group.id").string_type().no_default_value().with_description(
    "Consumer group id of the source (committed offsets, 'group-offsets').").for_scope("source")
FORMAT = key("format").string_type().no_default_value().with_description(
    "Format of the record value (json, csv, avro, raw, debezium-json, ...); same as 'value.format'.")
VALUE_FORMAT = key("value.format").string_type().no_default_value().with_description(
    "Format of the record value; set this or 'format', not both.")
KEY_FORMAT = key("key.format").string_type().no_default_value().with_description(
    "Format of the record key (insert-only formats only); needs 'key.fields'.")
KEY_FIELDS = key("key.fields").string_type().no_default_value().with_description(
    "';'-separated physical columns forming the record key, in key order.")
KEY_FIELDS_PREFIX = key("key.fields-prefix").string_type().no_default_value().with_description(
    "Prefix of key columns in the table schema, stripped in the key; needs EXCEPT_KEY.")
VALUE_FIELDS_INCLUDE = key("value.fields-include").enum_type(ValueFieldsInclude).default_value(
    ValueFieldsInclude.ALL).with_description("ALL (default) or EXCEPT_KEY: whether key columns are also in the value.")
STARTUP_MODE = key("scan.startup.mode").enum_type(ScanStartupMode).default_value(_DEFAULT_STARTUP).with_description(
    "earliest-offset, latest-offset, group-offsets (default), timestamp, specific-offsets.").for_scope("source")
STARTUP_SPECIFIC_OFFSETS = key("scan.startup.specific-offsets").string_type().no_default_value().with_description(
    "'partition:0,offset:42;partition:1,offset:300' for specific-offsets.").for_scope("source")
STARTUP_TIMESTAMP_MILLIS = key("scan.startup.timestamp-millis").long_type(minimum=0).no_default_value() \
    .with_description("Start timestamp in ms since epoch for the 'timestamp' mode.").with_unit("ms").for_scope("source")
BOUNDED_MODE = key("scan.bounded.mode").enum_type(ScanBoundedMode).default_value(ScanBoundedMode.UNBOUNDED) \
    .with_description("unbounded (default), latest-offset, group-offsets, timestamp, specific-offsets.") \
    .for_scope("source")
BOUNDED_SPECIFIC_OFFSETS = key("scan.bounded.specific-offsets").string_type().no_default_value().with_description(
    "End offsets (exclusive) for the 'specific-offsets' bounded mode.").for_scope("source")
BOUNDED_TIMESTAMP_MILLIS = key("scan.bounded.timestamp-millis").long_type(minimum=0).no_default_value() \
    .with_description("End timestamp in ms since epoch for the 'timestamp' bounded mode.").with_unit("ms") \
    .for_scope("source")
DISCOVERY_INTERVAL = key("scan.topic-partition-discovery.interval").duration_type().no_default_value() \
    .with_description("Partition discovery interval (accepted; partitions are read at open).").for_scope("source")
SCAN_PARALLELISM = key("scan.parallelism").int_type(minimum=1).no_default_value().with_description(
    "Source parallelism (accepted; changelake runs one reader).").for_scope("source")
SINK_PARTITIONER = key("sink.partitioner").enum_type(SinkPartitioner).default_value(SinkPartitioner.DEFAULT) \
    .with_description("default, fixed or round-robin.").for_scope("sink")
DELIVERY_GUARANTEE = key("sink.delivery-guarantee").enum_type(DeliveryGuarantee).default_value(
    DeliveryGuarantee.AT_LEAST_ONCE).with_description(
    "none, at-least-once (default) or exactly-once (Kafka transactions).").for_scope("sink")
TRANSACTIONAL_ID_PREFIX = key("sink.transactional-id-prefix").string_type().no_default_value().with_description(
    "Prefix of the producer's transactional.id; required for exactly-once.").for_scope("sink")
SINK_PARALLELISM = key("sink.parallelism").int_type(minimum=1).no_default_value().with_description(
    "Sink parallelism (accepted; changelake runs one writer).").for_scope("sink")

#: Every declared option, once (Flink's ``KafkaConnectorOptions``).
OPTIONS: tuple[ConfigOption[Any], ...] = (
    CONNECTOR, TOPIC, TOPIC_PATTERN, BOOTSTRAP_SERVERS, GROUP_ID, FORMAT, VALUE_FORMAT, KEY_FORMAT, KEY_FIELDS,
    KEY_FIELDS_PREFIX, VALUE_FIELDS_INCLUDE, STARTUP_MODE, STARTUP_SPECIFIC_OFFSETS, STARTUP_TIMESTAMP_MILLIS,
    BOUNDED_MODE, BOUNDED_SPECIFIC_OFFSETS, BOUNDED_TIMESTAMP_MILLIS, DISCOVERY_INTERVAL, SCAN_PARALLELISM,
    SINK_PARTITIONER, DELIVERY_GUARANTEE, TRANSACTIONAL_ID_PREFIX, SINK_PARALLELISM,
)


@dataclass(frozen=True)
class KafkaTableOptions:
    """The typed options of one ``kafka`` table (built by :func:`parse_options` only).

    Attributes:
        topics: topic names ('topic' split at ';'); empty when 'topic-pattern' is used.
        topic_pattern: regex of source topics, or None.
        properties: Kafka client config (``properties.*`` with the prefix stripped).
        value_format: identifier of the value format (from 'value.format' or 'format').
        value_format_options: the value format's options, prefix ('value.<fmt>.' or '<fmt>.') stripped.
        key_format: identifier of the key format, or None (records without key).
        key_format_options: the key format's options, prefix 'key.<fmt>.' stripped.
        key_fields: table columns forming the key, in key order (with any prefix).
        key_fields_prefix: prefix of key columns in the schema, or None.
        value_fields_include: ALL or EXCEPT_KEY.
        scan_startup_mode / scan_startup_specific_offsets (partition -> offset) /
        scan_startup_timestamp_millis (ms since epoch): where a source starts.
        scan_bounded_mode / scan_bounded_specific_offsets / scan_bounded_timestamp_millis: where
            a bounded source stops (end offsets exclusive).
        sink_partitioner: default, fixed or round-robin.
        sink_delivery_guarantee: none, at-least-once, exactly-once.
        sink_transactional_id_prefix: transactional.id prefix (exactly-once).
        sink_parallelism / scan_parallelism: accepted for compatibility, not used (one writer/reader).
        scan_topic_partition_discovery_interval: accepted, not used.
    """

    topics: tuple[str, ...]
    topic_pattern: str | None
    properties: Mapping[str, str]
    value_format: str
    value_format_options: Mapping[str, str] = field(default_factory=dict)
    key_format: str | None = None
    key_format_options: Mapping[str, str] = field(default_factory=dict)
    key_fields: tuple[str, ...] = ()
    key_fields_prefix: str | None = None
    value_fields_include: ValueFieldsInclude = ValueFieldsInclude.ALL
    scan_startup_mode: ScanStartupMode = _DEFAULT_STARTUP
    scan_startup_specific_offsets: Mapping[int, int] | None = None
    scan_startup_timestamp_millis: int | None = None
    scan_bounded_mode: ScanBoundedMode = ScanBoundedMode.UNBOUNDED
    scan_bounded_specific_offsets: Mapping[int, int] | None = None
    scan_bounded_timestamp_millis: int | None = None
    sink_partitioner: SinkPartitioner = SinkPartitioner.DEFAULT
    sink_delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE
    sink_transactional_id_prefix: str | None = None
    sink_parallelism: int | None = None
    scan_parallelism: int | None = None
    scan_topic_partition_discovery_interval: timedelta | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self.properties["bootstrap.servers"]

    @property
    def group_id(self) -> str | None:
        return self.properties.get("group.id")

    @property
    def topic(self) -> str:
        """The single topic of a sink. Raises OptionValidationError if there is not exactly one."""
        if len(self.topics) != 1:
            raise OptionValidationError(
                f"The 'kafka' sink writes to exactly one topic; 'topic' is {';'.join(self.topics) or 'not set'}"
                + (f" and 'topic-pattern' is '{self.topic_pattern}'" if self.topic_pattern else ""),
                option="topic",
            )
        return self.topics[0]

    @property
    def key_names(self) -> tuple[str, ...]:
        """Key field names inside the key format (prefix stripped)."""
        p = self.key_fields_prefix or ""
        return tuple(f[len(p):] for f in self.key_fields)

    def __repr__(self) -> str:  # never print client properties (may hold sasl.password)
        return (
            f"KafkaTableOptions(topics={self.topics!r}, value_format={self.value_format!r}, "
            f"key_format={self.key_format!r}, key_fields={self.key_fields!r}, "
            f"scan_startup_mode={self.scan_startup_mode.value!r}, scan_bounded_mode={self.scan_bounded_mode.value!r}, "
            f"sink_delivery_guarantee={self.sink_delivery_guarantee.value!r})"
        )


# -- value parsers --------------------------------------------------------------------------------


def _partitioner(raw: Mapping[str, str]) -> SinkPartitioner:
    """``sink.partitioner`` with Flink's message for an unknown partitioner."""
    try:
        return SINK_PARTITIONER.get(raw)  # type: ignore[return-value]
    except OptionValidationError:
        text = raw[SINK_PARTITIONER.key]
        raise OptionValidationError(
            f"Could not find and instantiate partitioner class '{text}' for 'sink.partitioner'. "
            f"Expected one of: [{', '.join(str(m.value) for m in SinkPartitioner)}]",
            option=SINK_PARTITIONER.key,
        ) from None


def parse_specific_offsets(text: str, key: str) -> dict[int, int]:
    """Parse Flink's ``partition:0,offset:42;partition:1,offset:300`` into {partition: offset}
    (:func:`changelake.connectors.options.parse_partition_offsets`).

    Raises:
        OptionValidationError: with Flink's message quoting the value.
    """
    try:
        return parse_partition_offsets(text, key)
    except ValueError as exc:
        raise OptionValidationError(str(exc), option=key) from None


# -- validation -----------------------------------------------------------------------------------
def _format_of(raw: Mapping[str, str]) -> str | None:
    return raw.get("value.format") or raw.get("format")


def validate_unknown_keys(raw: Mapping[str, str]) -> None:
    """Fail on keys that are neither declared nor under ``properties.`` or a chosen format's prefix.

    Message as Flink's ``FactoryUtil``: "Unsupported options found for 'kafka'." with the
    unsupported and the supported keys.
    """
    prefixes = [PROPERTIES_PREFIX]
    if raw.get("format"):
        prefixes.append(f"{raw['format']}.")
    if raw.get("value.format"):
        prefixes.append(f"value.{raw['value.format']}.")
    if raw.get("key.format"):
        prefixes.append(f"key.{raw['key.format']}.")
    validate_unsupported_options(IDENTIFIER, raw, OPTIONS, prefixes)


def validate_required(raw: Mapping[str, str]) -> None:
    """'properties.bootstrap.servers' and one of 'format'/'value.format' (FactoryUtil's message)."""
    validate_required_options(
        {**raw, VALUE_FORMAT.key: _format_of(raw) or ""}, [BOOTSTRAP_SERVERS, VALUE_FORMAT]
    )
    if raw.get("format") and raw.get("value.format") and raw["format"] != raw["value.format"]:
        raise OptionValidationError(
            f"Option 'format' and 'value.format' shouldn't be set together (got '{raw['format']}' and "
            f"'{raw['value.format']}'); 'format' is a short form of 'value.format'.",
            option="format",
        )


def validate_topics(opts: KafkaTableOptions, *, for_sink: bool) -> None:
    """Exactly one of 'topic'/'topic-pattern' (Flink's messages); a sink needs one topic."""
    validate_topic_or_pattern(bool(opts.topics), bool(opts.topic_pattern))
    if for_sink:
        _ = opts.topic


def validate_key_fields(opts: KafkaTableOptions, schema: Schema | None) -> None:
    """The key rules of ``KafkaConnectorOptionsUtil.createKeyFormatProjection`` (Flink's messages)."""
    if opts.key_format and not opts.key_fields:
        raise OptionValidationError(
            "A key format 'key.format' requires the declaration of one or more of key fields using 'key.fields'.",
            option="key.fields",
        )
    if opts.key_fields and not opts.key_format:
        raise OptionValidationError(
            "The option 'key.fields' can only be declared if a key format is defined using 'key.format'.",
            option="key.fields",
        )
    prefix = opts.key_fields_prefix
    if prefix and opts.value_fields_include is ValueFieldsInclude.ALL:
        raise OptionValidationError(
            "A key prefix is not allowed when option 'value.fields-include' is set to 'ALL'. "
            "Set it to 'EXCEPT_KEY' instead to avoid field overlaps.",
            option="key.fields-prefix",
        )
    for f in opts.key_fields:
        if prefix and not f.startswith(prefix):
            raise OptionValidationError(
                f"All fields in 'key.fields' must be prefixed with '{prefix}' when option 'key.fields-prefix' "
                f"is set but field '{f}' is not prefixed.",
                option="key.fields",
            )
        if schema is not None and f not in schema:
            raise OptionValidationError(
                f"Could not find the field '{f}' in the table schema for usage in the key format. A key field "
                f"must be a regular, physical column. The following columns can be selected in the 'key.fields' "
                f"option:\n{schema.names}",
                option="key.fields",
            )


def validate_scan(opts: KafkaTableOptions) -> None:
    """Startup/bounded modes that need a value have it; specific offsets need a single topic."""
    for what, mode, ts, offs in (
        ("startup", opts.scan_startup_mode.value, opts.scan_startup_timestamp_millis, opts.scan_startup_specific_offsets),
        ("bounded", opts.scan_bounded_mode.value, opts.scan_bounded_timestamp_millis, opts.scan_bounded_specific_offsets),
    ):
        if mode == "timestamp" and ts is None:
            raise OptionValidationError(
                f"'scan.{what}.timestamp-millis' is required in 'timestamp' {what} mode but missing.",
                option=f"scan.{what}.timestamp-millis",
            )
        if mode == "specific-offsets":
            if offs is None:
                raise OptionValidationError(
                    f"'scan.{what}.specific-offsets' is required in 'specific-offsets' {what} mode but missing.",
                    option=f"scan.{what}.specific-offsets",
                )
            if len(opts.topics) != 1:
                raise OptionValidationError(
                    "Currently Kafka source only supports specific offset for single topic.",
                    option=f"scan.{what}.specific-offsets",
                )


def validate_delivery_guarantee(opts: KafkaTableOptions) -> None:
    """exactly-once needs 'sink.transactional-id-prefix' (``KafkaConnectorOptionsUtil``'s message)."""
    _validate_delivery_guarantee(opts.sink_delivery_guarantee, opts.sink_transactional_id_prefix)


def parse_options(raw: Mapping[str, Any], schema: Schema | None = None, *, for_sink: bool = False) -> KafkaTableOptions:
    """Validate and type the WITH options of a ``kafka`` table.

    Args:
        raw: option key -> value (values converted with ``str``).
        schema: the table schema, to check 'key.fields' (None skips that check).
        for_sink: apply the sink-only rules (a single topic).

    Raises:
        OptionValidationError: unknown keys (listing the supported ones), missing required keys,
            bad values, or broken cross-option rules; ``option`` names the key. Never quotes
            ``properties.*`` values.
    """
    raw = {str(k): str(v) for k, v in raw.items() if v is not None}
    if raw.get("connector", IDENTIFIER) != IDENTIFIER:
        raise OptionValidationError(
            f"Option 'connector' must be '{IDENTIFIER}' for this factory, but is '{raw['connector']}'", option="connector"
        )
    validate_unknown_keys(raw)
    validate_required(raw)
    value_format = _format_of(raw)
    assert value_format is not None
    if raw.get("value.format"):
        value_prefix = f"value.{value_format}."
    else:
        value_prefix = f"{value_format}."
    key_format = raw.get("key.format") or None
    key_prefix = f"key.{key_format}." if key_format else None
    opts = KafkaTableOptions(
        topics=tuple(t.strip() for t in raw.get("topic", "").split(";") if t.strip()),
        topic_pattern=raw.get("topic-pattern") or None,
        properties={k[len(PROPERTIES_PREFIX):]: v for k, v in raw.items() if k.startswith(PROPERTIES_PREFIX)},
        value_format=value_format,
        value_format_options={k[len(value_prefix):]: v for k, v in raw.items() if k.startswith(value_prefix)},
        key_format=key_format,
        key_format_options=(
            {k[len(key_prefix):]: v for k, v in raw.items() if k.startswith(key_prefix)} if key_prefix else {}
        ),
        key_fields=tuple(f.strip() for f in raw.get("key.fields", "").split(";") if f.strip()),
        key_fields_prefix=raw.get("key.fields-prefix") or None,
        value_fields_include=VALUE_FIELDS_INCLUDE.value(raw),
        scan_startup_mode=STARTUP_MODE.value(raw),
        scan_startup_specific_offsets=(
            parse_specific_offsets(raw["scan.startup.specific-offsets"], "scan.startup.specific-offsets")
            if "scan.startup.specific-offsets" in raw
            else None
        ),
        scan_startup_timestamp_millis=STARTUP_TIMESTAMP_MILLIS.get(raw),
        scan_bounded_mode=BOUNDED_MODE.value(raw),
        scan_bounded_specific_offsets=(
            parse_specific_offsets(raw["scan.bounded.specific-offsets"], "scan.bounded.specific-offsets")
            if "scan.bounded.specific-offsets" in raw
            else None
        ),
        scan_bounded_timestamp_millis=BOUNDED_TIMESTAMP_MILLIS.get(raw),
        sink_partitioner=_partitioner(raw),
        sink_delivery_guarantee=DELIVERY_GUARANTEE.value(raw),
        sink_transactional_id_prefix=raw.get("sink.transactional-id-prefix") or None,
        sink_parallelism=SINK_PARALLELISM.get(raw),
        scan_parallelism=SCAN_PARALLELISM.get(raw),
        scan_topic_partition_discovery_interval=DISCOVERY_INTERVAL.get(raw),
    )
    validate_topics(opts, for_sink=for_sink)
    validate_key_fields(opts, schema)
    validate_scan(opts)
    if for_sink:
        validate_delivery_guarantee(opts)
    return opts
