"""Errors of the checks layer (lake vs source comparisons)."""

from __future__ import annotations

from changelake.errors import ChangelakeError

__all__ = ["CheckError", "KeyStateCheckError"]


class CheckError(ChangelakeError):
    """Base class of check errors."""


class KeyStateCheckError(CheckError):
    """A key-state comparison cannot run: no key, a missing column, or column types that cannot
    be aligned. ``column`` names the column when there is one."""

    def __init__(self, message: str, *, column: str | None = None) -> None:
        self.column = column
        super().__init__(message)
