"""Errors of the formats layer."""

from __future__ import annotations

from typing import Any

from changelake.errors import ChangelakeError

__all__ = [
    "FormatError",
    "DecodeError",
    "EncodeError",
    "FormatOptionError",
    "UnknownFormatError",
    "FormatSchemaError",
    "SchemaRegistryError",
]


class FormatError(ChangelakeError):
    """Base class of format errors."""


class DecodeError(FormatError):
    """Bytes could not be decoded into changelog rows.

    Attributes name where: ``format``, ``field`` (dotted path, e.g. ``after.price``), ``topic``,
    ``partition``, ``offset`` (filled in by the connector that read the bytes) and an
    ``excerpt`` of at most 200 bytes of the input.
    """

    def __init__(
        self,
        message: str,
        *,
        format: str,
        field: str | None = None,
        excerpt: bytes | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = message
        self.format = format
        self.field = field
        self.excerpt = excerpt[:200] if excerpt is not None else None
        self.topic = topic
        self.partition = partition
        self.offset = offset
        super().__init__(self._render())

    def at(self, *, topic: str, partition: int, offset: int) -> "DecodeError":
        """Return this error with the Kafka position filled in (for connectors)."""
        self.topic, self.partition, self.offset = topic, partition, offset
        self.args = (self._render(),)
        return self

    def _render(self) -> str:
        where = []
        if self.topic is not None:
            where.append(f"topic {self.topic!r} partition {self.partition} offset {self.offset}")
        if self.field:
            where.append(f"field {self.field!r}")
        loc = f" at {', '.join(where)}" if where else ""
        exc = f"; message starts {self.excerpt!r}" if self.excerpt is not None else ""
        return f"Corrupt {self.format} message{loc}: {self.reason}{exc}"

    def __str__(self) -> str:
        return self._render()


class EncodeError(FormatError):
    """A changelog row could not be encoded; names the format, the column and the value's type."""

    def __init__(self, message: str, *, format: str, field: str | None = None, value: Any = None) -> None:
        self.format = format
        self.field = field
        where = f" field {field!r}" if field else ""
        super().__init__(f"Cannot encode{where} as {format}: {message}")


class FormatOptionError(FormatError):
    """A format option is unknown, missing, malformed or conflicts with another option.

    As Flink's format factories (``JsonFormatFactory.validateDecodingFormatOptions`` and
    ``FactoryUtil``): the message names the option, the rule and the value received (never the value
    of a secret option such as ``basic-auth.user-info``). ``option`` holds the offending key, or
    None when the error concerns several keys; ``format`` the format identifier.
    """

    def __init__(self, message: str, *, format: str, option: str | None = None) -> None:
        self.format = format
        self.option = option
        super().__init__(message)


class UnknownFormatError(FormatOptionError):
    """No format is registered under the requested identifier; the message lists the known ones."""

    def __init__(self, name: str, available: list[str]) -> None:
        self.name = name
        self.available = available
        super().__init__(
            f"Could not find any format for identifier {name!r}. "
            f"Available format identifiers are: {', '.join(available)}",
            format=name,
        )


class FormatSchemaError(FormatError):
    """The table schema cannot be used with this format.

    Examples: the ``raw`` format gets more than one column, the ``avro`` format gets a column name
    that is not a valid Avro name, or a format that needs a schema (csv, raw, avro) gets none.
    """

    def __init__(self, message: str, *, format: str) -> None:
        self.format = format
        super().__init__(message)


class SchemaRegistryError(FormatError):
    """A Confluent-compatible schema registry call failed.

    Attributes: ``url`` (the registry base URL, with any user-info removed), ``subject``,
    ``schema_id`` and ``status`` (HTTP status, or None when the registry could not be reached).
    The message never contains the ``basic-auth.user-info`` credentials.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str,
        subject: str | None = None,
        schema_id: int | None = None,
        status: int | None = None,
    ) -> None:
        self.url = url
        self.subject = subject
        self.schema_id = schema_id
        self.status = status
        where = [f"registry {url!r}"]
        if subject is not None:
            where.append(f"subject {subject!r}")
        if schema_id is not None:
            where.append(f"schema id {schema_id}")
        if status is not None:
            where.append(f"HTTP {status}")
        super().__init__(f"Schema registry call failed ({', '.join(where)}): {message}")
