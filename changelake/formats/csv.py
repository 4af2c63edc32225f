"""The ``csv`` format: one row <-> one CSV line, fields in schema order (Flink's ``csv``).

Values are the text of the JSON codec (:mod:`changelake.formats.json_values`): numbers and
DECIMAL as plain text with the column's scale, booleans ``true``/``false``, temporals in SQL text,
bytes as base64. Quoting and escaping are Python's :mod:`csv` module with Flink's option names.
No line separator is written; one message holds one line (several lines decode to several rows).

NULL: with ``null-literal`` set, NULL is written as that literal and only that literal reads back
as NULL (an empty field of a string column is the empty string). Without it (the default, as
Flink), NULL is written as an empty field and an empty field reads back as NULL for every type,
so an empty string cannot be told from NULL; set ``null-literal`` when that matters.
Every decoded row is ``+I``.
"""

from __future__ import annotations

import codecs
import csv
import io
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import INSERT_ONLY, RowKind
from changelake.formats.base import Format
from changelake.formats.errors import DecodeError, EncodeError, FormatOptionError
from changelake.formats.json_values import json_decoder_for, json_encoder_for
from changelake.options import key, option_field

__all__ = ["CsvFormat", "CsvOptions"]


@dataclass(frozen=True)
class CsvOptions:
    """Options of the ``csv`` format (Flink's ``CsvFormatOptions``)."""

    field_delimiter: str = option_field(
        key("field-delimiter").string_type().default_value(",")
        .with_description("Field delimiter, one character (Java escapes such as \\t allowed).")
    )
    disable_quote_character: bool = option_field(
        key("disable-quote-character").bool_type().default_value(False)
        .with_description("Never quote fields.")
    )
    quote_character: str = option_field(
        key("quote-character").string_type().default_value('"')
        .with_description("Quote character, one character.")
    )
    allow_comments: bool = option_field(
        key("allow-comments").bool_type().default_value(False)
        .with_description("Ignore lines that start with '#'.")
    )
    ignore_parse_errors: bool = option_field(
        key("ignore-parse-errors").bool_type().default_value(False)
        .with_description("Skip unparsable lines instead of failing.")
    )
    array_element_delimiter: str = option_field(
        key("array-element-delimiter").string_type().default_value(";")
        .with_description("Array element delimiter (no ARRAY type yet).")
    )
    escape_character: str | None = option_field(
        key("escape-character").string_type().no_default_value()
        .with_description("Escape character, one character (none by default).")
    )
    null_literal: str | None = option_field(
        key("null-literal").string_type().no_default_value()
        .with_description("Text read and written as NULL (none by default: empty field).")
    )
    write_bigdecimal_in_scientific_notation: bool = option_field(
        key("write-bigdecimal-in-scientific-notation").bool_type().default_value(False)
        .with_description("Accepted for compatibility; DECIMAL is always plain text.")
    )


def _unescape(text: str) -> str:
    return codecs.decode(text, "unicode_escape") if "\\" in text else text


class CsvFormat(Format):
    """Flink's ``csv`` format (insert-only, needs a schema). See the module docstring."""

    name = "csv"
    changelog_mode = INSERT_ONLY
    Options = CsvOptions
    options: CsvOptions

    def _validate(self) -> None:
        opts = self.options
        for key, value in (
            ("field-delimiter", opts.field_delimiter),
            ("quote-character", opts.quote_character),
            ("escape-character", opts.escape_character),
        ):
            if value is not None and len(_unescape(value)) != 1:
                raise FormatOptionError(
                    f"Option '{key}' must be a string with single character, but was: {value}",
                    format=self.name,
                    option=key,
                )
        if opts.disable_quote_character and "quote-character" in self._given:
            raise FormatOptionError(
                "Format cannot define a quote character and disabled quote character at the same time.",
                format=self.name,
            )
        escape = _unescape(opts.escape_character) if opts.escape_character else None
        self._dialect: dict[str, Any] = {
            "delimiter": _unescape(opts.field_delimiter),
            "quotechar": _unescape(opts.quote_character),
            "escapechar": escape,
            "doublequote": escape is None,
            "quoting": csv.QUOTE_NONE if opts.disable_quote_character else csv.QUOTE_MINIMAL,
            "lineterminator": "\n",
            "strict": True,
        }
        # per-column converters, built once (same results and errors as to/from_json_value)
        columns = self.schema.columns if self.schema is not None else ()
        self._encoders = [(c.name, json_encoder_for(c.type, c.name, format=self.name)) for c in columns]
        self._decoders = [
            (c.name, None if c.type.is_string else json_decoder_for(c.type, c.name, format=self.name))
            for c in columns
        ]

    def __init__(self, schema: Any, options: Any = None) -> None:
        self._given = set(options or {})
        super().__init__(schema, options)

    def _field_text(self, v: Any) -> str:
        """The CSV field of a JSON value (of ``json_encoder_for``)."""
        if v is None:
            return self.options.null_literal if self.options.null_literal is not None else ""
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, Decimal):
            return format(v, "f")
        if isinstance(v, float):
            return repr(v)
        return str(v)

    def encode(self, row: ChangelogRow) -> bytes:
        """One CSV line (no line separator) of the schema's columns; the row kind is not written."""
        assert self.schema is not None
        values = row.values
        fields = [self._field_text(enc(values.get(name))) for name, enc in self._encoders]
        buf = io.StringIO()
        try:
            csv.writer(buf, **self._dialect).writerow(fields)
        except csv.Error as exc:
            raise EncodeError(f"{exc} (set 'escape-character' or enable quoting)", format=self.name) from exc
        return buf.getvalue()[: -len("\n")].encode("utf-8")

    def decode(self, data: bytes | None) -> list[ChangelogRow]:
        """One ``+I`` row per CSV line ([] for a null/empty message or a comment). Raises DecodeError."""
        if not data:
            return []
        try:
            return self._decode(data)
        except DecodeError as exc:
            if self._ignore_parse_errors:
                return []
            raise

    def _decode(self, data: bytes) -> list[ChangelogRow]:
        assert self.schema is not None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._corrupt(f"not UTF-8 text: {exc}", data) from exc
        try:
            records = list(csv.reader(io.StringIO(text), **self._dialect))
        except csv.Error as exc:
            raise self._corrupt(f"malformed CSV: {exc}", data) from exc
        rows = []
        columns = self._decoders
        literal = self.options.null_literal
        for record in records:
            if not record or (self.options.allow_comments and record[0].startswith("#")):
                continue
            if len(record) != len(columns):
                raise self._corrupt(
                    f"Row length mismatch. {len(columns)} fields expected but was {len(record)}.", data
                )
            values: dict[str, Any] = {}
            for (name, dec), field in zip(columns, record):
                if (literal is not None and field == literal) or (literal is None and field == ""):
                    values[name] = None
                elif dec is None:  # a string column
                    values[name] = field
                else:
                    try:
                        values[name] = dec(field)
                    except DecodeError as exc:
                        raise self._rewrap(exc, data) from exc.__cause__
            rows.append(ChangelogRow(RowKind.INSERT, values))
        return rows
