"""Formats: bytes <-> changelog rows, one module per format, identifiers spelled as Flink's.

``FORMATS`` maps each identifier to its class; :func:`create_format` builds one from a schema and
the format's own options (prefix stripped, see :func:`format_options`)::

    fmt = create_format("debezium-json", schema, {"ignore-parse-errors": "true"})
    rows = fmt.decode(message_value)

Insert-only formats (json, csv, raw, avro, avro-confluent) are the only ones allowed as key or
value formats of ``upsert-kafka``; changelog formats (debezium-json, canal-json, maxwell-json)
carry +I/-U/+U/-D themselves (:func:`is_insert_only`).
"""

from __future__ import annotations

from typing import Mapping

from changelake.changelog.rowkind import INSERT_ONLY
from changelake.changelog.schema import Schema
from changelake.formats.avro import AvroFormat
from changelake.formats.avro_confluent import AvroConfluentFormat
from changelake.formats.base import ChangelogFormat, Format
from changelake.formats.canal_json import CanalJsonFormat
from changelake.formats.csv import CsvFormat
from changelake.formats.debezium_json import DebeziumJsonFormat
from changelake.formats.errors import (
    DecodeError,
    EncodeError,
    FormatError,
    FormatOptionError,
    FormatSchemaError,
    SchemaRegistryError,
    UnknownFormatError,
)
from changelake.formats.json import JsonFormat
from changelake.formats.maxwell_json import MaxwellJsonFormat
from changelake.formats.raw import RawFormat

__all__ = [
    "FORMATS",
    "Format",
    "ChangelogFormat",
    "create_format",
    "format_class",
    "format_options",
    "is_insert_only",
    "FormatError",
    "DecodeError",
    "EncodeError",
    "FormatOptionError",
    "FormatSchemaError",
    "SchemaRegistryError",
    "UnknownFormatError",
]

#: Format identifier (as Flink spells it) -> format class.
FORMATS: dict[str, type[Format]] = {
    cls.name: cls
    for cls in (
        JsonFormat,
        CsvFormat,
        RawFormat,
        AvroFormat,
        AvroConfluentFormat,
        DebeziumJsonFormat,
        CanalJsonFormat,
        MaxwellJsonFormat,
    )
}


def format_class(name: str) -> type[Format]:
    """The class registered under ``name``. Raises UnknownFormatError listing the identifiers."""
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownFormatError(name, sorted(FORMATS)) from None


def create_format(name: str, schema: Schema | None, options: Mapping[str, str] | None = None) -> Format:
    """Build format ``name`` for rows of ``schema`` with its own options (prefix stripped).

    Raises:
        UnknownFormatError: no such format (the message lists the available identifiers).
        FormatOptionError: unknown, missing, malformed or conflicting options.
        FormatSchemaError: the schema does not suit the format.
    """
    return format_class(name)(schema, options or {})


def is_insert_only(name: str) -> bool:
    """True when format ``name`` only produces +I rows (json, csv, raw, avro, avro-confluent).

    Raises UnknownFormatError for an unknown identifier.
    """
    return format_class(name).changelog_mode == INSERT_ONLY


def format_options(options: Mapping[str, str], name: str, prefix: str = "") -> dict[str, str]:
    """The options of format ``name`` from a WITH/pipeline option map, prefix stripped.

    ``format_options({"value.json.ignore-parse-errors": "true", "topic": "t"}, "json", "value.")``
    returns ``{"ignore-parse-errors": "true"}`` (Flink's ``<prefix><format>.<key>`` convention).
    """
    head = f"{prefix}{name}."
    return {k[len(head) :]: v for k, v in options.items() if k.startswith(head)}
