"""The root of every error changelake raises.

Each package keeps its own ``errors.py`` with subclasses; errors carry their context as
attributes (topic, partition, offset, table, column, option) and never a secret.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ChangelakeError"]


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
