"""Errors of the changelog layer (rows, schemas, operators, key state)."""

from __future__ import annotations

from changelake.errors import ChangelakeError

__all__ = ["ChangelogError", "SchemaError", "UnsupportedChangelogError", "KeyStateError"]


class ChangelogError(ChangelakeError):
    """Base class of changelog-layer errors."""


class SchemaError(ChangelogError):
    """A schema, column or primary key is invalid or does not match a row."""


class UnsupportedChangelogError(ChangelogError):
    """An updating changelog was sent to a sink that only accepts some row kinds.

    As Flink's planner: an updating stream cannot be written to the ``kafka`` connector with an
    insert-only format. Use the ``upsert-kafka`` connector or a changelog format
    (debezium-json, canal-json, maxwell-json) instead.
    """


class KeyStateError(ChangelogError):
    """The durable key-state store is unreadable or belongs to another table.

    To recover, delete the key-state directory; it is rebuilt from the earliest offset.
    """
