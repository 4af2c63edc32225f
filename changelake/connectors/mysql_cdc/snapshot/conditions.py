"""Debezium's ``additional-conditions`` of an ``execute-snapshot`` signal, parsed and re-rendered.

As Debezium, each entry names a table and a filter that restricts the rows the ad-hoc snapshot reads::

    {"data-collections": ["shop.orders"], "type": "incremental",
     "additional-conditions": [{"data-collection": "shop.orders", "filter": "status = 'open' AND id > 100"}]}

Debezium pastes the filter text into its chunk query. Here the filter is parsed with sqlglot (MySQL
dialect) and accepted only when it is one plain boolean condition over the table's own columns:
comparisons, ``AND``/``OR``/``NOT``, ``IS [NOT] NULL``, ``IN (literals)``, ``BETWEEN``, ``LIKE``,
arithmetic, ``CAST`` and a short list of pure functions. Subqueries, further statements, variables,
placeholders, comments and any other function (``SLEEP``, ``BENCHMARK``, ``GET_LOCK``, ...) are refused
with :class:`AdditionalConditionError`. The SQL that runs is rendered from the parsed tree with every
identifier quoted, never the signal's text.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from changelake.connectors.errors import SourceError

__all__ = ["AdditionalConditionError", "parse_conditions", "render_condition", "where_clause"]

#: nodes a filter may contain (anything else is refused).
_ALLOWED: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Tuple,
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
    exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.Escape,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg,
    exp.Cast, exp.DataType, exp.DataTypeParam,
    # pure functions (no side effects, no reads outside the row)
    exp.Upper, exp.Lower, exp.Length, exp.Trim, exp.Substring, exp.Concat, exp.Coalesce, exp.Abs,
    exp.Round, exp.Floor, exp.Ceil, exp.If, exp.Nullif, exp.Year, exp.Month, exp.Day, exp.Date,
)
#: a filter's top node must be a condition (a boolean), not e.g. a bare column or number.
_BOOLEAN: tuple[type[exp.Expression], ...] = (
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
    exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.Boolean, exp.Paren,
)


class AdditionalConditionError(SourceError):
    """An ``additional-conditions`` entry of a signal is not a plain boolean condition over the table's columns."""

    def __init__(self, signal_id: str, table: str | None, text: str, reason: str) -> None:
        where = f" for {table}" if table else ""  # None: not an entry of one table (its data-collection is missing)
        super().__init__(f"signal {signal_id!r}: additional-conditions filter {text!r}{where} is refused: {reason}")
        self.signal_id, self.table, self.text, self.reason = signal_id, table, text, reason


def render_condition(text: str, columns: Iterable[str], *, signal_id: str = "?", table: str | None = None) -> str:
    """The filter ``text`` re-rendered from its sqlglot tree (MySQL, identifiers back-quoted).

    Args:
        text: Debezium's ``filter`` string, e.g. ``"id > 100 AND status = 'open'"``.
        columns: the table's column names (a column outside them is refused).
        signal_id, table: named in the error.

    Raises:
        AdditionalConditionError: not exactly one boolean condition, or it holds a node outside the
            allowed set (subquery, statement, variable, placeholder, unknown function, comment), or a
            column the table does not have.
    """
    def refuse(reason: str) -> AdditionalConditionError:
        return AdditionalConditionError(signal_id, table, text, reason)

    if not isinstance(text, str) or not text.strip():
        raise refuse("it is empty")
    try:
        if any(t.comments for t in sqlglot.tokenize(text, read="mysql")):
            # comments could hide text from a reader of the signal
            raise refuse("it contains a comment")
        trees = [t for t in sqlglot.parse(text, read="mysql") if t is not None]
    except (ParseError, sqlglot.errors.TokenError) as exc:
        raise refuse(f"it does not parse as SQL ({str(exc).splitlines()[0]})") from exc
    if len(trees) != 1:
        raise refuse(f"it holds {len(trees)} statements; one condition is expected")
    tree = trees[0]
    if not isinstance(tree, _BOOLEAN):
        raise refuse(f"it is a {type(tree).__name__}, not a boolean condition")
    known = {c.lower(): c for c in columns}
    for node in tree.walk():
        if not isinstance(node, _ALLOWED):
            what = node.sql(dialect="mysql") if isinstance(node, exp.Expression) else repr(node)
            raise refuse(f"{type(node).__name__} {what!r} is not allowed (only comparisons, AND/OR/NOT, IS NULL, IN, "
                         "BETWEEN, LIKE, arithmetic, CAST and pure functions over the table's columns)")
        if node.comments:
            raise refuse("it contains a comment")
        if isinstance(node, exp.Column):
            if node.table or node.args.get("db") or node.args.get("catalog"):
                raise refuse(f"column {node.sql(dialect='mysql')!r} is qualified; name the table's columns alone")
            if node.name.lower() not in known:
                raise refuse(f"{node.name!r} is not a column of {table or 'the table'} "
                             f"(columns: {sorted(known.values())})")
            node.set("this", exp.to_identifier(known[node.name.lower()], quoted=True))
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            raise refuse("IN with a subquery is not allowed")
    return tree.sql(dialect="mysql", identify=True, comments=False)


def parse_conditions(signal_id: str, data: Mapping[str, Any], tables: Iterable[str]) -> dict[str, list[str]]:
    """``{"db.table": [filter text, ...]}`` from a signal's ``additional-conditions`` (Debezium's list of
    ``{"data-collection": ..., "filter": ...}``), for the tables being snapshotted.

    ``data-collection`` is matched as in Debezium (the exact ``db.table``); several filters for one
    table all apply (joined by ``AND``). The entries are checked for shape here; :func:`render_condition`
    checks each against its table's columns when the snapshot opens.

    Raises:
        AdditionalConditionError: an entry is not an object with two strings, names a table the
            signal does not snapshot, or its filter is refused by the parser.
    """
    if data.get("additional-condition") is not None:  # Debezium 1.x/2.0's single filter, since replaced
        raise AdditionalConditionError(signal_id, None, str(data["additional-condition"]),
                                       "Debezium's deprecated 'additional-condition' is not supported; use "
                                       "'additional-conditions': [{\"data-collection\": \"db.table\", \"filter\": ...}]")
    raw = data.get("additional-conditions")
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise AdditionalConditionError(signal_id, None, str(raw), "'additional-conditions' must be a list of "
                                       "{\"data-collection\": ..., \"filter\": ...}")
    wanted = list(tables)
    out: dict[str, list[str]] = {}
    for entry in raw:
        shape = "each entry must be {\"data-collection\": \"db.table\", \"filter\": \"<condition>\"}"
        named = entry.get("data-collection") if isinstance(entry, Mapping) else None
        if not isinstance(named, str) or not named:
            raise AdditionalConditionError(signal_id, None, str(entry), "the entry has no 'data-collection' "
                                           f"naming its table ({shape})")
        if not isinstance(entry.get("filter"), str):
            raise AdditionalConditionError(signal_id, named, str(entry), f"the entry has no 'filter' string ({shape})")
        table, text = str(entry["data-collection"]), str(entry["filter"])
        if table not in wanted:
            raise AdditionalConditionError(signal_id, table, text, f"{table} is not among the tables this signal "
                                           f"snapshots ({wanted})")
        out.setdefault(table, []).append(text)
    return out


def where_clause(conditions: Iterable[str], columns: Iterable[str], *, signal_id: str = "?",
                 table: str | None = None) -> str:
    """``"(<c1>) AND (<c2>)"`` from filters each re-rendered by :func:`render_condition`; ``""`` for none.

    Raises:
        AdditionalConditionError: as :func:`render_condition`.
    """
    cols = list(columns)
    return " AND ".join(f"({render_condition(c, cols, signal_id=signal_id, table=table)})" for c in conditions)
