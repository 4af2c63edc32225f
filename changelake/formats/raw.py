"""The ``raw`` format: the message is the value of the table's single column (Flink's ``raw``).

STRING/CHAR/VARCHAR columns are encoded with ``charset`` (UTF-8 by default); BINARY/VARBINARY/
BYTES are the bytes as they are; BOOLEAN (1 byte), TINYINT (1), SMALLINT (2), INT (4), BIGINT
(8), FLOAT (4) and DOUBLE (8) are fixed-width binary numbers in ``endianness`` order (big-endian
by default), as Flink's ``RawFormatSerializationSchema``. A NULL value is a null message
(``encode`` returns None) and a null message decodes to one row holding NULL, as Flink (which is
why raw values and upsert-kafka tombstones do not mix).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import INSERT_ONLY, RowKind
from changelake.changelog.types import TypeRoot
from changelake.formats.base import Format
from changelake.formats.errors import DecodeError, EncodeError, FormatOptionError, FormatSchemaError
from changelake.options import key, option_field

__all__ = ["RawFormat", "RawOptions"]

_NUMBERS = {
    TypeRoot.BOOLEAN: "?",
    TypeRoot.TINYINT: "b",
    TypeRoot.SMALLINT: "h",
    TypeRoot.INT: "i",
    TypeRoot.BIGINT: "q",
    TypeRoot.FLOAT: "f",
    TypeRoot.DOUBLE: "d",
}


@dataclass(frozen=True)
class RawOptions:
    """Options of the ``raw`` format (Flink's ``RawFormatOptions``)."""

    charset: str = option_field(
        key("charset").string_type().default_value("UTF-8")
        .with_description("Charset of STRING values (a Python codec name).")
    )
    endianness: str = option_field(
        key("endianness").string_type().default_value("big-endian")
        .with_description("Byte order of numeric values: big-endian or little-endian.")
    )


class RawFormat(Format):
    """Flink's ``raw`` format (insert-only, exactly one column). See the module docstring."""

    name = "raw"
    changelog_mode = INSERT_ONLY
    Options = RawOptions
    options: RawOptions

    def _validate(self) -> None:
        assert self.schema is not None
        columns = self.schema.columns
        if len(columns) != 1:
            raise FormatSchemaError(
                "The 'raw' format only supports single physical column. However the defined schema "
                f"contains {len(columns)} physical columns: {[c.name for c in columns]}",
                format=self.name,
            )
        self._column = columns[0]
        dtype = self._column.type
        if self.options.endianness not in ("big-endian", "little-endian"):
            raise FormatOptionError(
                f"Unsupported endianness name: {self.options.endianness}. "
                "Valid values of 'raw.endianness' option are 'big-endian' and 'little-endian'.",
                format=self.name,
                option="endianness",
            )
        try:
            "".encode(self.options.charset)
        except LookupError:
            raise FormatOptionError(
                f"Unsupported charset '{self.options.charset}' for option 'charset'",
                format=self.name,
                option="charset",
            ) from None
        if not (dtype.is_string or dtype.is_binary or dtype.root in _NUMBERS):
            raise FormatSchemaError(
                f"The 'raw' format doesn't supports '{dtype}' as column type of '{self._column.name}'.",
                format=self.name,
            )
        order = ">" if self.options.endianness == "big-endian" else "<"
        self._struct = struct.Struct(order + _NUMBERS[dtype.root]) if dtype.root in _NUMBERS else None

    def encode(self, row: ChangelogRow) -> bytes | None:
        """The column's value as bytes, or None for NULL. Raises EncodeError for a wrong value type."""
        col = self._column
        value = row.values.get(col.name)
        if value is None:
            return None
        try:
            if col.type.is_string and isinstance(value, str):
                return value.encode(self.options.charset)
            if col.type.is_binary and isinstance(value, (bytes, bytearray, memoryview)):
                return bytes(value)
            if self._struct is not None and isinstance(value, (int, float)):
                return self._struct.pack(value)
        except (UnicodeEncodeError, struct.error) as exc:
            raise EncodeError(str(exc), format=self.name, field=col.name, value=value) from exc
        raise EncodeError(
            f"a {type(value).__name__} value does not suit type {col.type}", format=self.name, field=col.name
        )

    def decode(self, data: bytes | None) -> list[ChangelogRow]:
        """Exactly one ``+I`` row; a null message gives NULL. Raises DecodeError (bad charset/width)."""
        col = self._column
        if data is None:
            return [ChangelogRow(RowKind.INSERT, {col.name: None})]
        convert: Callable[[bytes], Any]
        if col.type.is_string:
            convert = lambda b: b.decode(self.options.charset)  # noqa: E731
        elif col.type.is_binary:
            convert = bytes
        else:
            assert self._struct is not None
            convert = lambda b: self._struct.unpack(b)[0]  # type: ignore[union-attr]  # noqa: E731
        try:
            return [ChangelogRow(RowKind.INSERT, {col.name: convert(data)})]
        except (UnicodeDecodeError, struct.error) as exc:
            raise DecodeError(str(exc), format=self.name, field=col.name, excerpt=data) from exc
