"""Table selectors of the ``tables`` / ``tables.exclude`` options, as Flink CDC's ``Selectors``.

Syntax (apache/flink-cdc ``flink-cdc-common/.../schema/Selectors.java`` and ``utils/Predicates.java``):

* selectors are comma-separated; ``\\,`` escapes a comma inside a selector;
* each selector is split on **unescaped** dots into ``db.table`` (one part: the table in any
  database; three parts: ``namespace.db.table``, the namespace is ignored for MySQL; four or
  more parts are invalid);
* each part is a Java-style regular expression matched **fully and case-insensitively**; ``\\.``
  stands for the regex "any character" (a bare dot being the separator).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError

__all__ = ["CapturedTables", "TableSelector", "TableSelectors"]

_UNESCAPED_COMMA = re.compile(r"(?<!\\),")
_UNESCAPED_DOT = re.compile(r"(?<!\\)\.")


@dataclass(frozen=True)
class TableSelector:
    """One ``db.table`` selector: compiled full-match, case-insensitive patterns."""

    text: str
    database: re.Pattern[str] | None
    table: re.Pattern[str]

    def matches(self, table_id: TableId) -> bool:
        """True if ``table_id`` (database, table) is selected."""
        if self.database is not None and not self.database.fullmatch(table_id.database or ""):
            return False
        return self.table.fullmatch(table_id.table) is not None


def _compile(part: str, option: str, whole: str) -> re.Pattern[str]:
    # "\." is the regex any-char; an escaped comma is a literal comma.
    regex = part.replace("\\.", ".").replace("\\,", ",")
    try:
        return re.compile(regex, re.IGNORECASE)
    except re.error as exc:
        raise OptionValidationError(
            f"Invalid table inclusion pattern in option '{option}' = {whole}: part {part!r} is not a "
            f"valid regular expression ({exc})",
            option=option,
        ) from exc


@dataclass(frozen=True)
class TableSelectors:
    """The parsed value of ``tables`` (or ``tables.exclude``).

    Example::

        TableSelectors.parse("app_db.\\\\.*, bdb.user_[0-9]+").matches(TableId("APP_DB", "orders"))  # True
    """

    text: str
    selectors: tuple[TableSelector, ...]

    @classmethod
    def parse(cls, text: str, option: str = "tables") -> "TableSelectors":
        """Parse a selector list. Raises OptionValidationError (naming ``option``) if a selector
        is empty, has four or more parts, or holds an invalid regex."""
        selectors: list[TableSelector] = []
        for raw in _UNESCAPED_COMMA.split(text):
            sel = raw.strip()
            if not sel:
                raise OptionValidationError(
                    f"Invalid table inclusion pattern in option '{option}' = {text}: empty selector",
                    option=option,
                )
            parts = _UNESCAPED_DOT.split(sel)
            if len(parts) >= 4:
                raise OptionValidationError(
                    f"Invalid table inclusion pattern \"{sel}\" in option '{option}' = {text}: "
                    "expected 'db.table' or 'table'",
                    option=option,
                )
            if len(parts) == 3:
                parts = parts[1:]
            db = _compile(parts[0], option, text) if len(parts) == 2 else None
            table = _compile(parts[-1], option, text)
            selectors.append(TableSelector(sel, db, table))
        return cls(text, tuple(selectors))

    def matches(self, table_id: TableId) -> bool:
        """True if any selector matches ``table_id``."""
        return any(s.matches(table_id) for s in self.selectors)


class CapturedTables:
    """``tables`` minus ``tables.exclude`` as a memoized, picklable predicate ``f(TableId) -> bool``
    (the binlog reader asks it for every table-map and rows event, possibly in a worker process)."""

    def __init__(self, tables: TableSelectors, exclude: TableSelectors | None = None) -> None:
        self.tables = tables
        self.exclude = exclude
        self._cache: dict[TableId, bool] = {}

    def __call__(self, table_id: TableId) -> bool:
        found = self._cache.get(table_id)
        if found is None:
            found = self.tables.matches(table_id) and not (self.exclude is not None and self.exclude.matches(table_id))
            if len(self._cache) > 100_000:
                self._cache.clear()
            self._cache[table_id] = found
        return found
