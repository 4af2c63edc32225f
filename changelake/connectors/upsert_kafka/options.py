"""Every WITH option of the ``upsert-kafka`` connector, declared once, plus the typed result.

Keys, defaults and meanings follow Flink's ``KafkaConnectorOptions`` as used by
``UpsertKafkaDynamicTableFactory`` (flink-connector-kafka), with two documented differences
taken from Alibaba's upsert-kafka page (the seed): ``format`` is accepted as an alias of
``value.format``, and the source always starts at the earliest offset. Options whose
:attr:`ConfigOption.origin` is ``"changelake"`` are this project's own.

:data:`OPTIONS` is the single declaration; :func:`describe_options` renders it as a table.
:class:`UpsertKafkaOptions` is the typed, validated result built by
:mod:`changelake.connectors.upsert_kafka.factory` (the only place raw strings become types).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Mapping

from changelake.connectors.options import (
    ConfigOption,
    DeliveryGuarantee,
    ValueFieldsInclude,
    choices,
    parse_duration,
    parse_duration_option,
    parse_enum,
    parse_int,
    parse_partition_offsets,
)

__all__ = [
    "IDENTIFIER",
    "ValueFieldsInclude",
    "DeliveryGuarantee",
    "BoundedMode",
    "NullKeyMode",
    "ChangelogModeOption",
    "ConfigOption",
    "OPTIONS",
    "OPTIONS_BY_KEY",
    "REFUSED_PROPERTIES",
    "MAX_TRANSACTION_TIMEOUT_MS",
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "UpsertKafkaOptions",
    "parse_duration",
    "parse_specific_offsets",
    "describe_options",
]

#: The connector identifier (value of the ``connector`` option).
IDENTIFIER = "upsert-kafka"


class BoundedMode(enum.Enum):
    """Where a bounded source stops (Flink ``ScanBoundedMode``)."""

    UNBOUNDED = "unbounded"  #: never stops
    LATEST_OFFSET = "latest-offset"  #: the end offsets at open
    GROUP_OFFSETS = "group-offsets"  #: the committed offsets of ``properties.group.id``
    TIMESTAMP = "timestamp"  #: the first offset with a timestamp >= scan.bounded.timestamp-millis
    SPECIFIC_OFFSETS = "specific-offsets"  #: scan.bounded.specific-offsets per partition


class NullKeyMode(enum.Enum):
    """What the source does with a record whose key is null (changelake's own option)."""

    FAIL = "fail"  #: raise SourceError naming topic, partition and offset
    SKIP = "skip"  #: drop the record and count it (Flink drops it silently)


class ChangelogModeOption(enum.Enum):
    """The changelog the source emits (changelake's own option)."""

    UPSERT = "upsert"  #: +I / +U / -D, as the upsert-kafka source declares
    RETRACT = "retract"  #: -U(prev) before each +U, as Flink's ChangelogNormalize with update-before


#: Flink's ``transaction.timeout.ms`` default (1 h) exceeds the broker's default
#: ``transaction.max.timeout.ms`` (15 min); changelake defaults lower and refuses larger values.
MAX_TRANSACTION_TIMEOUT_MS = 900_000
DEFAULT_TRANSACTION_TIMEOUT_MS = 600_000

#: ``properties.*`` keys the connector manages itself (the seed: do not set the deserializers).
REFUSED_PROPERTIES = (
    "properties.key.deserializer",
    "properties.value.deserializer",
    "properties.key.serializer",
    "properties.value.serializer",
)


# -- parsers ------------------------------------------------------------------------------------

def parse_topics(text: str) -> tuple[str, ...]:
    """``a;b`` -> ``("a", "b")`` (empty entries dropped)."""
    return tuple(t.strip() for t in str(text).split(";") if t.strip())


def parse_specific_offsets(text: str, key: str = "scan.bounded.specific-offsets") -> dict[int, int]:
    """Parse ``partition:0,offset:42;partition:1,offset:300`` into ``{0: 42, 1: 300}``.

    Raises ValueError with Flink's message: "Invalid properties '<key>' should follow the format
    'partition:0,offset:42;partition:1,offset:300', but is '<text>'." (see
    :func:`changelake.connectors.options.parse_partition_offsets`).
    """
    return parse_partition_offsets(text, key)


# -- declaration ----------------------------------------------------------------------------------


OPTIONS: tuple[ConfigOption[Any], ...] = (
    # ---- connector --------------------------------------------------------------------------
    ConfigOption("connector", "String", None, None, "Must be 'upsert-kafka'.", required=True),
    ConfigOption("topic", "List<String>", None, None,
                 "Topic name(s), separated by ';'. With several topics a sink row names its topic in "
                 "metadata['topic']. Exclusive with 'topic-pattern'.", parse_topics),
    ConfigOption("topic-pattern", "String", None, None,
                 "Java/Python regex of topic names to read (full match); a sink row names its topic in "
                 "metadata['topic'], which must match. Exclusive with 'topic'."),
    ConfigOption("properties.bootstrap.servers", "String", None, None,
                 "Comma-separated host:port list of Kafka brokers.", required=True),
    # ---- formats ------------------------------------------------------------------------------
    ConfigOption("key.format", "String", None, None,
                 "Insert-only format of the message key (json, csv, avro, raw, ...); the key holds the "
                 "PRIMARY KEY columns in key order.", required=True),
    ConfigOption("value.format", "String", None, None,
                 "Insert-only format of the message value. Required unless 'format' is set.", required=True),
    ConfigOption("format", "String", None, None,
                 "Alias of 'value.format' (Alibaba's upsert-kafka); set only one of the two.", origin="alibaba"),
    ConfigOption("value.fields-include", choices(ValueFieldsInclude), ValueFieldsInclude.ALL, None,
                 "ALL: the value holds every column; EXCEPT_KEY: every column but the key columns.",
                 parse_enum(ValueFieldsInclude)),
    ConfigOption("key.fields-prefix", "String", None, None,
                 "Prefix of the key columns' names in the table, stripped in the key format. "
                 "Requires value.fields-include = EXCEPT_KEY."),
    # ---- sink ---------------------------------------------------------------------------------
    ConfigOption("sink.parallelism", "Integer", None, None,
                 "Parallelism of the sink (informational: one changelake sink writes from one process).",
                 parse_int(), scope="sink"),
    ConfigOption("sink.buffer-flush.max-rows", "Integer", 0, "rows",
                 "Max distinct keys buffered before a flush; 0 disables. Buffering needs both buffer "
                 "options > 0. Only the latest record per key is written.", parse_int(), scope="sink"),
    ConfigOption("sink.buffer-flush.interval", "Duration", timedelta(0), "ms",
                 "Flush the buffer this often ('1 s', '500ms', '2 min', '1 h'; a bare number is ms); 0 "
                 "disables. Buffering needs both buffer options > 0.", parse_duration_option, scope="sink"),
    ConfigOption("sink.delivery-guarantee", choices(DeliveryGuarantee), DeliveryGuarantee.AT_LEAST_ONCE, None,
                 "none: no wait; at-least-once: flush waits for acks and raises on errors; exactly-once: "
                 "Kafka transactions (needs sink.transactional-id-prefix).",
                 parse_enum(DeliveryGuarantee), scope="sink"),
    ConfigOption("sink.transactional-id-prefix", "String", None, None,
                 "Prefix of the producer's transactional.id with exactly-once (unique per job; at most "
                 "64000 bytes UTF-8).", scope="sink"),
    # ---- source -------------------------------------------------------------------------------
    ConfigOption("scan.bounded.mode", choices(BoundedMode), BoundedMode.UNBOUNDED, None,
                 "Where a bounded read stops; the source always starts at the earliest offset.",
                 parse_enum(BoundedMode), scope="source"),
    ConfigOption("scan.bounded.specific-offsets", "String", None, None,
                 "End offsets for specific-offsets mode: 'partition:0,offset:42;partition:1,offset:300' "
                 "(exclusive; partitions not listed are not read). Single topic only.", scope="source"),
    ConfigOption("scan.bounded.timestamp-millis", "Long", None, "ms",
                 "End timestamp for timestamp mode, ms since epoch (exclusive).", parse_int(), scope="source"),
    ConfigOption("scan.null-key.mode", choices(NullKeyMode), NullKeyMode.FAIL, None,
                 "A record with a null key: fail (SourceError with topic/partition/offset) or skip and "
                 "count it. Flink drops such records silently.",
                 parse_enum(NullKeyMode), scope="source", origin="changelake"),
    ConfigOption("scan.changelog-mode", choices(ChangelogModeOption), ChangelogModeOption.UPSERT, None,
                 "upsert: emit +I/+U/-D; retract: also -U(previous row) before each +U (Flink's "
                 "ChangelogNormalize with update-before).",
                 parse_enum(ChangelogModeOption), scope="source", origin="changelake"),
)

OPTIONS_BY_KEY: dict[str, ConfigOption[Any]] = {o.key: o for o in OPTIONS}


def describe_options() -> str:
    """A Markdown table of :data:`OPTIONS` (key, required, default, type, unit, origin, description)."""
    lines = ["| key | required | default | type | unit | origin | description |", "|---|---|---|---|---|---|---|"]
    for o in OPTIONS:
        default = o.default.value if isinstance(o.default, enum.Enum) else o.default
        lines.append(
            f"| `{o.key}` | {'yes' if o.required else 'no'} | {'' if default is None else default} | {o.type} "
            f"| {o.unit or ''} | {o.origin} | {o.description} |"
        )
    lines.append(
        "| `properties.*` | no | | String | | flink | Passed to the Kafka client with the prefix stripped; "
        "key/value (de)serializers are refused. `properties.transaction.timeout.ms` defaults to "
        f"{DEFAULT_TRANSACTION_TIMEOUT_MS} and must be <= {MAX_TRANSACTION_TIMEOUT_MS}. |"
    )
    lines.append("| `key.<format>.*`, `value.<format>.*` | no | | String | | flink | Options of the key/value format. |")
    return "\n".join(lines)


@dataclass(frozen=True)
class UpsertKafkaOptions:
    """The validated, typed options of one upsert-kafka table (see :data:`OPTIONS` for meanings).

    Build it with :func:`changelake.connectors.upsert_kafka.factory.validate_options`.
    """

    bootstrap_servers: str
    key_format: str
    value_format: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    key_format_options: Mapping[str, str] = field(default_factory=dict)
    value_format_options: Mapping[str, str] = field(default_factory=dict)
    value_fields_include: ValueFieldsInclude = ValueFieldsInclude.ALL
    key_fields_prefix: str = ""
    sink_parallelism: int | None = None
    sink_buffer_flush_max_rows: int = 0
    sink_buffer_flush_interval: timedelta = timedelta(0)
    sink_delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE
    sink_transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    scan_bounded_mode: BoundedMode = BoundedMode.UNBOUNDED
    scan_bounded_specific_offsets: Mapping[int, int] | None = None
    scan_bounded_timestamp_millis: int | None = None
    scan_null_key_mode: NullKeyMode = NullKeyMode.FAIL
    scan_changelog_mode: ChangelogModeOption = ChangelogModeOption.UPSERT

    @property
    def buffering_enabled(self) -> bool:
        """True when both buffer-flush options are > 0 (Flink's rule)."""
        return self.sink_buffer_flush_max_rows > 0 and self.sink_buffer_flush_interval > timedelta(0)

    @property
    def buffer_flush_interval_ms(self) -> float:
        """``sink.buffer-flush.interval`` in ms."""
        return self.sink_buffer_flush_interval / timedelta(milliseconds=1)

    @property
    def single_topic(self) -> str | None:
        """The topic when exactly one is configured, else None."""
        return self.topics[0] if len(self.topics) == 1 and not self.topic_pattern else None
