"""Options shared by the lake sinks (``iceberg``, ``paimon``): the common keys, declared as every
connector declares its options (:class:`~changelake.connectors.options.ConfigOption`), their
validation (as Flink's ``FactoryHelper``: unknown keys refused with the supported list) and the
masked description safe to log. Each lake declares only its own keys on top of :func:`common_options`."""

from __future__ import annotations

from typing import Any, Mapping

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import ConfigOption, key, prefixed, validate_unsupported_options

__all__ = [
    "CATALOG_PROPERTIES_PREFIX",
    "TABLE_PROPERTIES_PREFIX",
    "COMMIT_INTERVAL_DOC",
    "DEFAULT_COMMIT_INTERVAL_S",
    "DEFAULT_COMMIT_MAX_ROWS",
    "COMMIT_MAX_ROWS",
    "COMMIT_INTERVAL",
    "common_options",
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


#: ``commit.max-rows`` (parsed by :func:`parse_commit_max_rows`).
COMMIT_MAX_ROWS = key("commit.max-rows").int_type(minimum=1).default_value(DEFAULT_COMMIT_MAX_ROWS).with_unit(
    "rows").with_description(
    "Rows buffered by the sink's add() before should_flush() is true; each flush commits once "
    f"per table (default {DEFAULT_COMMIT_MAX_ROWS}, must be > 0).").from_origin("changelake")
#: ``commit.interval`` (parsed by :func:`parse_commit_interval`).
COMMIT_INTERVAL = key("commit.interval").duration_type().no_default_value().with_description(
    COMMIT_INTERVAL_DOC).from_origin("changelake")


def common_options(identifier: str) -> tuple[ConfigOption[Any], ...]:
    """The options every lake sink has: ``type``, ``name``, ``commit.max-rows``, ``commit.interval``."""
    return (
        key("type").string_type().default_value(identifier).with_description(f"Sink identifier; must be '{identifier}'."),
        key("name").string_type().no_default_value().with_description("Optional display name of the sink."),
        COMMIT_MAX_ROWS,
        COMMIT_INTERVAL,
        key("include.schema.changes").string_type().no_default_value().with_description(
            "Flink CDC's schema change event types the lake applies, e.g. [add.column, drop] (default: all); "
            "see changelake.connectors.lake.schema_change.").from_origin("flink-cdc"),
        key("exclude.schema.changes").string_type().no_default_value().with_description(
            "Flink CDC's schema change event types the lake ignores, e.g. [truncate.table].").from_origin("flink-cdc"),
    )


def supported_keys(options: tuple[ConfigOption[Any], ...]) -> tuple[str, ...]:
    """The declared keys plus the ``catalog.properties.*`` and ``table.properties.*`` prefixes."""
    return (*(o.key for o in options), CATALOG_PROPERTIES_PREFIX + "*", TABLE_PROPERTIES_PREFIX + "*")


def refuse_unknown_keys(identifier: str, raw: Mapping[str, Any], options: tuple[ConfigOption[Any], ...]) -> None:
    """Raises OptionValidationError ("Unsupported options found for '<identifier>'", listing the
    unsupported and the supported keys, as Flink's ``FactoryHelper.validateExcept``), through the
    connectors' one check (:func:`~changelake.connectors.options.validate_unsupported_options`)."""
    validate_unsupported_options(identifier, raw, options, prefixes=(CATALOG_PROPERTIES_PREFIX, TABLE_PROPERTIES_PREFIX))


def check_type(identifier: str, raw: Mapping[str, Any]) -> None:
    """Raises OptionValidationError when ``type`` is given and is not ``identifier``."""
    value = raw.get("type", identifier)
    if str(value) != identifier:
        raise OptionValidationError(f"'type' must be '{identifier}' for this sink; got {value!r}", option="type")


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
    value = raw.get("commit.interval")
    if value is None:
        return DEFAULT_COMMIT_INTERVAL_S
    seconds = COMMIT_INTERVAL.parse_value(value).total_seconds()
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
