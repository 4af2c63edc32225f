"""The root of every error changelake raises.

Each package keeps its own ``errors.py`` with subclasses; errors carry their context as
attributes (topic, partition, offset, table, column, option) and never a secret.
"""

from __future__ import annotations

__all__ = ["ChangelakeError"]


class ChangelakeError(Exception):
    """Base class of every changelake error."""
