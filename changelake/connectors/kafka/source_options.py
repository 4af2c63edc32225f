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
from dataclasses import dataclass, field
from typing import Any, Mapping

from changelake.connectors.options import parse_topic_partition_offsets
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.kafka._options import (
    Option,
    parse_bool,
    parse_duration,
    parse_enum,
    parse_int,
    parse_str,
    prefixed,
    validate_keys,
    validate_required,
)
from changelake.connectors.kafka.sink_options import IDENTIFIER, ValueFormat

__all__ = ["StartupMode", "BoundedMode", "InferenceStrategy", "KafkaSourceOptions", "SOURCE_OPTIONS", "parse_specific_offsets"]

PROPERTIES_PREFIX = "properties."


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


TOPIC = Option("topic", parse_str, None, "Topic name, or several separated by ';'.")
TOPIC_PATTERN = Option("topic-pattern", parse_str, None, "Regex; every topic whose whole name matches is read.")
STARTUP_MODE = Option("scan.startup.mode", parse_enum(StartupMode), StartupMode.EARLIEST_OFFSET,
                      "Where to start when the caller gives no offsets; earliest-offset by default.")
SPECIFIC_OFFSETS = Option("scan.startup.specific-offsets", parse_str, None,
                          "'partition:0,offset:42;partition:1,offset:300' for specific-offsets mode.")
TIMESTAMP_MILLIS = Option("scan.startup.timestamp-millis", parse_int(0), None,
                          "Start timestamp in ms since the epoch for timestamp mode.")
BOUNDED_MODE = Option("scan.bounded.mode", parse_enum(BoundedMode), BoundedMode.UNBOUNDED,
                      "unbounded (default) or latest-offset (stop at the end offsets seen at open).")
VALUE_FORMAT = Option("value.format", parse_enum(ValueFormat), ValueFormat.DEBEZIUM_JSON,
                      "debezium-json (default), canal-json or json.")
DISCOVERY_INTERVAL = Option("scan.topic-partition-discovery.interval", parse_duration, timedelta(seconds=10),
                            "How often an unbounded run re-lists topics (topic-pattern) and partitions; "
                            "10 s by default, 0 turns discovery off.")
DEAD_LETTER_TOPIC = Option("dead-letter.topic", parse_str, None,
                           "With '<format>.ignore-parse-errors': copy bad records to this topic with headers "
                           "naming source topic, partition, offset and error.")
INFERENCE_STRATEGY = Option("schema.inference.strategy", parse_enum(InferenceStrategy), InferenceStrategy.CONTINUOUS,
                            "continuous (default): infer from every untyped record; static: from the first.")
TYPE = Option("type", parse_str, IDENTIFIER, "Connector identifier, 'kafka'.")
NAME = Option("name", parse_str, None, "Display name of the source.")

SOURCE_OPTIONS: tuple[Option[Any], ...] = (
    TOPIC, TOPIC_PATTERN, STARTUP_MODE, SPECIFIC_OFFSETS, TIMESTAMP_MILLIS, BOUNDED_MODE, VALUE_FORMAT,
    DISCOVERY_INTERVAL, DEAD_LETTER_TOPIC, INFERENCE_STRATEGY, TYPE, NAME,
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
        validate_keys(IDENTIFIER, raw, SOURCE_OPTIONS, (PROPERTIES_PREFIX, fmt_prefix))
        validate_required(raw, ["properties.bootstrap.servers"])
        if TYPE.get(raw) != IDENTIFIER:
            raise OptionValidationError(f"Option 'type' must be '{IDENTIFIER}', got '{raw['type']}'", option="type")
        fmt_opts = prefixed(raw, fmt_prefix)
        distributed = parse_bool(fmt_opts.pop("distributed-tables", "false"), fmt_prefix + "distributed-tables")
        ignore = parse_bool(fmt_opts.pop("ignore-parse-errors", "false"), fmt_prefix + "ignore-parse-errors")
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


def validate_topics(topics: tuple[str, ...], pattern: str | None) -> None:
    """Exactly one of ``topic`` / ``topic-pattern`` (messages as Flink's KafkaConnectorOptionsUtil)."""
    if topics and pattern:
        raise OptionValidationError("Option 'topic' and 'topic-pattern' shouldn't be set together.", option="topic")
    if not topics and not pattern:
        raise OptionValidationError("Either 'topic' or 'topic-pattern' must be set.", option="topic")


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
