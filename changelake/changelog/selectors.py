"""Table selectors with Flink CDC's ``tables`` syntax (``Selectors`` / ``Predicates`` in flink-cdc-common).

Syntax, as Flink CDC's ``tables``, ``route.source-table``, ``transform.source-table`` and the Kafka
sink's ``sink.tableId-to-topic.mapping`` write it:

- a comma-separated list of selectors (``\\,`` escapes a comma; parts are trimmed, empty parts skipped);
- each selector is split on **unescaped** dots into ``table``, ``db.table`` or
  ``namespace.db.table``; four or more parts fail with "Invalid table inclusion pattern";
- ``\\.`` inside a part becomes ``.``, so ``\\.*`` is the regex "any characters" (a bare dot is the
  separator);
- each part is a regular expression matched against the **whole** name, case-insensitively.

A TableId with a database is matched on (database, table) by the selector's last two parts, so a
one-part selector never matches it; a TableId without a database is matched on its table name by
any selector's last part (as ``Selectors.Selector.isMatch``).

Example::

    >>> sel = Selectors.parse(r"kafka_test.\\.*, app_[0-9]+.orders")
    >>> sel.matches(TableId("kafka_test", "customers"))
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from changelake.changelog.errors import ChangelogError
from changelake.changelog.schema import TableId

__all__ = ["SelectorError", "Selector", "Selectors", "split_unescaped"]


class SelectorError(ChangelogError, ValueError):
    """A table selector is malformed (bad regex, too many parts, empty).

    Attributes:
        pattern: the selector text as given.
    """

    def __init__(self, message: str, *, pattern: str) -> None:
        self.pattern = pattern
        super().__init__(message)


def split_unescaped(text: str, sep: str, unescape: bool = True) -> list[str]:
    """Split ``text`` on ``sep`` where it is not preceded by a backslash escape.

    As flink-cdc's ``Predicates.RegExSplitterByComma/ByDot``: a backslash escapes the next character
    (kept as is), parts are trimmed, empty parts dropped, and when ``unescape`` is true ``\\<sep>``
    in a part becomes ``<sep>``.

    Raises:
        SelectorError: the text ends in a lone backslash ("Unterminated escape sequence").
    """
    parts: list[str] = []
    start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                raise SelectorError(
                    f"Unterminated escape sequence at the end of the string {text!r}", pattern=text
                )
            i += 2
            continue
        if c == sep:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    out = []
    for p in parts:
        if not p:
            continue
        p = p.strip()
        if unescape:
            p = p.replace("\\" + sep, sep)
        out.append(p)
    return out


@lru_cache(maxsize=1024)
def _compile(part: str, pattern: str) -> tuple[re.Pattern[str], ...]:
    # Deliberate difference: Flink CDC's Predicates.includes(part) splits on commas a second time,
    # so an escaped comma (``t{1\,3}``) ends up as two broken regexes there; here it stays a comma.
    try:
        return (re.compile(part, re.IGNORECASE),)
    except re.error as exc:
        raise SelectorError(f"Invalid regular expression {part!r} in table pattern {pattern!r}: {exc}",
                            pattern=pattern) from exc


def _any_full_match(patterns: tuple[re.Pattern[str], ...], text: str | None) -> bool:
    return text is not None and any(p.fullmatch(text) for p in patterns)


@dataclass(frozen=True)
class Selector:
    """One selector: regexes for namespace, database (Flink CDC's schemaName) and table.

    A part that is None never matches a non-empty name of that level.
    """

    namespace: str | None
    database: str | None
    table: str
    pattern: str = ""

    def matches(self, table_id: TableId) -> bool:
        """True if ``table_id`` is selected (see the module docstring for the rules)."""
        tbl = _compile(self.table, self.pattern)
        if table_id.database:
            if self.database is None:
                return False
            return _any_full_match(_compile(self.database, self.pattern), table_id.database) and _any_full_match(
                tbl, table_id.table
            )
        return _any_full_match(tbl, table_id.table)

    def regex(self) -> str:
        """One Python regex over ``str(table_id)`` (parts joined by a literal dot), used by routes
        to resolve ``$1`` groups in ``sink-table`` (as Flink CDC's TableIdRouter)."""
        parts = [p for p in (self.namespace, self.database, self.table) if p is not None]
        return r"\.".join(f"(?:{p})" for p in parts)


@dataclass(frozen=True)
class Selectors:
    """A comma-separated list of :class:`Selector`; a TableId matches if any selector matches.

    Build with :meth:`parse`. ``matches`` results are cached per TableId.
    """

    selectors: tuple[Selector, ...]
    pattern: str = ""
    _cache: dict[TableId, bool] = field(default_factory=dict, repr=False, compare=False, hash=False)

    @classmethod
    def parse(cls, pattern: str) -> "Selectors":
        """Parse Flink CDC ``tables`` syntax, e.g. ``kafka_test.\\.*`` or ``db1.t1, db2.t_[0-9]+``.

        Raises:
            SelectorError: empty pattern ("Invalid table inclusion pattern cannot be null or empty"),
                four or more dot-separated parts ("Invalid table inclusion pattern: <pattern>"), or a
                part that is not a valid regular expression.
        """
        if not pattern or not pattern.strip():
            raise SelectorError("Invalid table inclusion pattern cannot be null or empty", pattern=pattern or "")
        selectors = []
        seen: set[str] = set()
        for item in split_unescaped(pattern, ","):
            if item in seen:
                continue
            seen.add(item)
            parts = split_unescaped(item, ".")
            if len(parts) == 1:
                sel = Selector(None, None, parts[0], pattern)
            elif len(parts) == 2:
                sel = Selector(None, parts[0], parts[1], pattern)
            elif len(parts) == 3:
                sel = Selector(parts[0], parts[1], parts[2], pattern)
            else:
                raise SelectorError(f"Invalid table inclusion pattern: {pattern}", pattern=pattern)
            for p in (sel.namespace, sel.database, sel.table):
                if p is not None:
                    _compile(p, pattern)  # fail early on a bad regex
            selectors.append(sel)
        if not selectors:
            raise SelectorError("Invalid table inclusion pattern cannot be null or empty", pattern=pattern)
        return cls(tuple(selectors), pattern)

    def matches(self, table_id: TableId) -> bool:
        """True if any selector matches ``table_id``."""
        hit = self._cache.get(table_id)
        if hit is None:
            hit = any(s.matches(table_id) for s in self.selectors)
            if len(self._cache) < 4096:
                self._cache[table_id] = hit
        return hit

    def __str__(self) -> str:
        return self.pattern
