"""The ``avro-confluent`` format: Avro records in Confluent's wire format (Flink's ``avro-confluent``).

A message is ``0x00`` (magic byte), the 4-byte big-endian id of the writer schema in a
Confluent-compatible schema registry, then the schemaless Avro binary record
(:mod:`changelake.formats.avro`). Encoding registers the table's Avro schema under ``subject`` on
first use (one registry call, then cached); decoding fetches the writer schema by id (cached) and
resolves it against the table's schema as Avro does, so records written with an older compatible
schema still decode. Without a table schema, decoding returns fastavro's values of the writer
schema. Every decoded row is ``+I``.

The connector fills ``subject`` with ``<topic>-key`` / ``<topic>-value`` when it is not given, as
Flink's ``KafkaConnectorOptionsUtil.autoCompleteSchemaRegistrySubject``.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

import fastavro

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import INSERT_ONLY, RowKind
from changelake.formats.avro import AvroCodec
from changelake.formats.base import Format
from changelake.formats.errors import DecodeError, FormatOptionError
from changelake.options import key, option_field
from changelake.formats.schema_registry import SchemaRegistryClient, redact_url

__all__ = ["AvroConfluentFormat", "AvroConfluentOptions", "MAGIC_BYTE", "wire_header", "split_wire"]

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")


def wire_header(schema_id: int) -> bytes:
    """The 5-byte Confluent header: magic byte 0 and the big-endian schema id."""
    return _HEADER.pack(MAGIC_BYTE, schema_id)


def split_wire(data: bytes, *, format: str = "avro-confluent") -> tuple[int, bytes]:
    """(schema id, Avro body) of a Confluent-framed message. Raises DecodeError ("Unknown magic byte!")."""
    if len(data) < _HEADER.size:
        raise DecodeError(f"message of {len(data)} bytes is shorter than the 5-byte header", format=format, excerpt=data)
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise DecodeError(f"Unknown magic byte! (got {magic}, expected 0)", format=format, excerpt=data)
    return schema_id, data[_HEADER.size :]


@dataclass(frozen=True)
class AvroConfluentOptions:
    """Options of the ``avro-confluent`` format (Flink's ``AvroConfluentFormatOptions``)."""

    url: str = option_field(
        key("url").string_type().required()
        .with_description("Schema registry URL, e.g. http://127.0.0.1:8081.")
    )
    subject: str | None = option_field(
        key("subject").string_type().no_default_value()
        .with_description("Subject to register the schema under (needed to encode).")
    )
    basic_auth_credentials_source: str | None = option_field(
        key("basic-auth.credentials-source").string_type().no_default_value()
        .with_description("Basic auth credentials source (only USER_INFO is used).")
    )
    basic_auth_user_info: str | None = option_field(
        key("basic-auth.user-info").string_type().no_default_value()
        .with_description("Basic auth 'user:password'.").as_secret()
    )
    bearer_auth_credentials_source: str | None = option_field(
        key("bearer-auth.credentials-source").string_type().no_default_value()
        .with_description("Bearer auth credentials source (only STATIC_TOKEN is used).")
    )
    bearer_auth_token: str | None = option_field(
        key("bearer-auth.token").string_type().no_default_value()
        .with_description("Bearer auth token.").as_secret()
    )
    timestamp_mapping_legacy: bool = option_field(
        key("timestamp_mapping.legacy").bool_type().default_value(True)
        .with_description("TIMESTAMP -> timestamp-* (true, Flink's default) or local-timestamp-*.")
    )


class AvroConfluentFormat(Format):
    """Flink's ``avro-confluent`` format (insert-only). See the module docstring.

    Example::

        fmt = AvroConfluentFormat(schema, {"url": "http://127.0.0.1:8081", "subject": "orders-value"})
        data = fmt.encode(row)  # b"\\x00" + id + avro body; registers the schema on first use
    """

    name = "avro-confluent"
    changelog_mode = INSERT_ONLY
    Options = AvroConfluentOptions
    schema_optional = True
    options: AvroConfluentOptions

    def _validate(self) -> None:
        if not self.options.url.lower().startswith(("http://", "https://")):
            raise FormatOptionError(
                f"Option 'url' must be an http(s) URL, but was: {redact_url(self.options.url)}",
                format=self.name,
                option="url",
            )
        self.registry = SchemaRegistryClient(
            self.options.url, user_info=self.options.basic_auth_user_info, bearer_token=self.options.bearer_auth_token
        )
        self.codec = (
            AvroCodec(self.schema, legacy_timestamp_mapping=self.options.timestamp_mapping_legacy, format=self.name)
            if self.schema is not None
            else None
        )
        self._schema_id: int | None = None

    def __repr__(self) -> str:
        return f"AvroConfluentFormat(url={redact_url(self.options.url)!r}, subject={self.options.subject!r})"

    def encode(self, row: ChangelogRow) -> bytes:
        """Header + Avro body. Registers the schema on first call. Raises EncodeError,
        SchemaRegistryError, or FormatOptionError when ``subject`` or the table schema is missing."""
        if self.codec is None:
            raise FormatOptionError("the 'avro-confluent' format needs a table schema to encode", format=self.name)
        if self.options.subject is None:
            raise FormatOptionError(
                "Option 'subject' is required for serialization", format=self.name, option="subject"
            )
        if self._schema_id is None:
            self._schema_id = self.registry.register(self.options.subject, self.codec.avro_schema)
        return wire_header(self._schema_id) + self.codec.encode_values(row.values)

    def decode(self, data: bytes | None) -> list[ChangelogRow]:
        """One ``+I`` row ([] for a null/empty message). Raises DecodeError, SchemaRegistryError."""
        if not data:
            return []
        schema_id, body = split_wire(data, format=self.name)
        writer_schema = self.registry.get_schema(schema_id)
        if self.codec is not None:
            return [ChangelogRow(RowKind.INSERT, self.codec.decode_values(body, writer_schema, excerpt=data))]
        try:
            record: Any = fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(writer_schema), None)
        except Exception as exc:  # fastavro raises EOFError, ValueError, ...
            raise DecodeError(f"malformed Avro record: {exc!r}", format=self.name, excerpt=data) from exc
        if not isinstance(record, dict):
            raise DecodeError("the writer schema is not a record", format=self.name, excerpt=data)
        return [ChangelogRow(RowKind.INSERT, dict(record))]
