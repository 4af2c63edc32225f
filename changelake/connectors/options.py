"""Option checks and values shared by the connectors, parsed as Flink parses them.

- :class:`~changelake.options.ConfigOption` and :func:`~changelake.options.key`: the engine's one
  option idiom (declared in :mod:`changelake.options`, re-exported here for the connectors);
  :meth:`ConfigOption.get` parses a raw string and names the key in errors.
- :func:`validate_unsupported_options` / :func:`validate_required_options`: Flink CDC's
  ``FactoryHelper.validateExcept`` / required-option check (unknown keys listed with the
  supported ones).
- :func:`parse_memory_size` / :func:`parse_duration` (re-exported from :mod:`changelake.options`).
- :class:`ValueFieldsInclude` (``value.fields-include``: ``ALL`` / ``EXCEPT_KEY``).
- :func:`parse_partition_offsets` / :func:`parse_topic_partition_offsets`: Flink's
  ``scan.startup.specific-offsets`` / ``scan.bounded.specific-offsets`` text.
- :class:`DeliveryGuarantee` (Flink's ``DeliveryGuarantee``) and
  :func:`validate_delivery_guarantee` (``KafkaConnectorOptionsUtil``'s exactly-once rule).

Each connector declares its own options (ConfigOption tuples) with these types and checks.
"""

from __future__ import annotations

import enum
import re
from typing import Any, Callable, Iterable, Mapping

from changelake.connectors.errors import OptionValidationError
from changelake.options import (
    DURATION_UNITS_MS,
    MEMORY_UNITS,
    ConfigOption,
    OptionBuilder,
    choices,
    key,
    parse_bool,
    parse_duration,
    parse_duration_option,
    parse_enum,
    parse_int,
    parse_memory_option,
    parse_memory_size,
    parse_str,
)

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
                                 prefixes: Iterable[str] = (), *, accepted: Iterable[str] = ()) -> None:
    """Refuse keys that are neither declared nor under one of ``prefixes``, as Flink CDC's
    ``FactoryHelper.validateExcept``.

    Args:
        identifier: the connector identifier named in the message ("kafka", "upsert-kafka").
        raw: the raw options.
        options: the declared options (ConfigOption or plain keys).
        prefixes: accepted key prefixes (``properties.``, the chosen formats' ``<format>.``).
        accepted: keys accepted but not listed as supported (e.g. the pipeline's ``type``/``name``
            next to a source's options).

    Raises:
        OptionValidationError: "Unsupported options found for '<identifier>'.\\n\\nUnsupported
            options:\\n\\n<sorted keys>\\n\\nSupported options:\\n\\n<sorted keys, then prefix*>";
            ``option`` is the first unsupported key.
    """
    declared = sorted({o if isinstance(o, str) else o.key for o in options})
    heads = tuple(p for p in prefixes if p)
    quiet = set(accepted)
    unknown = sorted(k for k in raw if k not in declared and k not in quiet and not k.startswith(heads))
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
