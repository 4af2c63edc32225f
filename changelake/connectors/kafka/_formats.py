"""The one place the Kafka pipeline connector touches :mod:`changelake.formats`.

Keys use the formats' JSON value codec (:mod:`changelake.formats.json_values`) so that key bytes
equal what Flink CDC writes; values are encoded and decoded by the formats themselves.
"""

from __future__ import annotations

from typing import Any, Mapping

from changelake.changelog.schema import Schema
from changelake.changelog.types import DataType
from changelake.formats import json_values

__all__ = ["to_json_value", "json_compact", "create_format"]


def to_json_value(value: Any, dtype: DataType | None, field: str | None = None) -> Any:
    """A column value as Flink's JSON converters write it (``json_values.to_json_value``); without a
    type, as ``json_values.to_json_untyped``. Raises EncodeError / TypeError for unsuitable values."""
    if dtype is None:
        return json_values.to_json_untyped(value)
    return json_values.to_json_value(value, dtype, field)


def json_compact(obj: Any) -> str:
    """Compact JSON text (no spaces, UTF-8 kept, key order kept, DECIMAL as a plain number)."""
    return json_values.dumps(obj).decode("utf-8")


def create_format(name: str, schema: Schema | None, options: Mapping[str, str]) -> Any:
    """``changelake.formats.create_format`` (imported late: the formats registry is optional here)."""
    from changelake.formats import create_format as _create_format

    return _create_format(name, schema, dict(options))
