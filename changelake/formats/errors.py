"""Errors of the formats layer."""

from __future__ import annotations

from typing import Any

from changelake.errors import ChangelakeError

__all__ = ["FormatError", "DecodeError", "EncodeError"]


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
