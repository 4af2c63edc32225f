"""The one error of the expression language."""

from __future__ import annotations

from changelake.changelog.errors import ChangelogError

__all__ = ["ExpressionError"]


class ExpressionError(ChangelogError, ValueError):
    """An expression cannot be parsed, bound to a schema, or evaluated on a row.

    Attributes:
        expression: the expression text at fault (as written in the rule), if known.
        column: the projected column (alias) or ``filter`` the expression computes, if known.
        row: the offending row's index in the evaluated batch (0-based), for evaluation errors.
    """

    def __init__(self, message: str, *, expression: str | None = None, column: str | None = None,
                 row: int | None = None) -> None:
        self.expression = expression
        self.column = column
        self.row = row
        super().__init__(message)
