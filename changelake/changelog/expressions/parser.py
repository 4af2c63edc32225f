"""Parse Flink CDC ``projection`` and ``filter`` text with sqlglot into checked syntax trees.

The dialect is Calcite's as Flink CDC configures it: identifiers quoted with backticks and
case-sensitive, strings in single quotes (``''`` escapes a quote), ``||`` concatenates strings,
function names case-insensitive. Every function call stays a plain call (``sqlglot`` does not
rewrite it into another dialect's function), so its name is looked up in changelake's own table of
built-ins and user-defined functions.

A projection ``\\*`` (or ``*``, at any place in the list) stands for every source column in order;
a bare column keeps its name; any other item needs a name, given with or without ``AS``
(``UPPER(name) AS name_upper``, ``a || b ab``) — an unnamed computed column is an error, as in
Flink CDC.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp, parser, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError

from changelake.changelog.expressions.errors import ExpressionError

__all__ = ["METADATA_COLUMNS", "ProjectionItem", "parse_projection", "parse_filter", "NILADIC", "FlinkCdcDialect"]

#: Flink CDC's hidden metadata columns (``MetadataColumns``); referenced only when named.
METADATA_COLUMNS = ("__namespace_name__", "__schema_name__", "__table_name__", "__data_event_type__")

#: Calcite's niladic temporal functions, written without parentheses.
NILADIC = ("CURRENT_TIMESTAMP", "LOCALTIMESTAMP", "CURRENT_DATE", "CURRENT_TIME", "LOCALTIME")


class FlinkCdcDialect(Dialect):
    """Calcite's lexical rules as Flink CDC's transform parser uses them (backtick identifiers)."""

    class Tokenizer(tokens.Tokenizer):
        IDENTIFIERS = ["`"]
        QUOTES = ["'"]

    class Parser(parser.Parser):
        FUNCTIONS = {}  # noqa: RUF012 (keep every call as written: exp.Anonymous)


@dataclass(frozen=True)
class ProjectionItem:
    """One item of a projection list.

    Attributes:
        name: the output column name (None for ``*``).
        node: the parsed expression (None for ``*``).
        text: the item as written, for error messages.
    """

    name: str | None
    node: exp.Expression | None
    text: str

    @property
    def is_star(self) -> bool:
        return self.node is None

    @property
    def plain_column(self) -> str | None:
        """The source column name when the item is a bare column reference, else None."""
        if isinstance(self.node, exp.Column) and not self.node.table:
            return str(self.node.name)
        return None


_ALLOWED = (
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Neg, exp.Not,
    exp.And, exp.Or, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.EQ, exp.NEQ, exp.GT, exp.GTE,
    exp.LT, exp.LTE, exp.Is, exp.In, exp.Between, exp.Like, exp.DPipe, exp.Case, exp.If, exp.Cast,
    exp.DataType, exp.DataTypeParam, exp.Anonymous, exp.Substring, exp.Trim, exp.CurrentTimestamp,
    exp.CurrentDate, exp.CurrentTime, exp.Ceil, exp.Floor, exp.Var,
)


def _check(node: exp.Expression, text: str) -> None:
    for sub in node.walk():
        if not isinstance(sub, _ALLOWED):
            raise ExpressionError(
                f"{type(sub).__name__.upper()} in expression {text!r} is not supported by changelake's transform "
                f"(supported: columns, literals, arithmetic, comparison, AND/OR/NOT, CASE, CAST, IS [NOT] NULL, "
                f"IN, BETWEEN, LIKE, ||, and function calls)",
                expression=text,
            )
        if isinstance(sub, exp.Column) and sub.table:
            raise ExpressionError(
                f"qualified column {sub.sql()!r} in expression {text!r}: transform expressions name columns of "
                f"the source table only", expression=text)


def _parse_select(body: str, where: str | None = None) -> exp.Select:
    sql = f"SELECT {body} FROM __source__" + (f" WHERE {where}" if where is not None else "")
    try:
        tree = sqlglot.parse_one(sql, read=FlinkCdcDialect)
    except ParseError as exc:
        detail = exc.errors[0].get("description") if exc.errors else str(exc)
        raise ExpressionError(f"cannot parse {(where if where is not None else body)!r}: {detail}",
                              expression=where if where is not None else body) from None
    if not isinstance(tree, exp.Select):
        raise ExpressionError(f"cannot parse {(where if where is not None else body)!r}: not an expression")
    extra = [k for k in tree.args if k not in ("expressions", "from", "from_", "where", "kind") and tree.args.get(k)]
    if extra:
        raise ExpressionError(f"cannot parse {(where if where is not None else body)!r}: unexpected {extra[0].upper()}",
                              expression=where if where is not None else body)
    return tree


def parse_projection(text: str) -> tuple[ProjectionItem, ...]:
    """The items of a ``projection`` (``\\*`` is the wildcard).

    Raises:
        ExpressionError: not parseable, an unsupported construct, a computed column without a
            name, or two items with the same output name (names the item).
    """
    body = text.replace("\\*", "*")
    tree = _parse_select(body)
    items: list[ProjectionItem] = []
    for node in tree.expressions:
        item_text = node.sql(dialect=FlinkCdcDialect)
        if isinstance(node, exp.Star):
            items.append(ProjectionItem(None, None, "*"))
            continue
        if isinstance(node, exp.Alias):
            name, inner = str(node.alias), node.this
        elif isinstance(node, exp.Column) and not node.table:
            name, inner = str(node.name), node
        else:
            raise ExpressionError(
                f"computed column {item_text!r} in projection needs a name: write '{item_text} AS <name>'",
                expression=item_text)
        _check(inner, item_text)
        items.append(ProjectionItem(name, inner, item_text))
    names = [i.name for i in items if i.name is not None]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ExpressionError(f"projection {text!r} names column(s) {dupes} more than once", expression=text)
    return tuple(items)


def parse_filter(text: str) -> exp.Expression:
    """The condition of a ``filter``.

    Raises:
        ExpressionError: not parseable or an unsupported construct.
    """
    tree = _parse_select("1", text)
    node = tree.args.get("where")
    assert node is not None
    cond: exp.Expression = node.this
    _check(cond, text)
    return cond
