"""Parsing format options, as Flink's format factories check their ``ConfigOption``s.

Each format declares its options once, in the engine's one option idiom
(:class:`changelake.options.ConfigOption`, built with :func:`changelake.options.key`), as the
fields of a frozen dataclass made with :func:`changelake.options.option_field`.
:func:`parse_options` turns the raw string map (``{"ignore-parse-errors": "true"}``, format prefix
already stripped) into that dataclass, validating in Flink's order: unknown keys, then required
keys, then values, with the formats' wording (which names the format).

Example::

    @dataclass(frozen=True)
    class JsonOptions:
        ignore_parse_errors: bool = option_field(
            key("ignore-parse-errors").bool_type().default_value(False).with_description("Skip bad messages."))

    opts = parse_options(JsonOptions, {"ignore-parse-errors": "true"}, format="json")
"""

from __future__ import annotations

import enum
from typing import Any, Mapping, TypeVar

from changelake.errors import OptionValidationError
from changelake.formats.errors import FormatOptionError
from changelake.options import ConfigOption, declared_options

__all__ = ["parse_options", "option_keys", "TimestampFormat", "MapNullKeyMode"]

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


def option_keys(cls: type) -> set[str]:
    """The option keys declared by an options dataclass."""
    return set(declared_options(cls))


def _value(option: ConfigOption[Any], text: str, *, format: str) -> Any:
    """``option``'s parse of ``text``, its error worded as Flink's format factories word it."""
    try:
        return option.parse_value(text)
    except OptionValidationError:
        pass
    if option.type == "Boolean":
        rule = f"Unrecognized option for boolean: {text}. Expected either true or false(case insensitive)"
    elif option.type.startswith("Enum: "):
        values = option.type[len("Enum: "):].replace(" | ", ", ")
        raise FormatOptionError(
            f"Unsupported value '{text}' for {option.key}. Supported values are [{values}].",
            format=format,
            option=option.key,
        )
    else:
        rule = f"expected {'an integer' if option.type in ('Integer', 'Long') else option.type}, got " + (
            "***" if option.secret else repr(text)
        )
    raise FormatOptionError(
        f"Invalid value for option '{option.key}' of format '{format}': {rule}", format=format, option=option.key
    )


def parse_options(cls: type[T], raw: Mapping[str, str], *, format: str) -> T:
    """Validate and convert raw string options into the options dataclass ``cls``.

    Args:
        cls: a frozen dataclass whose fields were declared with :func:`changelake.options.option_field`.
        raw: option key -> string value, with the format prefix stripped.
        format: the format identifier, for messages (``json``, ``debezium-json``, ...).

    Returns:
        An instance of ``cls``; options not given keep their defaults.

    Raises:
        FormatOptionError: an unknown key (the message lists unsupported and supported keys, as
            Flink's "Unsupported options found for 'json'"), a missing required key, or a value
            that does not parse (booleans, integers, enum choices).
    """
    fields = declared_options(cls)
    unknown = sorted(k for k in raw if k not in fields)
    if unknown:
        raise FormatOptionError(
            f"Unsupported options found for '{format}'. Unsupported options: {', '.join(unknown)}. "
            f"Supported options: {', '.join(sorted(fields))}",
            format=format,
            option=unknown[0],
        )
    missing = sorted(k for k, (_, o) in fields.items() if o.required and k not in raw)
    if missing:
        raise FormatOptionError(
            f"One or more required options are missing for format '{format}'. "
            f"Missing required options are: {', '.join(missing)}",
            format=format,
            option=missing[0],
        )
    values = {name: _value(o, str(raw[k]), format=format) for k, (name, o) in fields.items() if k in raw}
    return cls(**values)
