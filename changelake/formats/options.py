"""Declaring and parsing format options, as Flink's ``ConfigOption``s of a format factory.

Each format declares its options once, as a frozen dataclass whose fields are made with
:func:`option` (Flink key, default, description, secret flag). :func:`parse_options` turns the
raw string map (``{"ignore-parse-errors": "true"}``, format prefix already stripped) into that
dataclass, validating in Flink's order: unknown keys, then required keys, then values.

Example::

    @dataclass(frozen=True)
    class JsonOptions:
        ignore_parse_errors: bool = option("ignore-parse-errors", False, "Skip bad messages.")

    opts = parse_options(JsonOptions, {"ignore-parse-errors": "true"}, format="json")
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, Mapping, TypeVar

from changelake.formats.errors import FormatOptionError

__all__ = ["option", "parse_options", "option_keys", "TimestampFormat", "MapNullKeyMode", "parse_bool"]

T = TypeVar("T")


class TimestampFormat(enum.Enum):
    """``timestamp-format.standard`` of Flink's JSON formats."""

    SQL = "SQL"  # 2024-01-01 10:00:00.12 (and ...Z for TIMESTAMP_LTZ)
    ISO_8601 = "ISO-8601"  # 2024-01-01T10:00:00.12 (and ...Z for TIMESTAMP_LTZ)


class MapNullKeyMode(enum.Enum):
    """``map-null-key.mode`` of Flink's JSON formats (accepted for compatibility; changelake has no MAP type)."""

    FAIL = "FAIL"
    DROP = "DROP"
    LITERAL = "LITERAL"


def option(key: str, default: Any, doc: str, *, secret: bool = False, required: bool = False) -> Any:
    """A dataclass field declaring one format option.

    Args:
        key: the option key as Flink spells it, without the format prefix (``ignore-parse-errors``).
        default: the typed default (None for an optional option without default).
        doc: one-sentence description (units and accepted values).
        secret: the value is a credential: never shown in errors, ``repr`` or logs.
        required: the option must be given (checked after unknown keys, as Flink's FactoryUtil).
    """
    return dataclasses.field(
        default=default,
        repr=not secret,
        metadata={"key": key, "doc": doc, "secret": secret, "required": required},
    )


def option_keys(cls: type) -> set[str]:
    """The option keys declared by an options dataclass."""
    return {f.metadata["key"] for f in dataclasses.fields(cls)}


def parse_bool(text: str, *, format: str, key: str) -> bool:
    """Parse a boolean option as Flink does: ``true``/``false``, case-insensitive.

    Raises:
        FormatOptionError: any other text ("Unrecognized option for boolean").
    """
    low = text.strip().lower()
    if low == "true":
        return True
    if low == "false":
        return False
    raise FormatOptionError(
        f"Invalid value for option '{key}' of format '{format}': "
        f"Unrecognized option for boolean: {text}. Expected either true or false(case insensitive)",
        format=format,
        option=key,
    )


def _convert(tp: Any, text: str, *, format: str, key: str, secret: bool) -> Any:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(inner[0], text, format=format, key=key, secret=secret)
    if tp is bool:
        return parse_bool(text, format=format, key=key)
    if tp is int:
        try:
            return int(text.strip())
        except ValueError:
            shown = "***" if secret else repr(text)
            raise FormatOptionError(
                f"Invalid value for option '{key}' of format '{format}': expected an integer, got {shown}",
                format=format,
                option=key,
            ) from None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if member.value == text:
                return member
        values = ", ".join(str(m.value) for m in tp)
        raise FormatOptionError(
            f"Unsupported value '{text}' for {key}. Supported values are [{values}].",
            format=format,
            option=key,
        )
    return text


def parse_options(cls: type[T], raw: Mapping[str, str], *, format: str) -> T:
    """Validate and convert raw string options into the options dataclass ``cls``.

    Args:
        cls: a frozen dataclass whose fields were declared with :func:`option`.
        raw: option key -> string value, with the format prefix stripped.
        format: the format identifier, for messages (``json``, ``debezium-json``, ...).

    Returns:
        An instance of ``cls``; options not given keep their defaults.

    Raises:
        FormatOptionError: an unknown key (the message lists unsupported and supported keys, as
            Flink's "Unsupported options found for 'json'"), a missing required key, or a value
            that does not parse (booleans, integers, enum choices).
    """
    fields = {f.metadata["key"]: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(k for k in raw if k not in fields)
    if unknown:
        raise FormatOptionError(
            f"Unsupported options found for '{format}'. Unsupported options: {', '.join(unknown)}. "
            f"Supported options: {', '.join(sorted(fields))}",
            format=format,
            option=unknown[0],
        )
    missing = sorted(k for k, f in fields.items() if f.metadata["required"] and k not in raw)
    if missing:
        raise FormatOptionError(
            f"One or more required options are missing for format '{format}'. "
            f"Missing required options are: {', '.join(missing)}",
            format=format,
            option=missing[0],
        )
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, f in fields.items():
        if key in raw:
            values[f.name] = _convert(
                hints[f.name], str(raw[key]), format=format, key=key, secret=f.metadata["secret"]
            )
    return cls(**values)
