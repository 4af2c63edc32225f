"""Options of the Kafka pipeline source (Pipeline 2's ``source: {type: kafka, ...}``).

Apache Flink CDC has no Kafka pipeline source; this follows Alibaba Cloud Realtime Compute's Kafka
YAML source (the seed, Pipeline 2) and Flink's Kafka SQL connector for the scan options:

``properties.bootstrap.servers`` (required), ``properties.*``, ``topic`` (one topic or a ``;``
list) or ``topic-pattern`` (a regex matched against whole topic names), ``scan.startup.mode``
(``earliest-offset`` default | ``latest-offset`` | ``group-offsets`` | ``specific-offsets`` |
``timestamp``), ``scan.startup.specific-offsets`` (``partition:0,offset:42;partition:1,offset:300``,
optionally ``topic:t,partition:…``), ``scan.startup.timestamp-millis``, ``scan.bounded.mode``
(``unbounded`` default | ``latest-offset``: stop at the end offsets seen at open), ``value.format``
(``debezium-json`` default | ``canal-json`` | ``json``), ``<format>.distributed-tables`` (one topic
holds several tables: each record's table comes from ``source.db``/``source.table`` or
``database``/``table``; otherwise the topic name ``db.table`` is the table),
``<format>.ignore-parse-errors`` (count and skip corrupt records) and other ``<format>.*`` options
(passed to the format).

changelake additions: ``dead-letter.topic`` (with ``<format>.ignore-parse-errors: true``, bad
records are also copied there with headers naming source topic, partition, offset and error; see
:mod:`.dead_letter`), and ``schema.inference.strategy`` (Alibaba's Kafka YAML source option):
``continuous`` (default) infers a schema from every record of a table that carries no schema, so a
new JSON field becomes a new column; ``static`` keeps the schema inferred from a table's first
record (later fields are ignored). Records typed by Pipeline 1's schema header, a debezium-json
``schema`` wrapper or canal-json ``mysqlType`` are never inferred.
"""

from __future__ import annotations

import enum
import re
from datetime import timedelta
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from changelake.connectors.options import parse_topic_partition_offsets
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import PROPERTIES_PREFIX
from changelake.connectors.options import (
    ConfigOption,
    key,
    prefixed,
    validate_required_options,
    validate_topic_or_pattern,
    validate_unsupported_options,
)
from changelake.connectors.kafka.sink_options import BOOTSTRAP_SERVERS, IDENTIFIER, ValueFormat

__all__ = ["StartupMode", "BoundedMode", "InferenceStrategy", "KafkaSourceOptions", "SOURCE_OPTIONS", "parse_specific_offsets"]



class StartupMode(enum.Enum):
    """``scan.startup.mode`` (Flink's ScanStartupMode)."""

    EARLIEST_OFFSET = "earliest-offset"
    LATEST_OFFSET = "latest-offset"
    GROUP_OFFSETS = "group-offsets"
    SPECIFIC_OFFSETS = "specific-offsets"
    TIMESTAMP = "timestamp"


class InferenceStrategy(enum.Enum):
    """``schema.inference.strategy``: how a table without schema information gets one."""

    CONTINUOUS = "continuous"  # infer from every record; new fields evolve the table
    STATIC = "static"  # infer once, from the table's first record


class BoundedMode(enum.Enum):
    """``scan.bounded.mode``: where a bounded read stops (subset of Flink's ScanBoundedMode)."""

    UNBOUNDED = "unbounded"
    LATEST_OFFSET = "latest-offset"  # the end offsets taken at open ("until caught up")


TOPIC = key("topic").string_type().no_default_value().with_description("Topic name, or several separated by ';'.")
TOPIC_PATTERN = key("topic-pattern").string_type().no_default_value().with_description(
    "Regex; every topic whose whole name matches is read.")
STARTUP_MODE = key("scan.startup.mode").enum_type(StartupMode).default_value(StartupMode.EARLIEST_OFFSET) \
    .with_description("Where to start when the caller gives no offsets; earliest-offset by default.")
SPECIFIC_OFFSETS = key("scan.startup.specific-offsets").string_type().no_default_value().with_description(
    "'partition:0,offset:42;partition:1,offset:300' for specific-offsets mode.")
TIMESTAMP_MILLIS = key("scan.startup.timestamp-millis").long_type(minimum=0).no_default_value().with_description(
    "Start timestamp in ms since the epoch for timestamp mode.").with_unit("ms")
BOUNDED_MODE = key("scan.bounded.mode").enum_type(BoundedMode).default_value(BoundedMode.UNBOUNDED).with_description(
    "unbounded (default) or latest-offset (stop at the end offsets seen at open).")
VALUE_FORMAT = key("value.format").enum_type(ValueFormat).default_value(ValueFormat.DEBEZIUM_JSON).with_description(
    "debezium-json (default), canal-json or json.")
DISCOVERY_INTERVAL = key("scan.topic-partition-discovery.interval").duration_type().default_value(
    timedelta(seconds=10)).with_description(
    "How often an unbounded run re-lists topics (topic-pattern) and partitions; 10 s by default, 0 turns "
    "discovery off.")
DEAD_LETTER_TOPIC = key("dead-letter.topic").string_type().no_default_value().with_description(
    "With '<format>.ignore-parse-errors': copy bad records to this topic with headers naming source topic, "
    "partition, offset and error.").from_origin("changelake")
INFERENCE_STRATEGY = key("schema.inference.strategy").enum_type(InferenceStrategy).default_value(
    InferenceStrategy.CONTINUOUS).with_description(
    "continuous (default): infer from every untyped record; static: from the first.").from_origin("alibaba")
TYPE = key("type").string_type().default_value(IDENTIFIER).with_description("Connector identifier, 'kafka'.")
NAME = key("name").string_type().no_default_value().with_description("Display name of the source.")
#: ``<value.format>.*`` options the source itself reads (the rest go to the format).
DISTRIBUTED_TABLES = key("distributed-tables").bool_type().default_value(False).with_description(
    "One topic holds several tables; each record names its table.").from_origin("alibaba")
IGNORE_PARSE_ERRORS = key("ignore-parse-errors").bool_type().default_value(False).with_description(
    "Count and skip corrupt records instead of failing.")

READ_CHANGELOG_AS_APPEND_ONLY = key("scan.read-changelog-as-append-only.enabled").bool_type().default_value(False) \
    .with_description("Every change becomes an insert (the pipeline stage converts them, see changelake.changelog.transform).")

SOURCE_OPTIONS: tuple[ConfigOption[Any], ...] = (
    TOPIC, TOPIC_PATTERN, STARTUP_MODE, SPECIFIC_OFFSETS, TIMESTAMP_MILLIS, BOUNDED_MODE, VALUE_FORMAT,
    DISCOVERY_INTERVAL, DEAD_LETTER_TOPIC, INFERENCE_STRATEGY, TYPE, NAME, READ_CHANGELOG_AS_APPEND_ONLY,
)

def parse_specific_offsets(text: str, default_topic: str | None) -> dict[tuple[str, int], int]:
    """Parse ``scan.startup.specific-offsets`` into ``{(topic, partition): offset}``
    (:func:`changelake.connectors.options.parse_topic_partition_offsets`).

    Raises:
        OptionValidationError: malformed text (message quotes it, as Flink's
            "Invalid properties 'scan.startup.specific-offsets' should follow the format …").
    """
    return parse_topic_partition_offsets(text, SPECIFIC_OFFSETS.key, default_topic)


@dataclass(frozen=True)
class KafkaSourceOptions:
    """Validated, typed options of :class:`~changelake.connectors.kafka.source.KafkaPipelineSource`.

    Attributes:
        properties: consumer config from ``properties.*`` (prefix stripped; may hold secrets).
        topics: explicit topics (empty when ``topic_pattern`` is used).
        topic_pattern: compiled regex or None.
        startup_mode, specific_offsets, startup_timestamp_ms: where to start without caller offsets.
        bounded_mode: unbounded or latest-offset.
        value_format: debezium-json, canal-json or json.
        distributed_tables: tables come from each record (``<format>.distributed-tables``).
        ignore_parse_errors: count and skip corrupt records (``<format>.ignore-parse-errors``).
        format_options: other ``<format>.*`` options, prefix stripped (passed to the format).
        dead_letter_topic: where bad records are copied (needs ``ignore_parse_errors``), or None.
        inference_strategy: ``schema.inference.strategy``.
        discovery_interval: ``scan.topic-partition-discovery.interval`` (0: off).
    """

    properties: Mapping[str, str] = field(repr=False)
    topics: tuple[str, ...] = ()
    topic_pattern: re.Pattern[str] | None = None
    startup_mode: StartupMode = StartupMode.EARLIEST_OFFSET
    specific_offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    startup_timestamp_ms: int | None = None
    bounded_mode: BoundedMode = BoundedMode.UNBOUNDED
    value_format: ValueFormat = ValueFormat.DEBEZIUM_JSON
    distributed_tables: bool = False
    ignore_parse_errors: bool = False
    format_options: Mapping[str, str] = field(default_factory=dict)
    dead_letter_topic: str | None = None
    inference_strategy: InferenceStrategy = InferenceStrategy.CONTINUOUS
    discovery_interval: timedelta = timedelta(seconds=10)

    @property
    def bootstrap_servers(self) -> str:
        return self.properties["bootstrap.servers"]

    @classmethod
    def from_options(cls, raw: Mapping[str, Any]) -> "KafkaSourceOptions":
        """Validate raw options and build typed ones (unknown keys, required, values, cross rules).

        Raises:
            OptionValidationError: see the module docstring; messages follow Flink's Kafka factory
                ("Option 'topic' and 'topic-pattern' shouldn't be set together.", "'scan.startup.
                specific-offsets' is required in 'specific-offsets' startup mode but missing.", …).
        """
        raw = {str(k): ("" if v is None else (str(v).lower() if isinstance(v, bool) else str(v))) for k, v in raw.items()}
        value_format = VALUE_FORMAT.get(raw)
        assert value_format is not None
        fmt_prefix = value_format.value + "."
        validate_unsupported_options(IDENTIFIER, raw, SOURCE_OPTIONS, (PROPERTIES_PREFIX, fmt_prefix))
        validate_required_options(raw, [BOOTSTRAP_SERVERS])
        if TYPE.get(raw) != IDENTIFIER:
            raise OptionValidationError(f"Option 'type' must be '{IDENTIFIER}', got '{raw['type']}'", option="type")
        fmt_opts = prefixed(raw, fmt_prefix)
        distributed = _format_flag(DISTRIBUTED_TABLES, fmt_opts, fmt_prefix)
        ignore = _format_flag(IGNORE_PARSE_ERRORS, fmt_opts, fmt_prefix)
        topic_text, pattern_text = TOPIC.get(raw), TOPIC_PATTERN.get(raw)
        topics = tuple(t.strip() for t in (topic_text or "").split(";") if t.strip())
        validate_topics(topics, pattern_text)
        pattern = None
        if pattern_text:
            try:
                pattern = re.compile(pattern_text)
            except re.error as exc:
                raise OptionValidationError(f"Invalid regular expression '{pattern_text}' for option "
                                            f"'topic-pattern': {exc}", option="topic-pattern") from exc
        mode = STARTUP_MODE.get(raw)
        assert mode is not None
        specific: dict[tuple[str, int], int] = {}
        ts = TIMESTAMP_MILLIS.get(raw)
        validate_startup(mode, raw)
        dead_letter = DEAD_LETTER_TOPIC.get(raw) or None
        validate_dead_letter(dead_letter, ignore, fmt_prefix)
        if mode is StartupMode.SPECIFIC_OFFSETS:
            specific = parse_specific_offsets(raw[SPECIFIC_OFFSETS.key], topics[0] if len(topics) == 1 else None)
        return cls(
            properties=prefixed(raw, PROPERTIES_PREFIX),
            topics=topics,
            topic_pattern=pattern,
            startup_mode=mode,
            specific_offsets=specific,
            startup_timestamp_ms=ts,
            bounded_mode=BOUNDED_MODE.get(raw),  # type: ignore[arg-type]
            value_format=value_format,
            distributed_tables=distributed,
            ignore_parse_errors=ignore,
            format_options=fmt_opts,
            dead_letter_topic=dead_letter,
            inference_strategy=INFERENCE_STRATEGY.get(raw),  # type: ignore[arg-type]
            discovery_interval=DISCOVERY_INTERVAL.get(raw),  # type: ignore[arg-type]
        )


def _format_flag(option: ConfigOption[bool], fmt_opts: dict[str, str], fmt_prefix: str) -> bool:
    """Pop ``<format>.<option>`` from ``fmt_opts`` and parse it (errors name the prefixed key)."""
    if option.key not in fmt_opts:
        return bool(option.default)
    return bool(replace(option, key=fmt_prefix + option.key).parse_value(fmt_opts.pop(option.key)))


def validate_topics(topics: tuple[str, ...], pattern: str | None) -> None:
    """Exactly one of ``topic`` / ``topic-pattern`` (:func:`validate_topic_or_pattern`)."""
    validate_topic_or_pattern(bool(topics), bool(pattern))


def validate_dead_letter(topic: str | None, ignore_parse_errors: bool, fmt_prefix: str) -> None:
    """``dead-letter.topic`` only makes sense when bad records are skipped rather than fatal.

    Raises:
        OptionValidationError: ``dead-letter.topic`` without ``<format>.ignore-parse-errors: true``.
    """
    if topic and not ignore_parse_errors:
        raise OptionValidationError(
            f"'{DEAD_LETTER_TOPIC.key}' = '{topic}' needs '{fmt_prefix}ignore-parse-errors' = 'true' "
            "(without it a bad record stops the run)",
            option=DEAD_LETTER_TOPIC.key,
        )


def validate_startup(mode: StartupMode, raw: Mapping[str, str]) -> None:
    """Mode-specific required options (messages as Flink's KafkaConnectorOptionsUtil)."""
    if mode is StartupMode.SPECIFIC_OFFSETS and not raw.get(SPECIFIC_OFFSETS.key):
        raise OptionValidationError(
            f"'{SPECIFIC_OFFSETS.key}' is required in 'specific-offsets' startup mode but missing.",
            option=SPECIFIC_OFFSETS.key,
        )
    if mode is StartupMode.TIMESTAMP and not raw.get(TIMESTAMP_MILLIS.key):
        raise OptionValidationError(
            f"'{TIMESTAMP_MILLIS.key}' is required in 'timestamp' startup mode but missing.",
            option=TIMESTAMP_MILLIS.key,
        )
