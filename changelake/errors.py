"""The root of every error changelake raises.

Each package keeps its own ``errors.py`` with subclasses; errors carry their context as
attributes (topic, partition, offset, table, column, option) and never a secret.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ChangelakeError", "OptionValidationError", "PipelineDataError"]


def _rebuild(cls: type["ChangelakeError"], args: tuple[Any, ...], state: dict[str, Any]) -> "ChangelakeError":
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class ChangelakeError(Exception):
    """Base class of every changelake error.

    Errors pickle with their message and attributes whatever their ``__init__`` takes (they cross
    a process boundary when the MySQL binlog is decoded in a worker process); the chained cause
    and traceback do not.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class PipelineDataError(ChangelakeError):
    """A change event a pipeline cannot apply as it stands: the data, not the options, is wrong
    (e.g. a table without primary key, a truncate carrying no schema, a row missing a key column).

    The message names what and where, and the fix when there is one (e.g. declare the key with a
    ``transform`` rule ``primary-keys``). Attributes name where, when known (else None):

    Attributes:
        pipeline: the pipeline name.
        table: the table, ``db.table``.
        column: the column.
        topic, partition, offset: the Kafka record that carried the event.
    """

    def __init__(
        self,
        message: str,
        *,
        pipeline: str | None = None,
        table: str | None = None,
        column: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.table = table
        self.column = column
        self.topic = topic
        self.partition = partition
        self.offset = offset
        super().__init__(message)


class OptionValidationError(ChangelakeError):
    """A WITH option or pipeline option is missing, unknown or invalid.

    The message names the option, the rule and the value (never a password). ``option`` holds the
    offending key when there is one. Raised by :class:`changelake.options.ConfigOption` (the
    engine's one option idiom) and by the connectors' and the pipeline's validation (re-exported
    by :mod:`changelake.connectors.errors`).
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        self.option = option
        super().__init__(message)
