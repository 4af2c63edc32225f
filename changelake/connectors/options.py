"""Option values shared by the connectors, parsed as Flink parses them.

- :func:`parse_duration`: Flink's ``TimeUtils.parseDuration`` (``30s``, ``500 ms``, ``2 min``;
  a bare number is milliseconds).
- :func:`parse_partition_offsets` / :func:`parse_topic_partition_offsets`: Flink's
  ``scan.startup.specific-offsets`` / ``scan.bounded.specific-offsets`` text.
- :class:`DeliveryGuarantee` (Flink's ``DeliveryGuarantee``) and
  :func:`validate_delivery_guarantee` (``KafkaConnectorOptionsUtil``'s exactly-once rule).

Each connector keeps its own option declarations and error wording; its parsers wrap these.
"""

from __future__ import annotations

import enum
import re
from datetime import timedelta

from changelake.connectors.errors import OptionValidationError

__all__ = [
    "DURATION_UNITS_MS",
    "parse_duration",
    "SPECIFIC_OFFSETS_FORMAT",
    "parse_partition_offsets",
    "parse_topic_partition_offsets",
    "DeliveryGuarantee",
    "validate_delivery_guarantee",
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
