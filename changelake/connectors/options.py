"""Option declarations and values shared by the connectors, parsed as Flink parses them.

- :class:`ConfigOption`: one declared option (key, type, default, unit, description), built as
  Flink's ``ConfigOptions.key("k").intType().defaultValue(3).withDescription("...")`` with
  :func:`key`; :meth:`ConfigOption.get` parses a raw string and names the key in errors.
- :func:`validate_unsupported_options` / :func:`validate_required_options`: Flink CDC's
  ``FactoryHelper.validateExcept`` / required-option check (unknown keys listed with the
  supported ones).
- :func:`parse_memory_size`: Flink's ``MemorySize.parseBytes`` (``64 mb``, ``1kb``, ``100 bytes``;
  a bare number is bytes).
- :class:`ValueFieldsInclude` (``value.fields-include``: ``ALL`` / ``EXCEPT_KEY``).
- :func:`parse_duration`: Flink's ``TimeUtils.parseDuration`` (``30s``, ``500 ms``, ``2 min``;
  a bare number is milliseconds).
- :func:`parse_partition_offsets` / :func:`parse_topic_partition_offsets`: Flink's
  ``scan.startup.specific-offsets`` / ``scan.bounded.specific-offsets`` text.
- :class:`DeliveryGuarantee` (Flink's ``DeliveryGuarantee``) and
  :func:`validate_delivery_guarantee` (``KafkaConnectorOptionsUtil``'s exactly-once rule).

Each connector declares its own options (ConfigOption tuples) with these types and checks.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable, Generic, Iterable, Mapping, TypeVar

from changelake.connectors.errors import OptionValidationError

__all__ = [
    "PROPERTIES_PREFIX",
    "ConfigOption",
    "key",
    "OptionBuilder",
    "validate_unsupported_options",
    "did_you_mean",
    "validate_required_options",
    "validate_topic_or_pattern",
    "prefixed",
    "parse_bool",
    "parse_int",
    "parse_enum",
    "parse_str",
    "choices",
    "parse_duration_option",
    "parse_memory_option",
    "MEMORY_UNITS",
    "parse_memory_size",
    "ValueFieldsInclude",
    "parse_value_fields_include",
    "DURATION_UNITS_MS",
    "parse_duration",
    "SPECIFIC_OFFSETS_FORMAT",
    "parse_partition_offsets",
    "parse_topic_partition_offsets",
    "DeliveryGuarantee",
    "validate_delivery_guarantee",
]

#: Flink's prefix of the options a connector passes through to its client (``properties.bootstrap.servers``).
PROPERTIES_PREFIX = "properties."

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


#: Flink's example of the specific-offsets format, quoted in its error message.
SPECIFIC_OFFSETS_FORMAT = "'partition:0,offset:42;partition:1,offset:300'"
_ENTRY_RE = re.compile(
    r"^\s*(?:topic\s*:\s*(?P<topic>[^,]+?)\s*,)?\s*partition\s*:\s*(?P<p>\d+)\s*,\s*offset\s*:\s*(?P<o>\d+)\s*$"
)


def _format_error(key: str, text: str, hint: str) -> str:
    return f"Invalid properties '{key}' should follow the format {SPECIFIC_OFFSETS_FORMAT}{hint}, but is '{text}'."


def parse_partition_offsets(text: str, key: str) -> dict[int, int]:
    """``partition:0,offset:42;partition:1,offset:300`` -> ``{0: 42, 1: 300}`` (one topic).

    Empty entries (a trailing ``;``) are ignored; at least one entry is required.

    Raises:
        ValueError: Flink's message, "Invalid properties '<key>' should follow the format
            'partition:0,offset:42;partition:1,offset:300', but is '<text>'."
    """
    out: dict[int, int] = {}
    for entry in (e for e in str(text).split(";") if e.strip()):
        m = _ENTRY_RE.match(entry)
        if not m or m.group("topic") is not None:
            raise ValueError(_format_error(key, str(text), ""))
        out[int(m.group("p"))] = int(m.group("o"))
    if not out:
        raise ValueError(_format_error(key, str(text), ""))
    return out


def parse_topic_partition_offsets(text: str, key: str, default_topic: str | None) -> dict[tuple[str, int], int]:
    """Specific offsets over several topics -> ``{(topic, partition): offset}``.

    Entries are ``[topic:<t>,]partition:<p>,offset:<o>`` separated by ``;``; an entry without
    ``topic:`` belongs to ``default_topic``. Empty text gives ``{}``.

    Raises:
        OptionValidationError: a malformed entry, or one without topic when there is no default
            (Flink's message, plus the ``topic:`` form).
    """
    out: dict[tuple[str, int], int] = {}
    for entry in (e for e in text.split(";") if e.strip()):
        m = _ENTRY_RE.match(entry)
        topic = (m.group("topic") if m else None) or default_topic
        if not m or topic is None:
            raise OptionValidationError(
                _format_error(key, text, " (or 'topic:t,partition:0,offset:42' with several topics)"), option=key
            )
        out[(topic.strip(), int(m.group("p")))] = int(m.group("o"))
    return out


class DeliveryGuarantee(enum.Enum):
    """``sink.delivery-guarantee`` (Flink's ``DeliveryGuarantee``)."""

    NONE = "none"  #: fire and forget: no wait for acknowledgements
    AT_LEAST_ONCE = "at-least-once"  #: flush waits for every ack; delivery errors raise
    EXACTLY_ONCE = "exactly-once"  #: Kafka transactions; readers must use read_committed


def validate_delivery_guarantee(guarantee: DeliveryGuarantee, transactional_id_prefix: str | None) -> None:
    """exactly-once needs ``sink.transactional-id-prefix``.

    Raises:
        OptionValidationError: Flink's ``KafkaConnectorOptionsUtil`` message, "sink.transactional-id-prefix
            must be specified when using DeliveryGuarantee.EXACTLY_ONCE."
    """
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE and not transactional_id_prefix:
        raise OptionValidationError(
            "sink.transactional-id-prefix must be specified when using DeliveryGuarantee.EXACTLY_ONCE.",
            option="sink.transactional-id-prefix",
        )


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


# -- value.fields-include -------------------------------------------------------------------------


class ValueFieldsInclude(enum.Enum):
    """``value.fields-include``: which columns the record value holds (Flink's ``ValueFieldsStrategy``)."""

    ALL = "ALL"  #: every physical column, key columns included
    EXCEPT_KEY = "EXCEPT_KEY"  #: every column except the key columns


def parse_value_fields_include(text: str) -> ValueFieldsInclude:
    """``ALL`` / ``EXCEPT_KEY`` (case-insensitive, ``-`` for ``_`` accepted, as Flink's enum options).

    Raises:
        ValueError: "Expected one of: [ALL, EXCEPT_KEY]".
    """
    return parse_enum(ValueFieldsInclude)(text)


# -- declared options -----------------------------------------------------------------------------

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


def parse_enum(cls: type[E]) -> Callable[[str], E]:
    """A parser of a closed choice by its user-facing value (case-insensitive; ``_`` and ``-``
    alike, as Flink's ``ConfigurationUtils.convertToEnum``). Raises ValueError "Expected one of: [..]"."""

    def parse(text: str) -> E:
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

    def enum_type(self, cls: type[E]) -> OptionBuilder[E]:
        return OptionBuilder(self.key, choices(cls), parse_enum(cls))


def key(name: str) -> _KeyBuilder:
    """Start declaring option ``name``, as Flink's ``ConfigOptions.key(name)``::

        key("sink.flush.timeout").duration_type().default_value(timedelta(seconds=60)).with_description("...")
    """
    return _KeyBuilder(name)


def prefixed(raw: Mapping[str, Any], prefix: str, text: Callable[[Any], str] = str) -> dict[str, str]:
    """Keys starting with ``prefix``, prefix stripped, values as strings (``text``; default ``str``)
    (``properties.acks`` -> ``acks``)."""
    return {k[len(prefix):]: text(v) for k, v in raw.items() if k.startswith(prefix)}


def did_you_mean(unknown: Iterable[str], supported: Iterable[str]) -> str:
    """``"\n\nDid you mean 'scan.startup.mode' instead of 'scan.startup.mod'?"`` for each unknown key
    with a close match among ``supported`` (difflib's ``get_close_matches``, cutoff 0.6), one
    line each; empty when none is close."""
    import difflib

    choices = list(supported)
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, choices, n=1)
        if close:
            hints.append(f"Did you mean '{close[0]}' instead of '{key}'?")
    return "\n\n" + "\n".join(hints) if hints else ""


def validate_unsupported_options(identifier: str, raw: Mapping[str, Any], options: Iterable[ConfigOption[Any] | str],
                                 prefixes: Iterable[str] = ()) -> None:
    """Refuse keys that are neither declared nor under one of ``prefixes``, as Flink CDC's
    ``FactoryHelper.validateExcept``.

    Args:
        identifier: the connector identifier named in the message ("kafka", "upsert-kafka").
        raw: the raw options.
        options: the declared options (ConfigOption or plain keys).
        prefixes: accepted key prefixes (``properties.``, the chosen formats' ``<format>.``).

    Raises:
        OptionValidationError: "Unsupported options found for '<identifier>'.\\n\\nUnsupported
            options:\\n\\n<sorted keys>\\n\\nSupported options:\\n\\n<sorted keys, then prefix*>";
            ``option`` is the first unsupported key.
    """
    declared = sorted({o if isinstance(o, str) else o.key for o in options})
    heads = tuple(p for p in prefixes if p)
    unknown = sorted(k for k in raw if k not in declared and not k.startswith(heads))
    if unknown:
        supported = declared + sorted(f"{p}*" for p in dict.fromkeys(heads))
        raise OptionValidationError(
            f"Unsupported options found for '{identifier}'.\n\n"
            "Unsupported options:\n\n" + "\n".join(unknown) + "\n\n"
            "Supported options:\n\n" + "\n".join(supported) + did_you_mean(unknown, declared),
            option=unknown[0],
        )


def validate_required_options(raw: Mapping[str, Any], required: Iterable[ConfigOption[Any] | str]) -> None:
    """Refuse missing or empty required keys (Flink's ``FactoryUtil`` message).

    Raises:
        OptionValidationError: "One or more required options are missing.\\n\\nMissing required
            options are:\\n\\n<sorted keys>"; ``option`` is the first missing key.
    """
    keys = [o if isinstance(o, str) else o.key for o in required]
    missing = sorted(k for k in keys if not str(raw.get(k) or "").strip())
    if missing:
        raise OptionValidationError(
            "One or more required options are missing.\n\nMissing required options are:\n\n" + "\n".join(missing),
            option=missing[0],
        )


def validate_topic_or_pattern(has_topic: bool, has_pattern: bool) -> None:
    """Exactly one of ``topic`` / ``topic-pattern``, as Flink's ``KafkaConnectorOptionsUtil.validateTopic``.

    Raises:
        OptionValidationError: "Option 'topic' and 'topic-pattern' shouldn't be set together." or
            "Either 'topic' or 'topic-pattern' must be set." (``option`` is ``topic``).
    """
    if has_topic and has_pattern:
        raise OptionValidationError("Option 'topic' and 'topic-pattern' shouldn't be set together.", option="topic")
    if not has_topic and not has_pattern:
        raise OptionValidationError("Either 'topic' or 'topic-pattern' must be set.", option="topic")
