"""Options shared by the lake sinks (``iceberg``, ``paimon``): how Pipeline 2 sizes its commits."""

from __future__ import annotations

from typing import Any, Mapping

from changelake.connectors.errors import OptionValidationError

__all__ = ["COMMIT_INTERVAL_DOC", "DEFAULT_COMMIT_INTERVAL_S", "parse_commit_interval"]

#: Seconds Pipeline 2 buffers polled changes before committing them, by default.
DEFAULT_COMMIT_INTERVAL_S = 10.0
COMMIT_INTERVAL_DOC = (
    "Longest time Pipeline 2 buffers polled changes before it commits them (Flink duration, e.g. "
    "'10s', '500ms'; default 10s, must be > 0): a commit absorbs every poll of that interval, up to "
    "'commit.max-rows' rows, so the lake lags Kafka by about this much."
)


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
