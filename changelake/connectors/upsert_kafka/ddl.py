"""Parse a Flink ``CREATE TABLE ... WITH (...)`` statement into a :class:`TableDeclaration`.

Example::

    decl = parse_create_table('''
        CREATE TABLE pageviews_per_region (
          user_region STRING, pv BIGINT, uv BIGINT,
          PRIMARY KEY (user_region) NOT ENFORCED
        ) WITH ('connector' = 'upsert-kafka', 'topic' = 'pv', ...)''')
    decl.name, decl.schema.primary_key, decl.options["topic"]

The statement is parsed with sqlglot; column types go through
:func:`changelake.changelog.parse_data_type` (Flink's type names, e.g. ``STRING``,
``DECIMAL(10, 2)``, ``TIMESTAMP_LTZ(3)``). Primary-key columns become NOT NULL, as in Flink.
A ``WATERMARK FOR col AS expr`` clause is recorded as text (sqlglot cannot parse it); computed
and metadata columns are not supported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

import sqlglot
from sqlglot import exp

from changelake.changelog import Column, Schema, SchemaError, parse_data_type
from changelake.connectors.errors import OptionValidationError

__all__ = ["TableDeclaration", "parse_create_table"]


@dataclass(frozen=True)
class TableDeclaration:
    """A declared table: its name, schema (with primary key, possibly empty) and WITH options.

    ``watermark`` is ``(rowtime column, watermark expression text)`` of a ``WATERMARK FOR col AS
    expr`` clause, or None; it is recorded, not interpreted.
    """

    name: str
    schema: Schema
    options: Mapping[str, str] = field(default_factory=dict)
    watermark: tuple[str, str] | None = None


_SQLGLOT_TO_FLINK = {"TEXT": "STRING", "TIMESTAMPLTZ": "TIMESTAMP_LTZ", "USERDEFINED": None}


def _flink_type(kind: exp.DataType, column: str) -> str:
    text = kind.sql()
    root = kind.this.name if hasattr(kind.this, "name") else str(kind.this)
    mapped = _SQLGLOT_TO_FLINK.get(root, root)
    if mapped is None:  # a type sqlglot does not know, e.g. BYTES: keep the text
        return text
    if mapped != root:
        params = [p.sql() for p in kind.expressions]
        return f"{mapped}({', '.join(params)})" if params else mapped
    return text


def _backticks_to_quotes(text: str) -> str:
    """Flink quotes identifiers with backticks; sqlglot's default dialect wants double quotes.
    Backticks inside '...' string literals are kept."""
    out, in_string = [], False
    for ch in text:
        if ch == "'":
            in_string = not in_string  # '' (escaped quote) toggles twice: still correct
        elif ch == "`" and not in_string:
            ch = '"'
        out.append(ch)
    return "".join(out)


_WATERMARK_RE = re.compile(r"WATERMARK\s+FOR\s+(`[^`]+`|\"[^\"]+\"|\w+)\s+AS\s+", re.I)


def _split_watermark(text: str) -> tuple[str, tuple[str, str] | None]:
    """Remove a top-level ``, WATERMARK FOR col AS expr`` item from the column list."""
    m = _WATERMARK_RE.search(text)
    if not m:
        return text, None
    # the item ends at the next comma at the same paren depth, or at the closing paren
    depth, in_string, end = 0, False, len(text)
    for i in range(m.end(), len(text)):
        ch = text[i]
        if ch == "'":
            in_string = not in_string
        elif in_string:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                end = i
                break
            depth -= 1
        elif ch == "," and depth == 0:
            end = i
            break
    start = text.rfind(",", 0, m.start())
    if start < 0 or text[start:m.start()].strip(", \n\t\r"):
        start = m.start()
    column = m.group(1).strip("`\"")
    expr = text[m.end():end].strip()
    return text[:start] + text[end:], (column, expr)


def parse_create_table(text: str) -> TableDeclaration:
    """Parse one ``CREATE TABLE name (col TYPE [NOT NULL], ..., [PRIMARY KEY (a, b) NOT ENFORCED])
    WITH ('k' = 'v', ...)`` statement.

    Returns the name (as written, without quotes), the schema (columns in order; primary key in
    declaration order, key columns NOT NULL) and the options as strings.

    Raises:
        OptionValidationError: the text is not a single CREATE TABLE statement, a column type is
            unknown (names the column), or the schema is inconsistent.
    """
    text, watermark = _split_watermark(text)
    try:
        statements = [s for s in sqlglot.parse(_backticks_to_quotes(text), error_level=sqlglot.ErrorLevel.RAISE) if s is not None]
    except sqlglot.errors.ParseError as exc:
        raise OptionValidationError(f"cannot parse CREATE TABLE statement: {exc}") from exc
    if len(statements) != 1 or not isinstance(statements[0], exp.Create) or statements[0].kind != "TABLE":
        raise OptionValidationError("expected exactly one CREATE TABLE statement")
    create = statements[0]
    table_schema = create.this
    if not isinstance(table_schema, exp.Schema):
        raise OptionValidationError("CREATE TABLE needs a column list")
    name = table_schema.this.name if table_schema.this is not None else ""
    columns: list[Column] = []
    primary_key: tuple[str, ...] = ()
    for item in table_schema.expressions:
        if isinstance(item, exp.ColumnDef):
            col = item.name
            kind = item.args.get("kind")
            if kind is None:
                raise OptionValidationError(f"column {col!r} has no type (computed columns are not supported)")
            try:
                dtype = parse_data_type(_flink_type(kind, col))
            except ValueError as exc:
                raise OptionValidationError(f"column {col!r}: {exc}") from exc
            constraints = item.args.get("constraints") or []
            if any(isinstance(c.args.get("kind"), exp.NotNullColumnConstraint) for c in constraints):
                dtype = dtype.with_nullable(False)
            if any(isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint) for c in constraints):
                primary_key = primary_key + (col,)
            columns.append(Column(col, dtype))
        elif isinstance(item, exp.PrimaryKey):
            primary_key = tuple(e.name for e in item.expressions)
        else:
            raise OptionValidationError(f"unsupported item in CREATE TABLE {name}: {item.sql()}")
    options: dict[str, str] = {}
    props = create.args.get("properties")
    for prop in props.expressions if props is not None else []:
        if not isinstance(prop, exp.Property):
            raise OptionValidationError(f"unsupported table property {prop.sql()!r}; use 'key' = 'value'")
        key = prop.this.this if isinstance(prop.this, exp.Literal) else prop.name
        value = prop.args.get("value")
        options[str(key)] = value.this if isinstance(value, exp.Literal) else value.sql() if value is not None else ""
    try:
        schema = Schema(tuple(columns))
        if primary_key:
            schema = schema.with_primary_key(primary_key)
    except SchemaError as exc:
        raise OptionValidationError(f"table {name}: {exc}") from exc
    return TableDeclaration(name, schema, options, watermark)
