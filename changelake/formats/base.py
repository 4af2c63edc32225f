"""The shape every format has: :class:`Format` (rows) and :class:`ChangelogFormat` (change events).

A format is Flink's pair of (de)serialization schemas for one identifier: it turns one changelog
row into the bytes of one Kafka record value (or key) and back. Insert-only formats (json, csv,
raw, avro, avro-confluent) ignore the row kind when encoding and decode every message as ``+I``;
changelog formats (debezium-json, canal-json, maxwell-json) carry the kind in the message, and also
encode and decode whole :class:`~changelake.changelog.event.DataChangeEvent`s (before and after
images, table, commit time).
"""

from __future__ import annotations

import abc
from typing import Any, Callable, ClassVar, Mapping, TypeVar

from changelake.changelog.event import DataChangeEvent
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import INSERT_ONLY, RowKind
from changelake.changelog.schema import Schema
from changelake.formats.errors import DecodeError, FormatSchemaError
from changelake.formats.json_values import loads
from changelake.formats.options import option_keys, parse_options

T = TypeVar("T")

__all__ = ["Format", "ChangelogFormat"]


class Format(abc.ABC):
    """A format: ``encode(row) -> bytes`` and ``decode(bytes) -> [rows]``.

    Subclasses set ``name`` (Flink's identifier), ``changelog_mode`` (the row kinds ``decode`` can
    produce) and ``Options`` (a frozen dataclass declared with
    :func:`changelake.formats.options.option`).

    Args:
        schema: the columns of the rows (for a key format: the key columns, in key order), or None
            for formats that can work without one (json and the changelog formats then decode
            plain JSON values).
        options: the format's own options, prefix stripped (``{"ignore-parse-errors": "true"}``).

    Raises:
        FormatOptionError: unknown, missing, malformed or conflicting options.
        FormatSchemaError: the schema does not suit the format (e.g. raw with two columns).

    Constructors only validate and store; no I/O happens before the first encode/decode.
    """

    name: ClassVar[str]
    changelog_mode: ClassVar[frozenset[RowKind]] = INSERT_ONLY
    Options: ClassVar[type]
    #: whether the format can work without a schema
    schema_optional: ClassVar[bool] = False

    def __init__(self, schema: Schema | None, options: Mapping[str, str] | None = None) -> None:
        self.schema = schema
        self.options: Any = parse_options(self.Options, dict(options or {}), format=self.name)
        if schema is None and not self.schema_optional:
            raise FormatSchemaError(f"The '{self.name}' format needs a table schema", format=self.name)
        self._validate()

    def _validate(self) -> None:
        """Cross-option and schema rules of the format (override; raise FormatOptionError)."""

    @classmethod
    def supported_options(cls) -> set[str]:
        """The option keys this format accepts (without the format prefix)."""
        return option_keys(cls.Options)

    @abc.abstractmethod
    def encode(self, row: ChangelogRow) -> bytes | None:
        """Encode one row; None means "no record" (e.g. raw's NULL value).

        Columns missing from ``row.values`` are written as NULL; values of columns that are not
        in the schema are not written. Raises EncodeError naming the column.
        """

    @abc.abstractmethod
    def decode(self, data: bytes | None) -> list[ChangelogRow]:
        """Decode one message into zero or more rows (empty for a tombstone or a skipped message).

        Raises DecodeError (naming format, field path and an excerpt) unless the format's
        ``ignore-parse-errors`` is true, in which case a bad message yields ``[]``.
        """

    # -- helpers for subclasses --------------------------------------------------------------------
    def _corrupt(self, reason: str, data: bytes | None, field: str | None = None) -> DecodeError:
        return DecodeError(reason, format=self.name, field=field, excerpt=data)

    def _rewrap(self, err: DecodeError, data: bytes | None, prefix: str | None = None) -> DecodeError:
        """Re-raise a value-level DecodeError with this format's name, a field prefix and an excerpt."""
        field = err.field
        if prefix:
            field = f"{prefix}.{field}" if field else prefix
        new = DecodeError(err.reason, format=self.name, field=field, excerpt=data)
        new.__cause__ = err.__cause__
        return new

    @property
    def _ignore_parse_errors(self) -> bool:
        return bool(getattr(self.options, "ignore_parse_errors", False))

    def _decode_guarded(self, decode: Callable[[bytes], list[T]], data: bytes | None) -> list[T]:
        """Run ``decode(data)`` with the format's parse-error policy: ``[]`` for an empty message
        or, with ``ignore-parse-errors``, for a bad one; otherwise a DecodeError with an excerpt."""
        if not data:
            return []
        try:
            return decode(data)
        except DecodeError as exc:
            if self._ignore_parse_errors:
                return []
            if exc.excerpt is None:
                raise self._rewrap(exc, data) from exc.__cause__
            raise

    def _load_json_object(self, data: bytes) -> dict[str, Any]:
        """Parse a message that must be one JSON object. Raises DecodeError."""
        try:
            doc = loads(data)
        except ValueError as exc:
            raise self._corrupt(f"malformed JSON: {exc}", data) from exc
        if not isinstance(doc, dict):
            raise self._corrupt(f"expected a JSON object, got {type(doc).__name__}", data)
        return doc


class ChangelogFormat(Format):
    """A format whose messages carry change events (Flink's debezium-json, canal-json, maxwell-json).

    ``decode`` returns the events' rows (``c``/``r`` -> +I, ``u`` -> -U and +U, ``d`` -> -D, a
    truncate -> nothing), with ``metadata`` ``{"ts_ms": ..., "op": ...}``; use :meth:`decode_events`
    to see truncates and table identities.
    """

    changelog_mode = frozenset(RowKind)
    schema_optional = True

    @abc.abstractmethod
    def encode_event(self, event: DataChangeEvent) -> bytes | None:
        """Encode one change event; None means the format has no message for it."""

    def decode_events(self, data: bytes | None) -> list[DataChangeEvent]:
        """Decode one message into its change events ([] for a tombstone or a skipped message).

        Raises DecodeError (naming format, field path and an excerpt; see each format's
        ``_decode_events``) unless ``ignore-parse-errors``, which makes a bad message yield ``[]``.
        """
        return self._decode_guarded(self._decode_events, data)

    @abc.abstractmethod
    def _decode_events(self, data: bytes) -> list[DataChangeEvent]:
        """The events of one non-empty message; raises DecodeError."""

    def decode(self, data: bytes | None) -> list[ChangelogRow]:
        return [row for event in self.decode_events(data) for row in event.to_rows()]
