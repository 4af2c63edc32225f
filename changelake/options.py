"""Declaring options, the one idiom of the whole engine: Flink's ``ConfigOption``.

Every format, connector and pipeline block declares each of its options once, as a
:class:`ConfigOption` built with :func:`key`, as Flink's
``ConfigOptions.key("k").intType().defaultValue(3).withDescription("...")``::

    MAX_ROWS = key("sink.buffer-flush.max-rows").int_type(minimum=0).default_value(0) \
        .with_description("Max buffered keys; 0 disables.")
    MAX_ROWS.get({"sink.buffer-flush.max-rows": "100"})  # -> 100

A typed options dataclass binds its fields to declarations with :func:`option_field` (the
formats' options and the MySQL CDC source's); :func:`declared_options` lists them back.

The value types' parsers live here too: :func:`parse_duration` (Flink's
``TimeUtils.parseDuration``: ``30s``, ``500 ms``, ``2 min``; a bare number is milliseconds) and
:func:`parse_memory_size` (Flink's ``MemorySize.parseBytes``: ``64 mb``, ``1kb``, ``100 bytes``; a
bare number is bytes). Validating a whole option map, with each layer's wording, stays with the
layer: :func:`changelake.formats.options.parse_options` (formats) and
:mod:`changelake.connectors.options` (connectors: unknown keys, required keys, values, in Flink's
order). This module sits at the engine's root, below ``changelog`` and ``formats``, so that every
layer can use it.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable, Generic, Mapping, TypeVar

from changelake.errors import OptionValidationError

__all__ = [
    "ConfigOption",
    "OptionBuilder",
    "key",
    "option_field",
    "declared_options",
    "parse_str",
    "parse_bool",
    "parse_int",
    "parse_enum",
    "choices",
    "parse_duration",
    "parse_duration_option",
    "DURATION_UNITS_MS",
    "parse_memory_size",
    "parse_memory_option",
    "MEMORY_UNITS",
]

#: Flink's time-unit labels (``TimeUtils.TimeUnit``) -> milliseconds.
DURATION_UNITS_MS: dict[str, float] = {}
for _names, _ms in (
    (("d", "day", "days"), 86_400_000.0),
    (("h", "hour", "hours"), 3_600_000.0),
    (("m", "min", "mins", "minute", "minutes"), 60_000.0),
    (("s", "sec", "secs", "second", "seconds"), 1_000.0),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1.0),
    (("us", "µs", "micro", "micros", "microsecond", "microseconds"), 0.001),
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 0.000001),
):
    for _n in _names:
        DURATION_UNITS_MS[_n] = _ms
_DURATION_RE = re.compile(r"^\s*(\d+)\s*([a-zA-Zµ]*)\s*$")


def parse_duration(text: str) -> timedelta:
    """A Flink duration -> timedelta (microsecond resolution), as ``TimeUtils.parseDuration``.

    Accepts ``<integer>[ ]<unit>`` with the units of :data:`DURATION_UNITS_MS` (case-insensitive);
    a bare number is milliseconds.

    Raises:
        ValueError: not a duration ("expected a duration such as '500 ms', ...") or an unknown
            unit ("unknown time unit 'fortnight' in ..."). Callers add the option key.
    """
    m = _DURATION_RE.match(str(text))
    if not m:
        raise ValueError(f"expected a duration such as '500 ms', '1 s', '2 min', '1 h', got {text!r}")
    unit = m.group(2).lower() or "ms"
    if unit not in DURATION_UNITS_MS:
        raise ValueError(
            f"unknown time unit {m.group(2)!r} in {text!r}; use one of ms, s, min, h, d (or their long names)"
        )
    return timedelta(milliseconds=int(m.group(1)) * DURATION_UNITS_MS[unit])


# -- memory sizes ---------------------------------------------------------------------------------

#: Flink's ``MemorySize.MemoryUnit``: spellings -> multiplier (bytes), in Flink's order.
MEMORY_UNITS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("b", "bytes"), 1),
    (("k", "kb", "kibibytes"), 1024),
    (("m", "mb", "mebibytes"), 1024**2),
    (("g", "gb", "gibibytes"), 1024**3),
    (("t", "tb", "tebibytes"), 1024**4),
)
_ALL_MEMORY_UNITS = " / ".join("(" + " | ".join(names) + ")" for names, _ in MEMORY_UNITS)
_LONG_MAX = 2**63 - 1


def parse_memory_size(text: str) -> int:
    """A Flink memory size -> bytes, as ``MemorySize.parseBytes`` (flink-core).

    ``<digits>[ ]<unit>``; units (case-insensitive) ``b``/``bytes``, ``k``/``kb``/``kibibytes``
    (1024), ``m``/``mb``/``mebibytes``, ``g``/``gb``/``gibibytes``, ``t``/``tb``/``tebibytes``; a bare
    number is bytes. ``"64 mb"`` -> 67108864, ``"1kb"`` -> 1024, ``"100 bytes"`` -> 100.

    Raises:
        ValueError: Flink's messages: "argument is an empty- or whitespace-only string", "text does
            not start with a number", "Memory size unit 'x' does not match any of the recognized
            units: (b | bytes) / (k | kb | kibibytes) / ...", "The value '<n>' cannot be re
            represented as 64bit number (numeric overflow)." and "The value '<text>' cannot be re
            represented as 64bit number of bytes (numeric overflow)."
    """
    trimmed = str(text).strip()
    if not trimmed:
        raise ValueError("argument is an empty- or whitespace-only string")
    pos = 0
    while pos < len(trimmed) and "0" <= trimmed[pos] <= "9":
        pos += 1
    number, unit = trimmed[:pos], trimmed[pos:].strip().lower()
    if not number:
        raise ValueError("text does not start with a number")
    value = int(number)
    if value > _LONG_MAX:
        raise ValueError(f"The value '{number}' cannot be re represented as 64bit number (numeric overflow).")
    multiplier = 1
    if unit:
        for names, mult in MEMORY_UNITS:
            if unit in names:
                multiplier = mult
                break
        else:
            raise ValueError(
                f"Memory size unit '{unit}' does not match any of the recognized units: {_ALL_MEMORY_UNITS}"
            )
    result = value * multiplier
    if result > _LONG_MAX:
        raise ValueError(f"The value '{text}' cannot be re represented as 64bit number of bytes (numeric overflow).")
    return result


T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


class _RangeError(ValueError):
    """A value that parsed but is out of range; :meth:`ConfigOption.parse` words it with the key."""

    def __init__(self, rule: str, value: object) -> None:
        super().__init__(rule)
        self.rule, self.value = rule, value


def parse_str(text: str) -> str:
    """The text itself (Flink's ``stringType()``)."""
    return str(text)


def parse_bool(text: str) -> bool:
    """``true``/``false``, case-insensitive (Flink's ``booleanType()``). Raises ValueError."""
    low = str(text).strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise ValueError("Expected a boolean (true or false).")


def parse_int(minimum: int | None = None) -> Callable[[str], int]:
    """An integer parser (Flink's ``intType()``/``longType()``), optionally refusing values below
    ``minimum``. Raises ValueError ("Expected an integer.")."""

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise ValueError("Expected an integer.") from None
        if minimum is not None and value < minimum:
            raise _RangeError(f">= {minimum}", value)
        return value

    return parse


def parse_duration_option(text: str) -> timedelta:
    """:func:`parse_duration` for a :class:`ConfigOption` (ValueError "Expected a duration ...: <why>")."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"Expected a duration such as '30 s' or '500ms': {exc}") from None


def parse_memory_option(text: str) -> int:
    """:func:`parse_memory_size` for a :class:`ConfigOption` (ValueError "Expected a memory size ...: <why>")."""
    try:
        return parse_memory_size(text)
    except ValueError as exc:
        raise ValueError(f"Expected a memory size such as '64 mb': {exc}") from None


def parse_enum(cls: type[E], *, exact: bool = False) -> Callable[[str], E]:
    """A parser of a closed choice by its user-facing value (case-insensitive; ``_`` and ``-``
    alike, as Flink's ``ConfigurationUtils.convertToEnum``; with ``exact``, only the value as
    spelled, as Flink's formats check their string choices). Raises ValueError "Expected one of: [..]"."""

    def parse(text: str) -> E:
        if exact:
            for member in cls:
                if member.value == text:
                    return member
        else:
            norm = str(text).strip().lower().replace("_", "-")
            for member in cls:
                if str(member.value).lower().replace("_", "-") == norm:
                    return member
        raise ValueError(f"Expected one of: [{', '.join(str(m.value) for m in cls)}]")

    return parse


def choices(cls: type[enum.Enum]) -> str:
    """The type name of an enum option for docs: ``Enum: a | b``."""
    return "Enum: " + " | ".join(str(m.value) for m in cls)


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One declared option, as Flink's ``ConfigOption`` (key, type, default, description).

    Attributes:
        key: the option key, spelled as Flink spells it (``sink.buffer-flush.max-rows``).
        type: the type's name for docs ("String", "Integer", "Duration", "MemorySize",
            "Enum: a | b").
        default: the typed default, or None.
        unit: unit of numbers ("ms", "rows", "bytes") or None.
        description: what it does (one or two sentences).
        parse: raw text -> typed value; raises ValueError with the rule.
        required: must be present and non-empty.
        scope: "both", "source" or "sink".
        origin: "flink", "flink-cdc", "alibaba" (the seed's variant) or "changelake".
        secret: the value is a credential: never shown in errors, ``repr`` or logs.

    Example::

        MAX_ROWS = key("sink.buffer-flush.max-rows").int_type(minimum=0).default_value(0) \
            .with_description("Max buffered keys; 0 disables.")
        MAX_ROWS.get({"sink.buffer-flush.max-rows": "100"})  # -> 100
    """

    key: str
    type: str
    default: T | None
    unit: str | None
    description: str
    parse: Callable[[str], T] = field(default=parse_str, repr=False, compare=False)  # type: ignore[assignment]
    required: bool = False
    scope: str = "both"
    origin: str = "flink"
    secret: bool = False

    def parse_value(self, text: Any) -> T:
        """Parse ``text`` as this option's value.

        Raises:
            OptionValidationError: "Could not parse value '<text>' for key '<key>'. <rule>", or for a
                value out of range "The value of option '<key>' must be >= <n>, but is <v>";
                ``option`` is the key.
        """
        try:
            return self.parse(str(text))
        except _RangeError as exc:
            raise OptionValidationError(
                f"The value of option '{self.key}' must be {exc.rule}, but is {exc.value}", option=self.key
            ) from None
        except ValueError as exc:
            raise OptionValidationError(
                f"Could not parse value '{text}' for key '{self.key}'. {exc}", option=self.key
            ) from None

    def get(self, raw: Mapping[str, Any]) -> T | None:
        """The parsed value of this option in ``raw``, or the default when absent (or None).
        Raises OptionValidationError (see :meth:`parse_value`)."""
        if self.key not in raw or raw[self.key] is None:
            return self.default
        return self.parse_value(raw[self.key])

    def value(self, raw: Mapping[str, Any]) -> T:
        """As :meth:`get` for an option with a default: never None.

        Raises:
            OptionValidationError: see :meth:`parse_value`.
            TypeError: the option has no default and is absent (a declaration bug).
        """
        got = self.get(raw)
        if got is None:
            raise TypeError(f"option '{self.key}' has no default; use get()")
        return got

    def with_description(self, description: str) -> "ConfigOption[T]":
        """A copy with ``description`` (Flink's ``withDescription``)."""
        return replace(self, description=description)

    def with_unit(self, unit: str) -> "ConfigOption[T]":
        """A copy with ``unit`` ("ms", "rows", "bytes")."""
        return replace(self, unit=unit)

    def for_scope(self, scope: str) -> "ConfigOption[T]":
        """A copy for ``scope`` ("source" or "sink")."""
        return replace(self, scope=scope)

    def from_origin(self, origin: str) -> "ConfigOption[T]":
        """A copy whose ``origin`` is ``origin`` ("changelake", "alibaba", "flink-cdc")."""
        return replace(self, origin=origin)

    def as_secret(self) -> "ConfigOption[T]":
        """A copy marked ``secret`` (a credential: kept out of errors, ``repr`` and logs)."""
        return replace(self, secret=True)


@dataclass(frozen=True)
class OptionBuilder(Generic[T]):
    """The typed half of :func:`key` (Flink's ``TypedConfigOptionBuilder``)."""

    key: str
    type: str
    parse: Callable[[str], T]

    def default_value(self, value: T) -> ConfigOption[T]:
        """The option with a default (Flink's ``defaultValue``)."""
        return ConfigOption(self.key, self.type, value, None, "", self.parse)

    def no_default_value(self) -> ConfigOption[T]:
        """The option without default (Flink's ``noDefaultValue``)."""
        return ConfigOption(self.key, self.type, None, None, "", self.parse)

    def required(self) -> ConfigOption[T]:
        """A required option without default."""
        return ConfigOption(self.key, self.type, None, None, "", self.parse, required=True)


class _KeyBuilder:
    def __init__(self, key: str) -> None:
        self.key = key

    def string_type(self) -> OptionBuilder[str]:
        return OptionBuilder(self.key, "String", parse_str)

    def bool_type(self) -> OptionBuilder[bool]:
        return OptionBuilder(self.key, "Boolean", parse_bool)

    def int_type(self, minimum: int | None = None) -> OptionBuilder[int]:
        return OptionBuilder(self.key, "Integer", parse_int(minimum))

    def long_type(self, minimum: int | None = None) -> OptionBuilder[int]:
        return OptionBuilder(self.key, "Long", parse_int(minimum))

    def duration_type(self) -> OptionBuilder[timedelta]:
        return OptionBuilder(self.key, "Duration", parse_duration_option)

    def memory_type(self) -> OptionBuilder[int]:
        """Bytes, parsed by :func:`parse_memory_size` (Flink's ``memoryType()``)."""
        return OptionBuilder(self.key, "MemorySize", parse_memory_option)

    def enum_type(self, cls: type[E], *, exact: bool = False) -> OptionBuilder[E]:
        """A closed choice (:func:`parse_enum`; ``exact``: only the value as spelled)."""
        return OptionBuilder(self.key, choices(cls), parse_enum(cls, exact=exact))

    def custom_type(self, type: str, parse: Callable[[str], T]) -> OptionBuilder[T]:
        """A type of the declaring package's own (``type`` its name for docs; ``parse`` raises
        ValueError with the rule, or the package's own option error)."""
        return OptionBuilder(self.key, type, parse)


def key(name: str) -> _KeyBuilder:
    """Start declaring option ``name``, as Flink's ``ConfigOptions.key(name)``::

        key("sink.flush.timeout").duration_type().default_value(timedelta(seconds=60)).with_description("...")
    """
    return _KeyBuilder(name)




def option_field(option: ConfigOption[Any]) -> Any:
    """A dataclass field bound to ``option``: its default (none for a required option without
    one), hidden from ``repr`` when the option is secret; :func:`declared_options` reads it back.

    Example::

        @dataclass(frozen=True)
        class JsonOptions:
            ignore_parse_errors: bool = option_field(
                key("ignore-parse-errors").bool_type().default_value(False).with_description("Skip bad messages."))
    """
    metadata = {"option": option}
    if option.required and option.default is None:
        return dataclasses.field(repr=not option.secret, metadata=metadata)
    return dataclasses.field(default=option.default, repr=not option.secret, metadata=metadata)


def declared_options(cls: type) -> dict[str, tuple[str, ConfigOption[Any]]]:
    """Option key -> (field name, declaration) of an options dataclass whose fields were made with
    :func:`option_field`, in declaration order."""
    return {f.metadata["option"].key: (f.name, f.metadata["option"]) for f in dataclasses.fields(cls)}
