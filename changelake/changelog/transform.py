"""Flink CDC ``transform`` rules (projection, filter, primary keys) applied to change events.

Supported subset of Flink CDC's transform block (``docs/content/docs/core-concept/transform.md``):

- ``source-table``: selector in the ``tables`` syntax (required);
- ``projection``: ``\\*`` (or ``*``) for every column, or a comma list of plain column names
  (optionally backtick-quoted). Computed columns, functions and ``AS`` aliases raise
  :class:`TransformError` ("not supported");
- ``filter``: one or more ``<column> <op> <literal>`` comparisons joined by ``AND``; ``op`` is
  ``=``, ``<>``, ``!=``, ``<``, ``<=``, ``>``, ``>=``; literals are numbers, ``'strings'``,
  ``TRUE``/``FALSE``; also ``<column> IS [NOT] NULL``. ``OR``, functions and anything else raise
  :class:`TransformError` ("not supported");
- ``primary-keys``: comma list (composite keys allowed); the columns become NOT NULL;
- ``partition-keys``, ``table-options``, ``description``: accepted and kept, not interpreted.

Only the **first** matching rule applies (as Flink CDC). A filter is applied to both images of an
event so that the changelog stays consistent: an update whose before-image passes and after-image
fails becomes a delete, the reverse becomes an insert, both failing drops the event.

When an event has no schema (e.g. decoded from debezium-json without ``schema``), a schema is
inferred from the row's Python values (:func:`infer_schema`) so that ``primary-keys`` can be set.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import operator
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from changelake.changelog.errors import ChangelogError
from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Column, Schema, TableId
from changelake.changelog.selectors import SelectorError, Selectors
from changelake.changelog.types import DataType, TypeRoot

__all__ = [
    "TransformError",
    "TransformRule",
    "Transformer",
    "infer_schema",
    "parse_transform_rules",
]


class TransformError(ChangelogError, ValueError):
    """A transform rule is invalid or uses an unsupported expression.

    Attributes:
        source_table: the rule's ``source-table``.
        option: the rule key at fault (``projection``, ``filter``, ``primary-keys``…), if any.
    """

    def __init__(self, message: str, *, source_table: str | None = None, option: str | None = None) -> None:
        self.source_table = source_table
        self.option = option
        super().__init__(message)


_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_$]*)"
_IDENT_RE = re.compile(rf"^\s*({_IDENT})\s*$")
_LITERAL = r"(?:'(?:[^']|'')*'|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|TRUE|FALSE)"
_CMP_RE = re.compile(rf"^\s*({_IDENT})\s*(=|<>|!=|<=|>=|<|>)\s*({_LITERAL})\s*$", re.IGNORECASE)
_NULL_RE = re.compile(rf"^\s*({_IDENT})\s+IS\s+(NOT\s+)?NULL\s*$", re.IGNORECASE)
_AND_RE = re.compile(r"\s+AND\s+", re.IGNORECASE)
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def _parse_literal(text: str) -> Any:
    up = text.upper()
    if up == "TRUE":
        return True
    if up == "FALSE":
        return False
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return decimal.Decimal(text)


def _coerce(literal: Any, value: Any) -> Any:
    """Bring a literal to the Python type of a row value (string literals for temporals)."""
    if isinstance(literal, str):
        if isinstance(value, _dt.datetime):
            return _dt.datetime.fromisoformat(literal.replace("Z", "+00:00"))
        if isinstance(value, _dt.date):
            return _dt.date.fromisoformat(literal)
        if isinstance(value, bool):
            return literal.lower() == "true"
        if isinstance(value, (int, float, decimal.Decimal)):
            return decimal.Decimal(literal)
    if isinstance(value, float) and isinstance(literal, decimal.Decimal):
        return float(literal)
    if isinstance(value, str) and not isinstance(literal, str):
        return str(literal)
    return literal


@dataclass(frozen=True)
class _Condition:
    column: str
    op: str  # comparison operator, or "is null" / "is not null"
    literal: Any = None

    def test(self, row: Mapping[str, Any]) -> bool:
        value = row.get(self.column)
        if self.op == "is null":
            return value is None
        if self.op == "is not null":
            return value is not None
        if value is None:
            return False  # SQL: a comparison with NULL is unknown, the row is filtered out
        try:
            lit = _coerce(self.literal, value)
            return bool(_OPS[self.op](value, lit))
        except (TypeError, ValueError, decimal.InvalidOperation):
            return False


def _parse_filter(text: str, source_table: str) -> tuple[_Condition, ...]:
    conditions = []
    # split on AND outside quotes
    parts: list[str] = []
    buf: list[str] = []
    tokens = re.split(r"('(?:[^']|'')*')", text)
    for tok in tokens:
        if tok.startswith("'"):
            buf.append(tok)
            continue
        pieces = _AND_RE.split(tok)
        buf.append(pieces[0])
        for p in pieces[1:]:
            parts.append("".join(buf))
            buf = [p]
    parts.append("".join(buf))
    for part in parts:
        m = _CMP_RE.match(part)
        if m:
            conditions.append(_Condition(_unquote(m.group(1)), m.group(2), _parse_literal(m.group(3))))
            continue
        m = _NULL_RE.match(part)
        if m:
            conditions.append(_Condition(_unquote(m.group(1)), "is not null" if m.group(2) else "is null"))
            continue
        raise TransformError(
            f"filter expression {part.strip()!r} in transform rule for source-table {source_table!r} is not "
            f"supported; changelake supports '<column> <op> <literal>' (op one of =, <>, !=, <, <=, >, >=) "
            f"and '<column> IS [NOT] NULL', joined by AND",
            source_table=source_table,
            option="filter",
        )
    return tuple(conditions)


def _parse_projection(text: str | None, source_table: str) -> tuple[str, ...] | None:
    if text is None or text.strip() in ("", "*", "\\*"):
        return None
    cols = []
    for item in text.split(","):
        m = _IDENT_RE.match(item)
        if not m:
            raise TransformError(
                f"projection item {item.strip()!r} in transform rule for source-table {source_table!r} is not "
                f"supported; changelake supports '\\*' or a comma list of plain column names",
                source_table=source_table,
                option="projection",
            )
        cols.append(_unquote(m.group(1)))
    return tuple(cols)


def _split_names(text: str | Sequence[str] | None) -> tuple[str, ...]:
    if text is None:
        return ()
    items = text.split(",") if isinstance(text, str) else list(text)
    return tuple(_unquote(i.strip()) for i in items if i and i.strip())


_PY_TYPES: list[tuple[type, Callable[[Any], DataType]]] = [
    (bool, lambda v: DataType(TypeRoot.BOOLEAN)),
    (int, lambda v: DataType(TypeRoot.BIGINT)),
    (float, lambda v: DataType(TypeRoot.DOUBLE)),
    (decimal.Decimal, lambda v: DataType.decimal(38, max(0, -v.as_tuple().exponent) if isinstance(v.as_tuple().exponent, int) else 0)),
    (str, lambda v: DataType(TypeRoot.STRING)),
    (bytes, lambda v: DataType(TypeRoot.BYTES)),
    (_dt.datetime, lambda v: DataType(TypeRoot.TIMESTAMP_LTZ if v.tzinfo else TypeRoot.TIMESTAMP, precision=6)),
    (_dt.date, lambda v: DataType(TypeRoot.DATE)),
    (_dt.timedelta, lambda v: DataType(TypeRoot.TIME, precision=6)),
]


def infer_schema(values: Mapping[str, Any], primary_key: Sequence[str] = ()) -> Schema:
    """Infer a schema from one row's Python values (column order kept).

    bool -> BOOLEAN, int -> BIGINT, float -> DOUBLE, Decimal -> DECIMAL(38, scale of the value),
    str -> STRING, bytes -> BYTES, datetime -> TIMESTAMP(6) (aware: TIMESTAMP_LTZ(6)), date -> DATE,
    timedelta -> TIME(6), None or anything else -> STRING. Raises SchemaError if a key column is absent.

    Rows with the same column names and Python types (no Decimal/datetime, whose column type depends
    on the value) get the same Schema object from a cache, so later equality checks are identity checks.
    """
    key: tuple[Any, ...] | None = (tuple(primary_key), *((name, type(v)) for name, v in values.items()))
    assert key is not None
    if any(t not in _CACHEABLE for _, t in key[1:]):
        key = None  # the type depends on the value (DECIMAL scale, time zone)
    else:
        cached = _INFERRED.get(key)
        if cached is not None:
            return cached
    schema = _infer_schema(values, primary_key)
    if key is not None:
        if len(_INFERRED) >= 1024:
            _INFERRED.clear()
        _INFERRED[key] = schema
    return schema


#: Python types whose inferred column type does not depend on the value (cached by type).
_CACHEABLE = frozenset({bool, int, float, str, bytes, type(None), _dt.date, _dt.timedelta})
_INFERRED: dict[tuple[Any, ...], Schema] = {}


def _infer_schema(values: Mapping[str, Any], primary_key: Sequence[str]) -> Schema:
    cols = []
    for name, v in values.items():
        dtype = DataType(TypeRoot.STRING)
        for py, make in _PY_TYPES:
            if v is not None and isinstance(v, py):
                dtype = make(v)
                break
        cols.append(Column(name, dtype))
    return Schema(tuple(cols), ()).with_primary_key(primary_key) if primary_key else Schema(tuple(cols))


@dataclass(frozen=True)
class TransformRule:
    """One ``transform`` entry (see the module docstring for the supported subset).

    Attributes:
        source_table: selector in ``tables`` syntax.
        projection: ``\\*`` / None (all columns) or a comma list of column names.
        filter: ``col op literal [AND …]`` or None.
        primary_keys: the new primary key (comma list or sequence), empty to keep the source's.
        partition_keys, table_options, description: kept as given, not interpreted.

    Raises:
        TransformError: bad selector, unsupported projection or filter.
    """

    source_table: str
    projection: str | None = None
    filter: str | None = None
    primary_keys: tuple[str, ...] | str = ()
    partition_keys: tuple[str, ...] | str = ()
    table_options: str | None = None
    description: str | None = None
    _selectors: Selectors | None = field(default=None, repr=False, compare=False)
    _columns: tuple[str, ...] | None = field(default=None, repr=False, compare=False)
    _conditions: tuple[_Condition, ...] = field(default=(), repr=False, compare=False)
    _schemas: dict[Schema, Schema] = field(default_factory=dict, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.source_table:
            raise TransformError("transform rule needs 'source-table'", option="source-table")
        try:
            sel = Selectors.parse(self.source_table)
        except SelectorError as exc:
            raise TransformError(
                f"invalid source-table {self.source_table!r} in transform rule: {exc}",
                source_table=self.source_table,
                option="source-table",
            ) from exc
        object.__setattr__(self, "_selectors", sel)
        object.__setattr__(self, "primary_keys", _split_names(self.primary_keys))
        object.__setattr__(self, "partition_keys", _split_names(self.partition_keys))
        object.__setattr__(self, "_columns", _parse_projection(self.projection, self.source_table))
        if self.filter and self.filter.strip():
            object.__setattr__(self, "_conditions", _parse_filter(self.filter, self.source_table))

    def matches(self, table_id: TableId) -> bool:
        assert self._selectors is not None
        return self._selectors.matches(table_id)

    # -- schema ---------------------------------------------------------------------------------
    def apply_schema(self, schema: Schema) -> Schema:
        """The schema after projection and primary keys.

        Results are cached by the input schema's value (a Schema is immutable).

        Raises:
            TransformError: a projected or key column is not in ``schema`` (names the columns).
        """
        cached = self._schemas.get(schema)
        if cached is None:
            if len(self._schemas) >= 1024:
                self._schemas.clear()
            cached = self._schemas[schema] = self._apply_schema(schema)
        return cached

    def _apply_schema(self, schema: Schema) -> Schema:
        out = schema
        if self._columns is not None:
            missing = [c for c in self._columns if c not in schema]
            if missing:
                raise TransformError(
                    f"projection of transform rule for source-table {self.source_table!r} names unknown "
                    f"column(s) {missing}; columns are {schema.names}",
                    source_table=self.source_table,
                    option="projection",
                )
            out = schema.project(self._columns)
        keys = tuple(self.primary_keys)
        if keys:
            missing = [k for k in keys if k not in out]
            if missing:
                raise TransformError(
                    f"primary-keys {list(keys)} of transform rule for source-table {self.source_table!r}: "
                    f"column(s) {missing} not found; columns are {out.names}",
                    source_table=self.source_table,
                    option="primary-keys",
                )
            out = out.with_primary_key(keys)
        return out

    # -- rows -----------------------------------------------------------------------------------
    def passes(self, row: Mapping[str, Any] | None) -> bool:
        """True if ``row`` satisfies the filter (always true without a filter)."""
        return row is not None and all(c.test(row) for c in self._conditions)

    def _project(self, row: Mapping[str, Any] | None, schema: Schema) -> Mapping[str, Any] | None:
        if row is None:
            return None
        names = schema.names
        if len(row) == len(names) and all(a == b for a, b in zip(row, names)):
            return row  # already the schema's columns in order (row images are never mutated)
        return {name: row.get(name) for name in names}

    def apply(self, event: DataChangeEvent) -> DataChangeEvent | None:
        """Apply this rule to a matching event; None when the filter drops it.

        Raises:
            TransformError: see :meth:`apply_schema`.
        """
        if event.op is Op.TRUNCATE:
            # No row images: only the schema (when the event carries one) is transformed.
            return event if event.schema is None else replace(event, schema=self.apply_schema(event.schema))
        source_schema = event.schema
        if source_schema is None:
            row = event.key_row or event.after or event.before or {}
            source_schema = infer_schema(row)
        schema = self.apply_schema(source_schema)
        op, before, after = event.op, event.before, event.after
        if self._conditions:
            if op in (Op.CREATE, Op.READ):
                if not self.passes(after):
                    return None
            elif op is Op.DELETE:
                if not self.passes(before):
                    return None
            elif op is Op.UPDATE:
                b, a = self.passes(before), self.passes(after)
                if not b and not a:
                    return None
                if a and not b:
                    op, before = Op.CREATE, None
                elif b and not a:
                    op, after = Op.DELETE, None
        return DataChangeEvent(
            event.table, op, self._project(before, schema), self._project(after, schema), schema, event.ts_ms, event.position
        )

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> "TransformRule":
        """Build from a YAML ``transform`` entry. Raises TransformError on unknown keys."""
        allowed = {
            "source-table", "projection", "filter", "primary-keys", "partition-keys",
            "table-options", "table-options.delimiter", "description", "converter-after-transform",
        }
        unknown = sorted(set(raw) - allowed)
        if unknown:
            raise TransformError(
                f"Unsupported keys {unknown} in transform rule; supported keys are {sorted(allowed)}",
                source_table=raw.get("source-table"),
            )
        if raw.get("converter-after-transform"):
            raise TransformError(
                "converter-after-transform is not supported by changelake",
                source_table=raw.get("source-table"),
                option="converter-after-transform",
            )
        return cls(
            source_table=str(raw.get("source-table") or ""),
            projection=raw.get("projection"),
            filter=raw.get("filter"),
            primary_keys=raw.get("primary-keys") or (),
            partition_keys=raw.get("partition-keys") or (),
            table_options=raw.get("table-options"),
            description=raw.get("description"),
        )


def parse_transform_rules(raw: Iterable[Mapping[str, Any]]) -> list[TransformRule]:
    """Parse the YAML ``transform`` list. Raises TransformError."""
    return [TransformRule.from_mapping(r) for r in raw]


class Transformer:
    """Applies the first matching :class:`TransformRule` to each event.

    Example::

        t = Transformer([TransformRule(r"\\.*.\\.*", projection=r"\\*", primary_keys="id")])
        out = t.apply(event)   # same event with schema.primary_key == ("id",)
    """

    def __init__(self, rules: Sequence[TransformRule]) -> None:
        self.rules = list(rules)
        self._rule_of: dict[TableId, TransformRule | None] = {}

    def rule_for(self, table_id: TableId) -> TransformRule | None:
        """The first rule whose source-table matches, or None (cached per table)."""
        if table_id in self._rule_of:
            return self._rule_of[table_id]
        found = next((rule for rule in self.rules if rule.matches(table_id)), None)
        if len(self._rule_of) >= 4096:
            self._rule_of.clear()
        self._rule_of[table_id] = found
        return found

    def apply(self, event: DataChangeEvent) -> DataChangeEvent | None:
        """The transformed event; the event unchanged when no rule matches; None if filtered out."""
        rule = self.rule_for(event.table)
        return event if rule is None else rule.apply(event)

    def apply_schema(self, table_id: TableId, schema: Schema) -> Schema:
        """The schema ``table_id`` has after its transform (unchanged when no rule matches)."""
        rule = self.rule_for(table_id)
        return schema if rule is None else rule.apply_schema(schema)
