"""Factory of the ``kafka`` table connector: WITH options (or DDL text) -> source or sink.

The only place where raw strings become typed objects: options are validated
(:func:`~changelake.connectors.kafka_table.options.parse_options`), then the formats are built
with their own prefixed options (``value.json.ignore-parse-errors`` -> json's
``ignore-parse-errors``), then the rules that need the formats are checked, as Flink's
``KafkaDynamicTableFactory``:

* a key format must be insert-only ("A key format should only deal with INSERT-only records.");
* an insert-only value format cannot have a PRIMARY KEY ("The Kafka table '<t>' with '<fmt>'
  format doesn't support defining PRIMARY KEY constraint on the table, because it can't
  guarantee the semantic of primary key.").
"""

from __future__ import annotations

from typing import Any, Mapping

from changelake.changelog.rowkind import INSERT_ONLY
from changelake.changelog.schema import Schema
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.kafka_table.options import KafkaTableOptions, ValueFieldsInclude, parse_options
from changelake.connectors.kafka_table.sink import KafkaTableSink
from changelake.connectors.kafka_table.source import KafkaTableSource

__all__ = ["create_sink", "create_source", "create_sink_from_ddl", "build_formats"]

DEFAULT_PREFIX = "default_catalog.default_database."


def _create_format(name: str, schema: Schema, options: Mapping[str, str]) -> Any:
    try:
        from changelake.formats import create_format
    except ImportError as exc:  # the formats package is not installed in this tree
        raise OptionValidationError(f"format '{name}' is not available: {exc}", option="format") from exc
    return create_format(name, schema, dict(options))


def build_formats(opts: KafkaTableOptions, schema: Schema, table_name: str) -> tuple[Any, Any | None]:
    """(value format, key format or None) for a table, checking Flink's format rules.

    Raises:
        OptionValidationError: a changelog format as key format, or a PRIMARY KEY with an
            insert-only value format; formats' own errors (unknown format, bad format options)
            pass through.
    """
    key_set = set(opts.key_fields)
    value_cols = [
        c for c in schema.names if not (opts.value_fields_include is ValueFieldsInclude.EXCEPT_KEY and c in key_set)
    ]
    value_format = _create_format(opts.value_format, schema.project(value_cols), opts.value_format_options)
    key_format = None
    if opts.key_format:
        key_schema = Schema.of([(n, schema.column(f).type) for n, f in zip(opts.key_names, opts.key_fields)])
        key_format = _create_format(opts.key_format, key_schema, opts.key_format_options)
        if frozenset(key_format.changelog_mode) != INSERT_ONLY:
            raise OptionValidationError(
                f"A key format should only deal with INSERT-only records; '{opts.key_format}' is a changelog format.",
                option="key.format",
            )
    if schema.primary_key and frozenset(value_format.changelog_mode) == INSERT_ONLY:
        raise OptionValidationError(
            f"The Kafka table '{table_name}' with '{opts.value_format}' format doesn't support defining PRIMARY KEY "
            f"constraint on the table, because it can't guarantee the semantic of primary key.",
            option="format",
        )
    return value_format, key_format


def _full_name(name: str) -> str:
    return name if name.count(".") >= 2 else DEFAULT_PREFIX + name


def create_sink(
    raw: Mapping[str, Any],
    schema: Schema,
    *,
    table_name: str = "kafka_sink",
    producer: Any | None = None,
) -> KafkaTableSink:
    """A ``kafka`` sink from WITH options and a schema (not yet open; call ``open()``).

    Args:
        raw: WITH options (``connector`` = ``kafka``, ``topic``, ``properties.bootstrap.servers``,
            ``format``/``value.format``, ...).
        schema: the table's columns.
        table_name: name used in messages; a bare name gets ``default_catalog.default_database.``.
        producer: share an existing (e.g. transactional) producer; see :class:`KafkaTableSink`.

    Raises:
        OptionValidationError: invalid options (see :func:`parse_options` and :func:`build_formats`).
    """
    full = _full_name(table_name)
    opts = parse_options(raw, schema, for_sink=True)
    value_format, key_format = build_formats(opts, schema, full)
    return KafkaTableSink(opts, schema, value_format, key_format, table_name=full, producer=producer)


def create_source(raw: Mapping[str, Any], schema: Schema, *, table_name: str = "kafka_source") -> KafkaTableSource:
    """A ``kafka`` source from WITH options and a schema (not yet open; call ``open()``).

    Raises:
        OptionValidationError: invalid options.
    """
    opts = parse_options(raw, schema, for_sink=False)
    value_format, key_format = build_formats(opts, schema, _full_name(table_name))
    return KafkaTableSource(opts, schema, value_format, key_format)


def _parse_ddl(ddl: str) -> Any:
    try:
        from changelake.connectors.upsert_kafka.ddl import parse_create_table
    except ImportError as exc:
        raise OptionValidationError(f"DDL parsing is not available: {exc}") from exc
    return parse_create_table(ddl)


def create_sink_from_ddl(ddl: str, **overrides: Any) -> KafkaTableSink:
    """A sink from ``CREATE TABLE name (...) WITH ('connector' = 'kafka', ...)`` text (parsed by
    the upsert-kafka connector's ``parse_create_table``). ``overrides`` go to :func:`create_sink`."""
    decl = _parse_ddl(ddl)
    overrides.setdefault("table_name", decl.name)
    return create_sink(decl.options, decl.schema, **overrides)
