"""The ``json`` format: one row <-> one JSON object of the schema's columns (Flink's ``json``).

Encoding writes the schema's columns in schema order with :mod:`changelake.formats.json_values`
values (compact, UTF-8). Decoding accepts an object (one row) or, as Flink since 1.15, an array of
objects (one row each); every decoded row is ``+I``. Without a schema, encoding writes the row's
values as they are and decoding returns plain JSON values (numbers with a fraction as float).

Example::

    fmt = JsonFormat(schema, {"fail-on-missing-field": "true"})
    fmt.encode(ChangelogRow.insert({"id": 1, "price": Decimal("9.90")}))  # b'{"id":1,"price":9.90}'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import INSERT_ONLY, RowKind
from changelake.changelog.schema import Schema
from changelake.formats.base import Format
from changelake.formats.errors import DecodeError, EncodeError, FormatOptionError
from changelake.formats.json_values import dumps, from_json_value, loads, to_json_untyped, to_json_value, to_plain
from changelake.formats.options import MapNullKeyMode, TimestampFormat, option

__all__ = ["JsonFormat", "JsonOptions", "JsonCodecOptions", "encode_object", "decode_object"]


@dataclass(frozen=True)
class JsonCodecOptions:
    """Options shared by every JSON-based format (Flink's ``JsonFormatOptions``)."""

    ignore_parse_errors: bool = option(
        "ignore-parse-errors", False, "Skip a message that cannot be parsed (yield no rows) instead of failing."
    )
    timestamp_format_standard: TimestampFormat = option(
        "timestamp-format.standard",
        TimestampFormat.SQL,
        "TIMESTAMP text: 'SQL' (yyyy-MM-dd HH:mm:ss.f) or 'ISO-8601' (yyyy-MM-ddTHH:mm:ss.f). Both are read.",
    )
    map_null_key_mode: MapNullKeyMode = option(
        "map-null-key.mode", MapNullKeyMode.FAIL, "Null MAP keys: FAIL, DROP or LITERAL (no MAP type yet)."
    )
    map_null_key_literal: str = option("map-null-key.literal", "null", "Literal for null MAP keys in LITERAL mode.")
    encode_decimal_as_plain_number: bool = option(
        "encode.decimal-as-plain-number",
        False,
        "Accepted for Flink compatibility; changelake always writes DECIMAL as a plain number.",
    )
    encode_ignore_null_fields: bool = option(
        "encode.ignore-null-fields", False, "Leave NULL columns out of the written object."
    )


@dataclass(frozen=True)
class JsonOptions(JsonCodecOptions):
    """Options of the ``json`` format."""

    fail_on_missing_field: bool = option(
        "fail-on-missing-field", False, "Fail when a schema column is absent from the object (else NULL)."
    )


def encode_object(
    values: Mapping[str, Any],
    schema: Schema | None,
    *,
    format: str,
    timestamp_format: TimestampFormat = TimestampFormat.SQL,
    ignore_null_fields: bool = False,
) -> dict[str, Any]:
    """The JSON object of one row's values: schema columns in order (missing -> null), or, without a
    schema, the row's own keys and values. Raises EncodeError naming the column."""
    obj: dict[str, Any] = {}
    if schema is None:
        for name, value in values.items():
            try:
                obj[name] = to_json_untyped(value, timestamp_format=timestamp_format)
            except TypeError as exc:
                raise EncodeError(str(exc), format=format, field=name, value=value) from exc
    else:
        for col in schema.columns:
            obj[col.name] = to_json_value(
                values.get(col.name), col.type, col.name, timestamp_format=timestamp_format, format=format
            )
    if ignore_null_fields:
        obj = {k: v for k, v in obj.items() if v is not None}
    return obj


def decode_object(
    obj: Any,
    schema: Schema | None,
    *,
    format: str,
    path: str | None = None,
    fail_on_missing_field: bool = False,
) -> dict[str, Any]:
    """Values of one row from a parsed JSON object (numbers as int/Decimal).

    With a schema: the schema's columns in order, absent ones NULL (or an error with
    ``fail_on_missing_field``), other keys ignored. Without one: every key, plain JSON values.

    Raises:
        DecodeError: not an object, a missing field, or a value that does not parse; ``field`` is
            ``<path>.<column>``.
    """
    if not isinstance(obj, dict):
        raise DecodeError(f"expected a JSON object, got {type(obj).__name__}", format=format, field=path)
    if schema is None:
        return {str(k): to_plain(v) for k, v in obj.items()}
    values: dict[str, Any] = {}
    for col in schema.columns:
        field = f"{path}.{col.name}" if path else col.name
        if col.name not in obj:
            if fail_on_missing_field:
                raise DecodeError(f"Could not find field with name '{col.name}'.", format=format, field=field)
            values[col.name] = None
            continue
        values[col.name] = from_json_value(obj[col.name], col.type, field, format=format)
    return values


class JsonFormat(Format):
    """Flink's ``json`` format (insert-only). See the module docstring."""

    name = "json"
    changelog_mode = INSERT_ONLY
    Options = JsonOptions
    schema_optional = True
    options: JsonOptions

    def _validate(self) -> None:
        if self.options.fail_on_missing_field and self.options.ignore_parse_errors:
            raise FormatOptionError(
                "fail-on-missing-field and ignore-parse-errors shouldn't both be true.", format=self.name
            )

    def encode(self, row: ChangelogRow) -> bytes:
        """The row's values as one compact JSON object; the row kind is not written (insert-only)."""
        obj = encode_object(
            row.values,
            self.schema,
            format=self.name,
            timestamp_format=self.options.timestamp_format_standard,
            ignore_null_fields=self.options.encode_ignore_null_fields,
        )
        return dumps(obj)

    def decode(self, data: bytes | None) -> list[ChangelogRow]:
        """One ``+I`` row per JSON object ([] for a null/empty message). Raises DecodeError."""
        if not data:
            return []
        try:
            try:
                doc = loads(data)
            except ValueError as exc:
                raise self._corrupt(f"malformed JSON: {exc}", data) from exc
            objects = doc if isinstance(doc, list) else [doc]
            rows = []
            for obj in objects:
                values = decode_object(
                    obj, self.schema, format=self.name, fail_on_missing_field=self.options.fail_on_missing_field
                )
                rows.append(ChangelogRow(RowKind.INSERT, values))
            return rows
        except DecodeError as exc:
            if self._ignore_parse_errors:
                return []
            if exc.excerpt is None:
                raise self._rewrap(exc, data) from exc.__cause__
            raise
