"""The ``upsert-kafka`` factory: validate raw WITH options, then build a source or a sink.

This is the only place raw strings become typed options. Validation follows Flink's
``UpsertKafkaDynamicTableFactory`` + ``FactoryUtil`` in this order, and stops at the first
violation with an :class:`~changelake.connectors.errors.OptionValidationError` naming the option,
the value and the rule:

1. unknown keys (:func:`validate_unknown_keys`), then refused ``properties.*`` keys;
2. required keys (:func:`validate_required_keys`);
3. values and ranges: enums, integers, durations, offsets, format names and format options
   (:func:`parse_values`);
4. cross-option rules: :func:`validate_value_format_alias`, :func:`validate_topics`,
   :func:`validate_primary_key`, :func:`validate_key_prefix`, :func:`validate_formats_insert_only`,
   :func:`validate_sink_buffer_flush`, :func:`validate_delivery_guarantee`,
   :func:`validate_scan_bounded`.

Example::

    decl = parse_create_table(open("pv.sql").read())
    sink = create_sink(decl)              # or create_sink(options_dict, schema)
    source = create_source(decl, store=SqliteKeyStateStore("state/pv"))
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Mapping

from changelake.changelog.schema import Schema
from changelake.changelog.state import KeyStateStore
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import validate_delivery_guarantee as _validate_delivery_guarantee
from changelake.connectors.options import (
    validate_required_options,
    validate_topic_or_pattern,
    validate_unsupported_options,
)
from changelake.connectors.registry import ConnectorContext, ConnectorFactory, Endpoint
from changelake.connectors.upsert_kafka.ingestion_options import IDENTIFIER as _INGESTION_IDENTIFIER
from changelake.connectors.kafka.sink_options import BOOTSTRAP_SERVERS
from changelake.connectors.upsert_kafka.ingestion_options import INGESTION_OPTIONS, UpsertKafkaIngestionOptions
from changelake.connectors.kafka_common import client_properties
from changelake.connectors.options import PROPERTIES_PREFIX
from changelake.connectors.upsert_kafka import formats_bridge
from changelake.connectors.upsert_kafka.ddl import TableDeclaration
from changelake.connectors.upsert_kafka.options import (
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    IDENTIFIER,
    MAX_TRANSACTION_TIMEOUT_MS,
    OPTIONS,
    OPTIONS_BY_KEY,
    REFUSED_PROPERTIES,
    BoundedMode,
    UpsertKafkaOptions,
    ValueFieldsInclude,
    parse_specific_offsets,
)

if TYPE_CHECKING:
    from changelake.connectors.upsert_kafka.ingestion import UpsertKafkaIngestionSink
    from changelake.connectors.upsert_kafka.sink import UpsertKafkaSink
    from changelake.connectors.upsert_kafka.source import UpsertKafkaSource

__all__ = [
    "IDENTIFIER",
    "FACTORY",
    "PRIMARY_KEY_REQUIRED",
    "validate_options",
    "resolve",
    "create_sink",
    "create_source",
    "validate_unknown_keys",
    "validate_required_keys",
    "parse_values",
    "validate_value_format_alias",
    "validate_topics",
    "validate_primary_key",
    "validate_key_prefix",
    "validate_formats_insert_only",
    "validate_sink_buffer_flush",
    "validate_delivery_guarantee",
    "validate_scan_bounded",
]

#: Flink's message when an upsert-kafka table has no PRIMARY KEY.
PRIMARY_KEY_REQUIRED = (
    "'upsert-kafka' tables require to define a PRIMARY KEY constraint. "
    "The PRIMARY KEY specifies which columns should be read from or write to the Kafka message key. "
    "The PRIMARY KEY also defines records in the 'upsert-kafka' table should update or delete on which keys."
)

_MAX_PREFIX_BYTES = 64_000


def _fail(message: str, option: str | None) -> OptionValidationError:
    return OptionValidationError(message, option=option)


def _value_format_name(raw: Mapping[str, str]) -> str | None:
    return raw.get("value.format") or raw.get("format")


def _format_prefixes(raw: Mapping[str, str]) -> dict[str, str]:
    """Option prefix -> format name, for the formats the options select."""
    prefixes: dict[str, str] = {}
    kf = raw.get("key.format")
    if kf:
        prefixes[f"key.{kf}."] = kf
    vf = _value_format_name(raw)
    if vf:
        prefixes[f"value.{vf}."] = vf
        if "format" in raw and "value.format" not in raw:
            prefixes[f"{vf}."] = vf  # the 'format' alias takes '<fmt>.*' options, as Flink's kafka
    return prefixes


# -- stage 1: unknown keys -----------------------------------------------------------------------------


def validate_unknown_keys(raw: Mapping[str, str]) -> None:
    """Refuse keys that are not options, ``properties.*`` or the chosen formats' ``<prefix>.*``
    (Flink: "Unsupported options found for 'upsert-kafka'. ..."), then the ``properties.*`` keys
    the connector manages itself (key/value (de)serializers)."""
    validate_unsupported_options(IDENTIFIER, raw, OPTIONS, [PROPERTIES_PREFIX, *_format_prefixes(raw)])
    for key in REFUSED_PROPERTIES:
        if key in raw:
            raise _fail(
                f"Option '{key}' is not allowed for '{IDENTIFIER}': the connector sets the Kafka client's "
                f"key/value (de)serializers itself (they always handle bytes); remove it.",
                key,
            )


# -- stage 2: required keys ----------------------------------------------------------------------------


def validate_required_keys(raw: Mapping[str, str]) -> None:
    """Refuse a missing ``connector``, ``properties.bootstrap.servers``, ``key.format`` or
    ``value.format`` (``format`` counts as ``value.format``), with Flink's FactoryUtil message."""
    present = dict(raw)
    if not str(raw.get("value.format") or "").strip():
        present["value.format"] = raw.get("format") or ""
    validate_required_options(present, [o for o in OPTIONS if o.required])


# -- stage 3: values -----------------------------------------------------------------------------------


def _parse(raw: Mapping[str, str], key: str) -> Any:
    return OPTIONS_BY_KEY[key].get(raw)


def parse_values(raw: Mapping[str, str]) -> dict[str, Any]:
    """Parse every known option into its type and check ranges; returns key -> typed value.

    Raises OptionValidationError for: a connector other than 'upsert-kafka'; unparsable enums,
    integers, durations and offsets; ``sink.parallelism`` < 1; a negative timestamp; an empty
    topic list; a topic pattern that does not compile; a transactional-id prefix over 64000 bytes;
    ``properties.transaction.timeout.ms`` not an integer in 1..900000; an unknown key/value format;
    a format option the format does not support (or a bad value for it).
    """
    if raw["connector"] != IDENTIFIER:
        raise _fail(
            f"Option 'connector' must be '{IDENTIFIER}' for this factory, got '{raw['connector']}'.", "connector"
        )
    values = {o.key: _parse(raw, o.key) for o in OPTIONS}
    if "topic" in raw and not values["topic"]:
        raise _fail(f"Option 'topic' must name at least one topic, got '{raw['topic']}'.", "topic")
    if values["topic-pattern"] is not None:
        try:
            re.compile(values["topic-pattern"])
        except re.error as exc:
            raise _fail(f"Option 'topic-pattern' is not a valid regex: '{raw['topic-pattern']}' ({exc}).", "topic-pattern") from None
    if values["sink.parallelism"] is not None and values["sink.parallelism"] < 1:
        raise _fail(f"Option 'sink.parallelism' must be >= 1, got {values['sink.parallelism']}.", "sink.parallelism")
    ts = values["scan.bounded.timestamp-millis"]
    if ts is not None and ts < 0:
        raise _fail(f"Option 'scan.bounded.timestamp-millis' must be >= 0 (ms since epoch), got {ts}.", "scan.bounded.timestamp-millis")
    if "scan.bounded.specific-offsets" in raw:
        try:
            values["scan.bounded.specific-offsets"] = parse_specific_offsets(raw["scan.bounded.specific-offsets"])
        except ValueError as exc:
            raise _fail(str(exc), "scan.bounded.specific-offsets") from None
    prefix = values["sink.transactional-id-prefix"]
    if prefix is not None and (not prefix or len(prefix.encode()) > _MAX_PREFIX_BYTES):
        raise _fail(
            f"Option 'sink.transactional-id-prefix' must be 1..{_MAX_PREFIX_BYTES} bytes UTF-8, got {len(prefix.encode())} bytes.",
            "sink.transactional-id-prefix",
        )
    key = "properties.transaction.timeout.ms"
    if key in raw:
        try:
            timeout = int(raw[key])
        except ValueError:
            raise _fail(f"Could not parse value '{raw[key]}' for key '{key}'. expected an integer (ms)", key) from None
        if not 0 < timeout <= MAX_TRANSACTION_TIMEOUT_MS:
            raise _fail(
                f"Option '{key}' = {timeout} ms is larger than the broker's default maximum "
                f"transaction.max.timeout.ms ({MAX_TRANSACTION_TIMEOUT_MS} ms, 15 min); the broker would refuse "
                f"the producer ('The transaction timeout is larger than the maximum value allowed by the broker'). "
                f"Use a value in 1..{MAX_TRANSACTION_TIMEOUT_MS}.",
                key,
            )
        values[key] = timeout
    else:
        values[key] = DEFAULT_TRANSACTION_TIMEOUT_MS
    _parse_format_options(raw, values)
    return values


def _parse_format_options(raw: Mapping[str, str], values: dict[str, Any]) -> None:
    kf, vf = raw["key.format"], _value_format_name(raw) or ""
    for which, name, option in (("key", kf, "key.format"), ("value", vf, "value.format" if "value.format" in raw else "format")):
        if not formats_bridge.is_known_format(name):
            raise _fail(
                f"Could not find any format factory for identifier '{name}' ({option}). "
                f"Available identifiers are: {', '.join(formats_bridge.format_names())}",
                option,
            )
    key_opts: dict[str, str] = {}
    value_opts: dict[str, str] = {}
    for prefix, name in _format_prefixes(raw).items():
        target = key_opts if prefix.startswith("key.") else value_opts
        supported = formats_bridge.supported_format_options(name)
        for k, v in raw.items():
            if not k.startswith(prefix):
                continue
            sub = k[len(prefix):]
            if sub not in supported:
                raise _fail(
                    f"Unsupported options found for format '{name}': '{k}'. "
                    f"Supported options: {', '.join(prefix + s for s in sorted(supported)) or '(none)'}",
                    k,
                )
            target[sub] = str(v)
    values["key.format.options"] = key_opts
    values["value.format.options"] = value_opts


# -- stage 4: cross-option rules -----------------------------------------------------------------------


def validate_value_format_alias(raw: Mapping[str, str]) -> None:
    """``format`` (the seed's alias) and ``value.format`` cannot both be set."""
    if "format" in raw and "value.format" in raw:
        raise _fail(
            f"Options 'format' and 'value.format' shouldn't be set together: 'format' is an alias of "
            f"'value.format'; got format='{raw['format']}', value.format='{raw['value.format']}'.",
            "format",
        )


def validate_topics(raw: Mapping[str, str]) -> None:
    """Exactly one of ``topic`` / ``topic-pattern`` (Flink's messages)."""
    validate_topic_or_pattern("topic" in raw, "topic-pattern" in raw)


def validate_primary_key(schema: Schema) -> None:
    """A PRIMARY KEY is required (Flink's message :data:`PRIMARY_KEY_REQUIRED`)."""
    if not schema.primary_key:
        raise _fail(PRIMARY_KEY_REQUIRED, None)


def validate_key_prefix(values: Mapping[str, Any], schema: Schema) -> None:
    """``key.fields-prefix`` needs EXCEPT_KEY, and every PK column must carry the prefix."""
    prefix = values["key.fields-prefix"]
    if not prefix:
        return
    if values["value.fields-include"] is ValueFieldsInclude.ALL:
        raise _fail(
            "A key prefix is not allowed when option 'value.fields-include' is set to 'ALL'. "
            "Set it to 'EXCEPT_KEY' instead to avoid field overlaps.",
            "key.fields-prefix",
        )
    for col in schema.primary_key:
        if not col.startswith(prefix) or col == prefix:
            raise _fail(
                f"All fields in 'key.fields' must be prefixed with '{prefix}' when option 'key.fields-prefix' "
                f"is set but field '{col}' is not prefixed.",
                "key.fields-prefix",
            )


def validate_formats_insert_only(raw: Mapping[str, str]) -> None:
    """Key and value formats must be insert-only (Flink's message)."""
    for which, name, option in (
        ("key", raw["key.format"], "key.format"),
        ("value", _value_format_name(raw) or "", "value.format" if "value.format" in raw else "format"),
    ):
        if not formats_bridge.is_insert_only(name):
            raise _fail(
                f"'{IDENTIFIER}' connector doesn't support '{name}' as {which} format, "
                f"because '{name}' is not in insert-only mode.",
                option,
            )


def validate_sink_buffer_flush(values: Mapping[str, Any]) -> None:
    """Both buffer options > 0, or both <= 0 (Flink's ``validateSinkBufferFlush``)."""
    rows: int = values["sink.buffer-flush.max-rows"]
    interval: timedelta = values["sink.buffer-flush.interval"]
    if (rows > 0) != (interval > timedelta(0)):
        ms = interval / timedelta(milliseconds=1)
        raise _fail(
            "'sink.buffer-flush.max-rows' and 'sink.buffer-flush.interval' must be set to be greater than zero "
            f"together to enable sink buffer flushing; got max-rows={rows}, interval={ms:g} ms.",
            "sink.buffer-flush.max-rows" if rows <= 0 else "sink.buffer-flush.interval",
        )


def validate_delivery_guarantee(values: Mapping[str, Any]) -> None:
    """exactly-once needs ``sink.transactional-id-prefix`` (Flink's message; see
    :func:`changelake.connectors.options.validate_delivery_guarantee`)."""
    _validate_delivery_guarantee(values["sink.delivery-guarantee"], values["sink.transactional-id-prefix"])


def validate_scan_bounded(values: Mapping[str, Any]) -> None:
    """timestamp mode needs the timestamp; specific-offsets needs offsets and a single topic;
    group-offsets needs ``properties.group.id``."""
    mode: BoundedMode = values["scan.bounded.mode"]
    if mode is BoundedMode.TIMESTAMP and values["scan.bounded.timestamp-millis"] is None:
        raise _fail(
            "'scan.bounded.timestamp-millis' is required in 'timestamp' bounded mode but missing.",
            "scan.bounded.timestamp-millis",
        )
    if mode is BoundedMode.SPECIFIC_OFFSETS:
        if values["scan.bounded.specific-offsets"] is None:
            raise _fail(
                "'scan.bounded.specific-offsets' is required in 'specific-offsets' bounded mode but missing.",
                "scan.bounded.specific-offsets",
            )
        if values["topic-pattern"] is not None or len(values["topic"] or ()) != 1:
            raise _fail(
                "Currently Kafka source only supports specific offset for single topic.", "scan.bounded.specific-offsets"
            )
    if mode is BoundedMode.GROUP_OFFSETS and not values.get("properties", {}).get("group.id"):
        raise _fail(
            "'properties.group.id' is required in 'group-offsets' bounded mode but missing.", "properties.group.id"
        )


# -- entry points --------------------------------------------------------------------------------------


def resolve(
    declaration: Mapping[str, str] | TableDeclaration, schema: Schema | None = None
) -> tuple[dict[str, str], Schema]:
    """Split a declaration into (raw options, schema); a TableDeclaration brings its own schema.

    Raises OptionValidationError if neither gives a schema.
    """
    if isinstance(declaration, TableDeclaration):
        return {k: str(v) for k, v in declaration.options.items()}, schema or declaration.schema
    if schema is None:
        raise _fail("a schema is required with a plain option mapping (or pass a TableDeclaration)", None)
    return {k: str(v) for k, v in declaration.items()}, schema


def validate_options(declaration: Mapping[str, str] | TableDeclaration, schema: Schema | None = None) -> UpsertKafkaOptions:
    """Validate WITH options (mapping or DDL declaration) and return the typed options.

    Raises OptionValidationError at the first violation, in the order of the module docstring.
    """
    raw, schema = resolve(declaration, schema)
    validate_unknown_keys(raw)
    validate_required_keys(raw)
    values = parse_values(raw)
    values["properties"] = client_properties(raw)
    validate_value_format_alias(raw)
    validate_topics(raw)
    validate_primary_key(schema)
    validate_key_prefix(values, schema)
    validate_formats_insert_only(raw)
    validate_sink_buffer_flush(values)
    validate_delivery_guarantee(values)
    validate_scan_bounded(values)
    props = dict(values["properties"])
    props.pop("transaction.timeout.ms", None)
    options = UpsertKafkaOptions(
        bootstrap_servers=raw["properties.bootstrap.servers"],
        key_format=raw["key.format"],
        value_format=_value_format_name(raw) or "",
        topics=tuple(values["topic"] or ()),
        topic_pattern=values["topic-pattern"],
        properties=props,
        key_format_options=values["key.format.options"],
        value_format_options=values["value.format.options"],
        value_fields_include=values["value.fields-include"],
        key_fields_prefix=values["key.fields-prefix"] or "",
        sink_parallelism=values["sink.parallelism"],
        sink_buffer_flush_max_rows=values["sink.buffer-flush.max-rows"],
        sink_buffer_flush_interval=values["sink.buffer-flush.interval"],
        sink_delivery_guarantee=values["sink.delivery-guarantee"],
        sink_transactional_id_prefix=values["sink.transactional-id-prefix"],
        transaction_timeout_ms=values["properties.transaction.timeout.ms"],
        scan_bounded_mode=values["scan.bounded.mode"],
        scan_bounded_specific_offsets=values["scan.bounded.specific-offsets"],
        scan_bounded_timestamp_millis=values["scan.bounded.timestamp-millis"],
        scan_null_key_mode=values["scan.null-key.mode"],
        scan_changelog_mode=values["scan.changelog-mode"],
    )
    validate_format_construction(raw, options, schema)
    return options


def validate_format_construction(raw: Mapping[str, str], options: UpsertKafkaOptions, schema: Schema) -> None:
    """Build the key and value formats once (no I/O) so that bad format option values and
    schemas a format cannot carry (e.g. ``raw`` with two key columns) fail here, naming the
    full option key (``key.json.ignore-parse-errors``)."""
    from changelake.connectors.upsert_kafka.layout import RowLayout
    from changelake.formats.errors import FormatOptionError, FormatSchemaError

    layout = RowLayout(schema, options)
    value_prefix = "value." if "value.format" in raw else ""
    for which, name, sub_schema, fmt_opts, prefix in (
        ("key", options.key_format, layout.key_schema, options.key_format_options, "key."),
        ("value", options.value_format, layout.value_schema, options.value_format_options, value_prefix),
    ):
        try:
            formats_bridge.create_format(name, sub_schema, fmt_opts)
        except FormatOptionError as exc:
            key = f"{prefix}{name}.{exc.option}" if exc.option else f"{which}.format"
            raise _fail(f"Invalid {which} format options ('{key}'): {exc}", key) from exc
        except FormatSchemaError as exc:
            raise _fail(
                f"'{name}' cannot be the {which} format of this table (columns {sub_schema.names}): {exc}",
                f"{which}.format" if which == "key" or value_prefix else "format",
            ) from exc


def create_sink(declaration: Mapping[str, str] | TableDeclaration, schema: Schema | None = None, **kwargs: Any) -> "UpsertKafkaSink":
    """Validate and build an :class:`~changelake.connectors.upsert_kafka.sink.UpsertKafkaSink`
    (not opened). ``kwargs`` go to the sink's constructor. Raises OptionValidationError."""
    from changelake.connectors.upsert_kafka.sink import UpsertKafkaSink

    _raw, schema = resolve(declaration, schema)
    return UpsertKafkaSink(validate_options(declaration, schema), schema, **kwargs)


def create_source(
    declaration: Mapping[str, str] | TableDeclaration,
    schema: Schema | None = None,
    *,
    store: KeyStateStore | None = None,
    **kwargs: Any,
) -> "UpsertKafkaSource":
    """Validate and build an :class:`~changelake.connectors.upsert_kafka.source.UpsertKafkaSource`
    (not opened); ``store`` holds the key state (memory when None). Raises OptionValidationError."""
    from changelake.connectors.upsert_kafka.source import UpsertKafkaSource

    _raw, schema = resolve(declaration, schema)
    return UpsertKafkaSource(validate_options(declaration, schema), schema, store=store, **kwargs)


# -- pipeline factory --------------------------------------------------------------------------


def _validate_ingestion(raw: Mapping[str, Any], context: ConnectorContext) -> UpsertKafkaIngestionOptions:
    return UpsertKafkaIngestionOptions.from_options(raw, context.pipeline)


def _build_ingestion(options: UpsertKafkaIngestionOptions, context: ConnectorContext) -> "UpsertKafkaIngestionSink":
    from changelake.connectors.upsert_kafka.ingestion import UpsertKafkaIngestionSink

    return UpsertKafkaIngestionSink(options, context.pipeline)


#: The ``upsert-kafka`` pipeline factory (registered in :mod:`changelake.connectors.registry`): the
#: sink of a ``mysql -> upsert-kafka`` pipeline. Tables declared by ``WITH`` options or DDL are built
#: by :func:`create_source` / :func:`create_sink` above.
FACTORY = ConnectorFactory(
    _INGESTION_IDENTIFIER,
    sink=Endpoint(
        required=(BOOTSTRAP_SERVERS,),
        optional=(*INGESTION_OPTIONS, PROPERTIES_PREFIX + "*"),
        validate=_validate_ingestion,
        build=_build_ingestion,
        connection="kafka",
        progress="topics",
    ),
    description="Keyed, compacted topics per table; deletes as tombstones (Flink's upsert-kafka).",
)
