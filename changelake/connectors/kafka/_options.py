"""Declaring and validating string options the way Flink CDC's ``FactoryHelper`` does.

Each option is declared once (:class:`Option`: key, parser, default, description). Validation runs
in Flink's order: unknown keys (outside the skipped prefixes) -> required keys -> values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Generic, Iterable, Mapping, TypeVar

from changelake.connectors import options as _options
from changelake.connectors.errors import OptionValidationError

__all__ = [
    "Option",
    "parse_bool",
    "parse_int",
    "parse_duration",
    "parse_enum",
    "validate_keys",
    "validate_required",
    "prefixed",
]

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


@dataclass(frozen=True)
class Option(Generic[T]):
    """One declared option: ``key`` (Flink spelling), ``parse(text, key) -> value``, default, doc."""

    key: str
    parse: Callable[[str, str], T]
    default: T | None
    doc: str

    def get(self, raw: Mapping[str, str]) -> T | None:
        """The parsed value of this option in ``raw``, or the default. Raises OptionValidationError."""
        if self.key not in raw or raw[self.key] is None:
            return self.default
        return self.parse(str(raw[self.key]), self.key)


def parse_str(text: str, key: str) -> str:
    return text


def parse_bool(text: str, key: str) -> bool:
    """``true``/``false`` (case-insensitive), as Flink's ConfigOption<Boolean>."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise OptionValidationError(
        f"Could not parse value '{text}' for key '{key}'. Expected a boolean (true or false).", option=key
    )


def parse_int(minimum: int | None = None) -> Callable[[str, str], int]:
    def parse(text: str, key: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise OptionValidationError(
                f"Could not parse value '{text}' for key '{key}'. Expected an integer.", option=key
            ) from None
        if minimum is not None and value < minimum:
            raise OptionValidationError(
                f"The value of option '{key}' must be >= {minimum}, but is {value}", option=key
            )
        return value

    return parse


def parse_duration(text: str, key: str) -> timedelta:
    """Flink duration text (``30s``, ``500ms``, ``1 min``; a bare number is ms) -> timedelta, with
    :func:`changelake.connectors.options.parse_duration`. Raises OptionValidationError naming ``key``."""
    try:
        return _options.parse_duration(text)
    except ValueError:
        raise OptionValidationError(
            f"Could not parse value '{text}' for key '{key}'. Expected a duration such as '30s' or '500ms'.",
            option=key,
        ) from None


def parse_enum(cls: type[E]) -> Callable[[str, str], E]:
    """Parse a closed choice by its user-facing value (case-insensitive; ``_`` and ``-`` alike)."""

    def parse(text: str, key: str) -> E:
        norm = text.strip().lower().replace("_", "-")
        for member in cls:
            if str(member.value).lower().replace("_", "-") == norm:
                return member
        choices = ", ".join(str(m.value) for m in cls)
        raise OptionValidationError(
            f"Could not parse value '{text}' for key '{key}'. Expected one of: [{choices}]", option=key
        )

    return parse


def prefixed(raw: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """Keys starting with ``prefix``, prefix stripped (``properties.acks`` -> ``acks``)."""
    return {k[len(prefix):]: str(v) for k, v in raw.items() if k.startswith(prefix)}


def validate_keys(identifier: str, raw: Mapping[str, Any], options: Iterable[Option[Any]],
                  skip_prefixes: Iterable[str]) -> None:
    """Fail on keys that are neither declared nor under a skipped prefix.

    Message as Flink CDC's ``FactoryHelper.validateUnconsumedKeys``: "Unsupported options found for
    '<identifier>'." followed by the sorted unsupported keys and the supported keys, then the
    accepted prefixes as ``prefix*`` (e.g. ``properties.*``).
    """
    declared = sorted(o.key for o in options)
    prefixes = tuple(skip_prefixes)
    unknown = sorted(k for k in raw if k not in declared and not k.startswith(prefixes))
    if unknown:
        # The prefixed families (``properties.*``, the chosen formats' ``<format>.*``) are listed
        # too, so a user sees where e.g. ``properties.bootstrap.servers`` comes from.
        supported = declared + sorted(f"{p}*" for p in prefixes if p)
        raise OptionValidationError(
            f"Unsupported options found for '{identifier}'.\n\n"
            f"Unsupported options:\n\n" + "\n".join(unknown) + "\n\n"
            "Supported options:\n\n" + "\n".join(supported),
            option=unknown[0],
        )


def validate_required(raw: Mapping[str, Any], required: Iterable[str]) -> None:
    """Fail when required keys are missing or empty (message as Flink's FactoryHelper)."""
    missing = sorted(k for k in required if not str(raw.get(k) or "").strip())
    if missing:
        raise OptionValidationError(
            "One or more required options are missing.\n\nMissing required options are:\n\n" + "\n".join(missing),
            option=missing[0],
        )
