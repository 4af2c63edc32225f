"""Flink CDC ``route`` rules: map a source TableId to one or more sink TableIds.

Semantics of Flink CDC's ``TableIdRouter`` (``docs/content/docs/core-concept/route.md``):

- ``source-table`` is a selector in the ``tables`` syntax (:mod:`changelake.changelog.selectors`);
- ``sink-table`` is the target ``db.table``; with ``replace-symbol`` (e.g. ``<>``) every occurrence
  of the symbol is replaced by the source table name; without it, ``$1``, ``$2``… refer to regex
  groups of ``source-table`` matched against ``db.table`` (the two features are not combined);
- ``route-mode`` ``ALL_MATCH`` (default: every matching rule yields a sink table, so one source
  table may fan out) or ``FIRST_MATCH``;
- a table no rule matches keeps its own TableId.

Example::

    >>> router = Router([RouteRule(r"app_db.order_\\.*", "ods_db.ods_orders")])
    >>> router.route(TableId("app_db", "order_01"))
    [TableId(database='ods_db', table='ods_orders')]
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from changelake.changelog.errors import ChangelogError
from changelake.changelog.event import DataChangeEvent
from changelake.changelog.schema import TableId
from changelake.changelog.selectors import SelectorError, Selectors

__all__ = ["RouteError", "RouteMode", "RouteRule", "Router", "parse_route_rules"]

_GROUP_REF = re.compile(r"\$(\d+)")


class RouteError(ChangelogError, ValueError):
    """A route rule is malformed (missing key, bad regex, unknown group reference)."""


class RouteMode(enum.Enum):
    """Pipeline ``route-mode``: how many matching rules apply to one table."""

    ALL_MATCH = "ALL_MATCH"
    FIRST_MATCH = "FIRST_MATCH"


@dataclass(frozen=True)
class RouteRule:
    """One ``route`` entry.

    Attributes:
        source_table: selector in ``tables`` syntax (key ``source-table``).
        sink_table: target table text (key ``sink-table``), may hold ``replace_symbol`` or ``$n``.
        replace_symbol: text replaced by the source table name (key ``replace-symbol``).
        description: free text (key ``description``).
    """

    source_table: str
    sink_table: str
    replace_symbol: str | None = None
    description: str | None = None
    _selectors: Selectors | None = field(default=None, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.source_table:
            raise RouteError("route rule needs 'source-table'")
        if not self.sink_table:
            raise RouteError(f"route rule for source-table {self.source_table!r} needs 'sink-table'")
        try:
            sel = Selectors.parse(self.source_table)
        except SelectorError as exc:
            raise RouteError(
                f"Failed to parse regular expression in routing rule {self.source_table!r} -> "
                f"{self.sink_table!r}. Notice that `.` is used to separate Table ID components. "
                f"To use it as a regex token, put a `\\` before to escape it. ({exc})"
            ) from exc
        object.__setattr__(self, "_selectors", sel)

    @property
    def selectors(self) -> Selectors:
        assert self._selectors is not None
        return self._selectors

    def matches(self, table_id: TableId) -> bool:
        return self.selectors.matches(table_id)

    def resolve(self, table_id: TableId) -> TableId:
        """The sink TableId for a matching ``table_id``.

        Raises:
            RouteError: ``sink-table`` refers to a group ``$n`` the source regex does not have.
        """
        if self.replace_symbol:
            return TableId.parse(self.sink_table.replace(self.replace_symbol, table_id.table))
        if not _GROUP_REF.search(self.sink_table):
            return TableId.parse(self.sink_table)
        text = str(table_id)
        for sel in self.selectors.selectors:
            m = re.fullmatch(sel.regex(), text, re.IGNORECASE)
            if m is None:
                continue

            def group(g: re.Match[str], m: re.Match[str] = m) -> str:
                n = int(g.group(1))
                if n > (m.re.groups or 0):
                    raise RouteError(
                        f"sink-table {self.sink_table!r} refers to ${n} but source-table "
                        f"{self.source_table!r} has {m.re.groups} group(s)"
                    )
                return m.group(n) or ""

            return TableId.parse(_GROUP_REF.sub(group, self.sink_table))
        return TableId.parse(self.sink_table)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> "RouteRule":
        """Build from a YAML ``route`` entry (keys ``source-table``, ``sink-table``,
        ``replace-symbol``, ``description``). Raises RouteError on unknown or missing keys."""
        allowed = {"source-table", "sink-table", "replace-symbol", "description"}
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise RouteError(f"Unsupported keys {unknown} in route rule; supported keys are {sorted(allowed)}")
        return cls(
            str(raw.get("source-table") or ""),
            str(raw.get("sink-table") or ""),
            raw.get("replace-symbol"),
            raw.get("description"),
        )


def parse_route_rules(raw: Iterable[Mapping[str, Any]]) -> list[RouteRule]:
    """Parse the YAML ``route`` list. Raises RouteError."""
    return [RouteRule.from_mapping(r) for r in raw]


class Router:
    """Applies route rules to TableIds and events (results cached per TableId)."""

    def __init__(self, rules: Sequence[RouteRule], mode: RouteMode | str = RouteMode.ALL_MATCH) -> None:
        self.rules = list(rules)
        self.mode = RouteMode(mode.upper()) if isinstance(mode, str) else mode
        self._cache: dict[TableId, list[TableId]] = {}

    def route(self, table_id: TableId) -> list[TableId]:
        """Sink TableIds of ``table_id``, in rule order; ``[table_id]`` when no rule matches."""
        hit = self._cache.get(table_id)
        if hit is not None:
            return list(hit)
        out: list[TableId] = []
        for rule in self.rules:
            if rule.matches(table_id):
                target = rule.resolve(table_id)
                if target not in out:
                    out.append(target)
                if self.mode is RouteMode.FIRST_MATCH:
                    break
        if not out:
            out = [table_id]
        self._cache[table_id] = out
        return list(out)

    def merged_into(self, table_id: TableId, target: TableId) -> RouteRule | None:
        """The rule that makes ``target`` a *merge* of several source tables, one of them
        ``table_id`` (None: ``table_id`` is the only table routed there).

        A rule merges when its ``sink-table`` is fixed (no ``replace-symbol``, no ``$n``) and its
        ``source-table`` can match a table other than ``table_id`` (a pattern, or a list); two rules
        naming one fixed ``sink-table`` for different source tables merge as well. Decided from the
        rules alone, so a table not seen yet counts (as Flink CDC's sharded-table merge).
        """
        routing = [r for r in self.rules if r.matches(table_id) and r.resolve(table_id) == target]
        for rule in routing:
            if _fixed_sink(rule) and not _same(_single_table(rule), table_id):
                return rule
        for rule in self.rules:
            if rule in routing or not _fixed_sink(rule) or TableId.parse(rule.sink_table) != target:
                continue
            if not _same(_single_table(rule), table_id):
                return rule
        return None

    def route_event(self, event: DataChangeEvent) -> list[DataChangeEvent]:
        """The event re-addressed to each sink table (the event itself when unrouted)."""
        from dataclasses import replace

        targets = self.route(event.table)
        if targets == [event.table]:
            return [event]
        return [replace(event, table=t) for t in targets]


_LITERAL = re.compile(r"[A-Za-z0-9_\-]+")  # a selector part with no regex token in it


def _same(a: TableId | None, b: TableId) -> bool:
    return a is not None and str(a).lower() == str(b).lower()  # selectors ignore case


def _fixed_sink(rule: RouteRule) -> bool:
    return not rule.replace_symbol and not _GROUP_REF.search(rule.sink_table)


def _single_table(rule: RouteRule) -> TableId | None:
    """The one table ``rule.source_table`` can match (``db.t`` with no regex in it), else None."""
    if len(rule.selectors.selectors) != 1:
        return None
    sel = rule.selectors.selectors[0]
    parts = [p for p in (sel.namespace, sel.database, sel.table) if p is not None]
    if not all(_LITERAL.fullmatch(p) for p in parts):
        return None
    names = parts
    return TableId(names[-2], names[-1]) if len(names) >= 2 else TableId(None, names[0])
