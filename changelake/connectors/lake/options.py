"""Options shared by the lake sinks (``iceberg``, ``paimon``): the common keys, their validation
(as Flink's ``FactoryHelper``: unknown keys refused with the supported list) and the masked
description safe to log. Each lake declares only its own keys on top of :func:`common_option_docs`."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import parse_duration

__all__ = [
    "CATALOG_PROPERTIES_PREFIX",
    "TABLE_PROPERTIES_PREFIX",
    "COMMIT_INTERVAL_DOC",
    "DEFAULT_COMMIT_INTERVAL_S",
    "DEFAULT_COMMIT_MAX_ROWS",
    "common_option_docs",
    "supported_keys",
    "refuse_unknown_keys",
    "check_type",
    "prefixed",
    "parse_commit_max_rows",
    "parse_commit_interval",
    "describe_options",
]

CATALOG_PROPERTIES_PREFIX = "catalog.properties."
TABLE_PROPERTIES_PREFIX = "table.properties."
#: Seconds Pipeline 2 buffers polled changes before committing them, by default.
DEFAULT_COMMIT_INTERVAL_S = 10.0
#: Changelog rows (before compaction) buffered per commit, by default.
DEFAULT_COMMIT_MAX_ROWS = 100_000
COMMIT_INTERVAL_DOC = (
    "Longest time Pipeline 2 buffers polled changes before it commits them (Flink duration, e.g. "
    "'10s', '500ms'; default 10s, must be > 0): a commit absorbs every poll of that interval, up to "
    "'commit.max-rows' rows, so the lake lags Kafka by about this much."
)
_SECRET_HINTS = ("password", "secret", "token", "credential", "key")


def common_option_docs(identifier: str) -> dict[str, str]:
    """key -> description of the keys every lake sink has (``type``, ``name``, ``commit.*``)."""
    return {
        "type": f"Sink identifier; must be '{identifier}'.",
        "name": "Optional display name of the sink.",
        "commit.max-rows": (
            "Rows buffered by the sink's add() before should_flush() is true; each flush commits once "
            f"per table (default {DEFAULT_COMMIT_MAX_ROWS}, must be > 0)."
        ),
        "commit.interval": COMMIT_INTERVAL_DOC,
    }


def supported_keys(docs: Mapping[str, str]) -> tuple[str, ...]:
    """The declared keys plus the ``catalog.properties.*`` and ``table.properties.*`` prefixes."""
    return (*docs, CATALOG_PROPERTIES_PREFIX + "*", TABLE_PROPERTIES_PREFIX + "*")


def refuse_unknown_keys(identifier: str, raw: Mapping[str, Any], docs: Mapping[str, str]) -> None:
    """Raises OptionValidationError ("Unsupported options found for '<identifier>'", listing the
    unsupported and the supported keys, as Flink's ``FactoryHelper.validateExcept``)."""
    unknown = sorted(
        k for k in raw
        if k not in docs and not k.startswith(CATALOG_PROPERTIES_PREFIX) and not k.startswith(TABLE_PROPERTIES_PREFIX)
    )
    if unknown:
        raise OptionValidationError(
            f"Unsupported options found for '{identifier}'.\n\nUnsupported options:\n\n"
            + "\n".join(unknown)
            + "\n\nSupported options:\n\n"
            + "\n".join(supported_keys(docs)),
            option=unknown[0],
        )


def check_type(identifier: str, raw: Mapping[str, Any]) -> None:
    """Raises OptionValidationError when ``type`` is given and is not ``identifier``."""
    value = raw.get("type", identifier)
    if str(value) != identifier:
        raise OptionValidationError(f"'type' must be '{identifier}' for this sink; got {value!r}", option="type")


def prefixed(raw: Mapping[str, Any], prefix: str, text: Callable[[Any], str] = str) -> dict[str, str]:
    """The options under ``prefix``, prefix stripped, values as text (``text``)."""
    return {k[len(prefix):]: text(v) for k, v in raw.items() if k.startswith(prefix)}


def parse_commit_max_rows(raw: Mapping[str, Any]) -> int:
    """``commit.max-rows`` (rows, default 100000). Raises OptionValidationError: not an integer > 0."""
    value = raw.get("commit.max-rows", DEFAULT_COMMIT_MAX_ROWS)
    try:
        rows = int(str(value))
    except ValueError:
        raise OptionValidationError(
            f"'commit.max-rows' must be an integer > 0; got {value!r}", option="commit.max-rows"
        ) from None
    if rows <= 0:
        raise OptionValidationError(f"'commit.max-rows' must be > 0; got {rows}", option="commit.max-rows")
    return rows


def parse_commit_interval(raw: Mapping[str, Any]) -> float:
    """``commit.interval`` of raw sink options in seconds (default 10.0).

    Raises:
        OptionValidationError: not a Flink duration, or not > 0 (names the option and the value).
    """
    from changelake.connectors.options import key

    value = raw.get("commit.interval")
    if value is None:
        return DEFAULT_COMMIT_INTERVAL_S
    seconds = key("commit.interval").duration_type().no_default_value().parse_value(value).total_seconds()
    if seconds <= 0:
        raise OptionValidationError(f"'commit.interval' must be > 0; got {value!r}", option="commit.interval")
    return seconds


def describe_options(catalog_properties: Mapping[str, str], commit_max_rows: int, commit_interval_s: float,
                     **extra: str) -> dict[str, str]:
    """A flat dict of a lake sink's options safe to log: values of secret-looking catalog keys
    are masked (``******``); ``extra`` are further ``key=value`` shown as given."""
    out = {}
    for key, value in catalog_properties.items():
        masked = any(h in key.lower() for h in _SECRET_HINTS)
        out[CATALOG_PROPERTIES_PREFIX + key] = "******" if masked else value
    out.update(extra)
    out["commit.max-rows"] = str(commit_max_rows)
    out["commit.interval"] = f"{round(commit_interval_s * 1000)}ms"
    return out
