"""Errors of the connectors layer."""

from __future__ import annotations

from changelake.errors import ChangelakeError

__all__ = ["ConnectorError", "OptionValidationError", "SinkFlushError", "SourceError"]


class ConnectorError(ChangelakeError):
    """Base class of connector errors."""


class OptionValidationError(ConnectorError):
    """A WITH option or pipeline option is missing, unknown or invalid.

    The message names the option, the rule and the value (never a password). ``option`` holds the
    offending key when there is one.
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        self.option = option
        super().__init__(message)


class SinkFlushError(ConnectorError):
    """Records could not be delivered to Kafka (names topic and partition when known)."""


class SourceError(ConnectorError):
    """A source cannot continue (e.g. a stored binlog position no longer exists on the server)."""
