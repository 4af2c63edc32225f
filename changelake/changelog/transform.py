"""Flink CDC ``transform`` rules (projection, filter, primary keys) applied to change events.

Flink CDC's transform block (``docs/content/docs/core-concept/transform.md``), for any source and sink:

- ``source-table``: selector in the ``tables`` syntax (required);
- ``projection``: a SELECT list in Flink CDC's expression language
  (:mod:`changelake.changelog.expressions`): ``\\*`` for every source column, plain columns,
  computed columns ``<expression> [AS] <name>`` and the metadata columns ``__namespace_name__``
  (NULL for MySQL, whose database is the schema, as Flink CDC's MySQL source), ``__schema_name__``,
  ``__table_name__``, ``__data_event_type__`` (``+I``, ``-U``, ``+U``, ``-D``);
- ``filter``: a WHERE condition in the same language; it may name computed columns of the
  projection (their computed value wins over a source column of the same name);
- ``primary-keys``: comma list (composite keys, computed and metadata columns allowed, e.g.
  ``__table_name__, id`` to merge sharded tables); the columns become NOT NULL;
- ``converter-after-transform: SOFT_DELETE``: a delete becomes an insert of the deleted row (use it
  with ``__data_event_type__``);
- ``partition-keys``, ``table-options``, ``description``: accepted and kept, not interpreted.

Only the **first** matching rule applies (as Flink CDC). A filter is applied to both images of an
event so that the changelog stays consistent: an update whose before-image passes and after-image
fails becomes a delete, the reverse becomes an insert, both failing drops the event.

Expressions are evaluated on Arrow arrays: :meth:`TransformRule.apply` (one event) and
:meth:`TransformRule.apply_events` (many, one evaluation per table) take change events;
:meth:`TransformRule.apply_batch` takes a ``pyarrow.Table`` of changelog rows. A rule whose
projection only selects columns and that has no filter never leaves Python dicts.

When an event has no schema (e.g. decoded from debezium-json without ``schema``), a schema is
inferred from the row's Python values (:func:`infer_schema`) so that ``primary-keys`` can be set.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import zoneinfo
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from changelake.changelog.errors import ChangelogError
from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.expressions import (
    METADATA_COLUMNS,
    BoundExpression,
    ExpressionError,
    Frame,
    ProjectionItem,
    UserDefinedFunction,
    bind,
    parse_filter,
    parse_projection,
    to_arrow_array,
)
from changelake.changelog.expressions.types import normalise
from changelake.changelog.schema import Column, Schema, TableId
from changelake.changelog.selectors import SelectorError, Selectors
from changelake.changelog.types import DataType, TypeRoot

__all__ = [
    "TransformError",
    "TransformRule",
    "TransformedBatch",
    "Transformer",
    "append_only",
    "event_position",
    "infer_schema",
    "parse_transform_rules",
]


class TransformError(ChangelogError, ValueError):
    """A transform rule is invalid, or one of its expressions fails on a row.

    Attributes:
        source_table: the rule's ``source-table``.
        option: the rule key at fault (``projection``, ``filter``, ``primary-keys``…), if any.
        column: the projected column whose expression failed (``None`` for the filter).
        row: the failing row's index in the evaluated batch, for evaluation errors.
    """

    def __init__(self, message: str, *, source_table: str | None = None, option: str | None = None,
                 column: str | None = None, row: int | None = None) -> None:
        self.source_table = source_table
        self.option = option
        self.column = column
        self.row = row
        super().__init__(message)


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


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


_META_TYPE = DataType(TypeRoot.STRING)
#: changelake's own hidden columns besides Flink CDC's (referenced only when named).
EXTRA_METADATA_COLUMNS = ("__event_position__",)
_KINDS = {Op.CREATE: ("+I",), Op.READ: ("+I",), Op.UPDATE: ("-U", "+U"), Op.DELETE: ("-D",)}


def _metadata(table: TableId, kinds: Sequence[str] | pa.Array, positions: Sequence[str | None] | None,
              wanted: frozenset[str]) -> dict[str, pa.Array]:
    """The ``wanted`` ones of Flink CDC's metadata columns for rows of ``table`` with these row
    kinds, and changelake's ``__event_position__`` (the change's source position, :func:`event_position`)."""
    n = len(kinds)
    out: dict[str, pa.Array] = {}
    if "__namespace_name__" in wanted:
        out["__namespace_name__"] = pa.nulls(n, pa.string())
    if "__schema_name__" in wanted:
        out["__schema_name__"] = pa.repeat(pa.scalar(table.database, pa.string()), n)
    if "__table_name__" in wanted:
        out["__table_name__"] = pa.repeat(pa.scalar(table.table, pa.string()), n)
    if "__data_event_type__" in wanted:
        out["__data_event_type__"] = kinds if isinstance(kinds, pa.Array) else pa.array(list(kinds), pa.string())
    if "__event_position__" in wanted:
        out["__event_position__"] = pa.array(list(positions) if positions is not None else [None] * n, pa.string())
    return out


def event_position(position: Mapping[str, Any]) -> str | None:
    """changelake's ``__event_position__``: the scalar parts of an event's source position joined
    with ``:`` in order, e.g. ``binlog:mysql-bin.000003:4711:2`` (binlog phase, file, transaction
    start, row in the transaction) or ``orders:0:42`` (Kafka topic, partition, next offset); None
    without a position. Distinct changes of one row never share it (with the row kind), so it makes
    append-only keys: ``primary-keys: id, __data_event_type__, __event_position__``."""
    parts = [str(v) for v in position.values() if isinstance(v, (str, int)) and not isinstance(v, bool)]
    return ":".join(parts) if parts else None


def _referenced(node: exp.Expression) -> set[str]:
    return {str(c.name) for c in node.find_all(exp.Column)}


@dataclass(frozen=True)
class _Output:
    """One output column of a bound projection: a source column copied, or an expression."""

    name: str
    source: str | None = None  # copied source column
    expression: BoundExpression | None = None


@dataclass(frozen=True)
class _Plan:
    """A rule bound to one input schema."""

    schema: Schema  # the output schema
    outputs: tuple[_Output, ...]
    filter: BoundExpression | None
    needed: tuple[str, ...]  # source columns the expressions read
    metadata: frozenset[str]  # metadata columns the expressions read
    computed: bool  # any computed (or metadata) output

    @property
    def simple(self) -> bool:
        return not self.computed and self.filter is None


@dataclass(frozen=True)
class TransformedBatch:
    """The result of :meth:`TransformRule.apply_batch`.

    Attributes:
        schema: the output schema.
        table: the output rows (columns of ``schema``, in the evaluation Arrow types).
        row_kinds: each output row's kind (``+I``, ``-U``, ``+U``, ``-D``; an update half whose
            other half was filtered out becomes ``+I`` / ``-D``).
        indices: each output row's index in the input batch.
    """

    schema: Schema
    table: pa.Table
    row_kinds: pa.Array
    indices: pa.Array


@dataclass(frozen=True)
class TransformRule:
    """One ``transform`` entry (see the module docstring).

    Attributes:
        source_table: selector in ``tables`` syntax.
        projection: ``\\*`` / None (all columns) or a SELECT list.
        filter: a WHERE condition or None.
        primary_keys: the new primary key (comma list or sequence), empty to keep the source's.
        converter_after_transform: ``SOFT_DELETE`` or None.
        udfs: user-defined functions by lower-case name (``pipeline.user-defined-function``).
        time_zone: the pipeline's ``local-time-zone`` (IANA name or ``+08:00``; default UTC).
        max_precision: 19 or 38 (``transform.decimal.precision.mode`` UP_TO_19 / UP_TO_38).
        partition_keys, table_options, description: kept as given, not interpreted.

    Raises:
        TransformError: bad selector, projection or filter (parse errors, unsupported syntax).
    """

    source_table: str
    projection: str | None = None
    filter: str | None = None
    primary_keys: tuple[str, ...] | str = ()
    partition_keys: tuple[str, ...] | str = ()
    table_options: str | None = None
    description: str | None = None
    converter_after_transform: str | None = None
    udfs: Mapping[str, UserDefinedFunction] = field(default_factory=dict, compare=False, hash=False)
    time_zone: str | None = None
    max_precision: int = 19
    _selectors: Selectors | None = field(default=None, repr=False, compare=False)
    _items: tuple[ProjectionItem, ...] | None = field(default=None, repr=False, compare=False)
    _filter: exp.Expression | None = field(default=None, repr=False, compare=False)
    _tz: _dt.tzinfo = field(default=_dt.timezone.utc, repr=False, compare=False)
    _plans: dict[Schema, _Plan] = field(default_factory=dict, repr=False, compare=False, hash=False)
    _last: list[Any] = field(default_factory=lambda: [None, None], repr=False, compare=False, hash=False)

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
        conv = (self.converter_after_transform or "").strip().upper() or None
        if conv not in (None, "SOFT_DELETE"):
            raise TransformError(
                f"converter-after-transform {self.converter_after_transform!r} of transform rule for source-table "
                f"{self.source_table!r} is not supported; the available value is SOFT_DELETE",
                source_table=self.source_table, option="converter-after-transform")
        object.__setattr__(self, "converter_after_transform", conv)
        object.__setattr__(self, "_tz", _time_zone(self.time_zone, self.source_table))
        if self.projection is not None and self.projection.strip() not in ("", "*", "\\*"):
            try:
                object.__setattr__(self, "_items", parse_projection(self.projection))
            except ExpressionError as exc:
                raise self._error("projection", f"projection {self.projection!r}: {exc}") from exc
        if self.filter and self.filter.strip():
            try:
                object.__setattr__(self, "_filter", parse_filter(self.filter))
            except ExpressionError as exc:
                raise self._error("filter", f"filter {self.filter!r}: {exc}") from exc

    def _error(self, option: str, message: str, column: str | None = None, row: int | None = None) -> TransformError:
        return TransformError(f"transform rule for source-table {self.source_table!r}: {message}",
                              source_table=self.source_table, option=option, column=column, row=row)

    def matches(self, table_id: TableId) -> bool:
        assert self._selectors is not None
        return self._selectors.matches(table_id)

    @property
    def has_expressions(self) -> bool:
        """True if the rule computes columns or filters (needs Arrow evaluation)."""
        return self._filter is not None or any(
            not i.is_star and (i.plain_column is None or i.plain_column in (*METADATA_COLUMNS, *EXTRA_METADATA_COLUMNS))
            for i in self._items or ())

    # -- schema ---------------------------------------------------------------------------------
    def apply_schema(self, schema: Schema) -> Schema:
        """The schema after projection and primary keys (computed columns typed as Flink CDC types them).

        Results are cached by the input schema's value (a Schema is immutable).

        Raises:
            TransformError: a projected, referenced or key column is not in ``schema``, or an
                expression does not type-check (names the rule, the option and the column).
        """
        return self._plan(schema).schema

    def metadata_read(self, schema: Schema) -> frozenset[str]:
        """The metadata columns (``__table_name__``, ``__event_position__``, ...) this rule's
        expressions read for rows of ``schema``. Raises TransformError as :meth:`apply_schema`."""
        return self._plan(schema).metadata

    def _plan(self, schema: Schema) -> _Plan:
        last = self._last
        if last[0] is schema:  # most events share their table's Schema object
            plan: _Plan = last[1]
            return plan
        cached = self._plans.get(schema)
        if cached is None:
            if len(self._plans) >= 1024:
                self._plans.clear()
            cached = self._plans[schema] = self._bind(schema)
        last[0], last[1] = schema, cached
        return cached

    def _bind(self, schema: Schema) -> _Plan:
        scope: dict[str, DataType] = {m: _META_TYPE for m in (*METADATA_COLUMNS, *EXTRA_METADATA_COLUMNS)}
        scope.update({c.name: c.type for c in schema.columns})
        outputs: list[_Output] = []
        columns: list[Column] = []
        needed: set[str] = set()
        computed = False
        if self._items is None:
            outputs = [_Output(c.name, source=c.name) for c in schema.columns]
            columns = list(schema.columns)
        else:
            for item in self._items:
                if item.is_star:
                    outputs.extend(_Output(c.name, source=c.name) for c in schema.columns)
                    columns.extend(schema.columns)
                    continue
                assert item.name is not None and item.node is not None
                plain = item.plain_column
                if plain is not None and plain in schema and plain == item.name:
                    outputs.append(_Output(item.name, source=plain))
                    columns.append(schema.column(plain))
                    continue
                try:
                    bound = bind(item.node, scope, text=item.text, udfs=self.udfs, max_precision=self.max_precision)
                except ExpressionError as exc:
                    raise self._error("projection", f"column {item.name!r} ({item.text!r}): {exc.args[0]}",
                                      column=item.name) from exc
                outputs.append(_Output(item.name, expression=bound))
                columns.append(Column(item.name, bound.dtype))
                needed |= _referenced(item.node)
                computed = True
        names = [c.name for c in columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise self._error("projection", f"projection gives column(s) {dupes} more than once; columns are {names}")
        kept_pk = all(k in names and any(o.name == k and o.source == k for o in outputs) for k in schema.primary_key)
        out = Schema(tuple(columns), schema.primary_key if kept_pk else (), comment=schema.comment)
        flt = None
        if self._filter is not None:
            fscope = dict(scope)
            fscope.update({c.name: c.type for c in columns})
            try:
                flt = bind(self._filter, fscope, text=self.filter, udfs=self.udfs, max_precision=self.max_precision)
            except ExpressionError as exc:
                raise self._error("filter", f"filter {self.filter!r}: {exc.args[0]}") from exc
            if flt.dtype.root is not TypeRoot.BOOLEAN:
                raise self._error("filter", f"filter {self.filter!r} is {flt.dtype}, not BOOLEAN")
            needed |= _referenced(self._filter)
        keys = tuple(self.primary_keys)
        if keys:
            missing = [k for k in keys if k not in out]
            if missing:
                hint = (" (project a metadata column to use it in primary-keys, e.g. 'projection: \\*, __table_name__')"
                        if any(m in METADATA_COLUMNS for m in missing) else "")
                raise self._error("primary-keys", f"primary-keys {list(keys)}: column(s) {missing} not found; "
                                  f"columns are {out.names}{hint}")
            out = out.with_primary_key(keys)
        meta = frozenset(n for n in needed if n not in schema and n in scope)
        return _Plan(out, tuple(outputs), flt, tuple(sorted(n for n in needed if n in schema)), meta, computed)

    # -- evaluation -----------------------------------------------------------------------------
    def _frame(self, plan: _Plan, schema: Schema, table: TableId, rows: Sequence[Mapping[str, Any]],
               kinds: Sequence[str], now: _dt.datetime | None, positions: Sequence[str | None] | None = None) -> Frame:
        cols: dict[str, pa.Array] = _metadata(table, kinds, positions, plan.metadata)
        for name in plan.needed:
            try:
                cols[name] = to_arrow_array([r.get(name) for r in rows], schema.column(name).type)
            except ExpressionError as exc:
                raise self._error("projection", f"column {name!r} of table {table}: {exc.args[0]}", row=exc.row) from exc
        return Frame(cols, len(rows), now or _dt.datetime.now(_dt.timezone.utc), self._tz)

    def _evaluate(self, plan: _Plan, frame: Frame) -> tuple[dict[str, pa.Array], pa.Array | None]:
        """Computed columns and the filter mask for ``frame``. Raises TransformError naming the column and row."""
        values: dict[str, pa.Array] = {}
        for o in plan.outputs:
            if o.expression is not None:
                try:
                    values[o.name] = o.expression.evaluate(frame)
                except ExpressionError as exc:
                    raise self._error("projection", f"column {o.name!r}: {exc.args[0]}", column=o.name, row=exc.row) from exc
        mask = None
        if plan.filter is not None:
            fcols = dict(frame.columns)
            fcols.update(values)
            try:
                mask = pc.fill_null(plan.filter.evaluate(Frame(fcols, frame.length, frame.now, frame.time_zone)), False)
            except ExpressionError as exc:
                raise self._error("filter", f"filter {self.filter!r}: {exc.args[0]}", row=exc.row) from exc
        return values, mask

    def passes(self, row: Mapping[str, Any] | None, schema: Schema | None = None, table: TableId | None = None) -> bool:
        """True if ``row`` satisfies the filter (always true without a filter)."""
        if row is None:
            return False
        if self._filter is None:
            return True
        schema = schema or infer_schema(row)
        plan = self._plan(schema)
        frame = self._frame(plan, schema, table or TableId(None, ""), [row], ["+I"], None)
        _, mask = self._evaluate(plan, frame)
        return mask is None or bool(mask[0].as_py())

    def _project(self, row: Mapping[str, Any] | None, schema: Schema) -> Mapping[str, Any] | None:
        if row is None:
            return None
        names = schema.names
        if len(row) == len(names) and all(a == b for a, b in zip(row, names)):
            return row  # already the schema's columns in order (row images are never mutated)
        return {name: row.get(name) for name in names}

    def apply(self, event: DataChangeEvent, *, now: _dt.datetime | None = None) -> DataChangeEvent | None:
        """Apply this rule to a matching event; None when the filter drops it.

        Raises:
            TransformError: see :meth:`apply_schema`; an expression failing on the event (names the
                rule, the column, the image and the event's position).
        """
        return self.apply_events([event], now=now)[0]

    def apply_events(self, events: Sequence[DataChangeEvent], *, now: _dt.datetime | None = None) -> list[DataChangeEvent | None]:
        """:meth:`apply` for many events (of tables this rule matches), evaluated as one Arrow batch
        per schema; the result list is parallel to ``events``.

        Raises:
            TransformError: as :meth:`apply`; the message names the failing event.
        """
        out: list[DataChangeEvent | None] = [None] * len(events)
        groups: dict[tuple[TableId, int], list[int]] = {}
        by_id: dict[int, Schema] = {}
        for i, event in enumerate(events):
            if event.op is Op.TRUNCATE:
                # No row images: only the schema (when the event carries one) is transformed.
                out[i] = event if event.schema is None else replace(event, schema=self.apply_schema(event.schema))
                continue
            source_schema = event.schema
            if source_schema is None:
                row = event.key_row or event.after or event.before or {}
                source_schema = infer_schema(row)
            plan = self._plan(source_schema)
            if plan.simple:
                out[i] = self._rebuild(event, plan, None, None)
                continue
            groups.setdefault((event.table, id(source_schema)), []).append(i)
            by_id[id(source_schema)] = source_schema
        for (table, schema_id), idx in groups.items():
            source_schema = by_id[schema_id]
            plan = self._plan(source_schema)
            rows: list[Mapping[str, Any]] = []
            kinds: list[str] = []
            positions: list[str | None] = []
            want_position = "__event_position__" in plan.metadata
            where: list[tuple[int, str]] = []  # (event index, image) per row
            for i in idx:
                e = events[i]
                for kind in _KINDS[e.op]:
                    image = e.before if kind in ("-U", "-D") else e.after
                    rows.append(image or {})
                    kinds.append(kind)
                    if want_position:
                        positions.append(event_position(e.position))
                    where.append((i, "before" if kind in ("-U", "-D") else "after"))
            try:
                frame = self._frame(plan, source_schema, table, rows, kinds, now, positions)
                values, mask = self._evaluate(plan, frame)
            except TransformError as exc:
                if exc.row is None or exc.row >= len(where):
                    raise
                i, side = where[exc.row]
                e = events[i]
                raise TransformError(
                    f"{exc.args[0]} (the '{side}' row of a '{e.op.value}' event of table {e.table} at position "
                    f"{dict(e.position)})", source_table=self.source_table, option=exc.option, column=exc.column,
                    row=exc.row) from exc
            columns = {k: v.to_pylist() for k, v in values.items()}
            keep = mask.to_pylist() if mask is not None else None
            r = 0
            for i in idx:
                out[i] = self._rebuild(events[i], plan, columns, keep, r)
                r += len(_KINDS[events[i].op])
        return out

    def _rebuild(self, e: DataChangeEvent, plan: _Plan, computed: dict[str, list[Any]] | None,
                 keep_all: list[Any] | None, r: int = 0) -> DataChangeEvent | None:
        """The output event of ``e`` whose rows start at row ``r`` of ``computed`` / ``keep_all``."""
        schema = plan.schema
        images: list[Mapping[str, Any] | None] = []
        for j, kind in enumerate(_KINDS[e.op]):
            image = e.before if kind in ("-U", "-D") else e.after
            if image is None:
                images.append(None)
            elif computed is None:
                images.append(self._project(image, schema))
            else:
                images.append({o.name: (computed[o.name][r + j] if o.expression is not None else image.get(o.source or o.name))
                               for o in plan.outputs})
        keep = keep_all[r:r + len(images)] if keep_all is not None else None
        op = e.op
        if op is Op.UPDATE:
            before, after = images
        elif op is Op.DELETE:
            before, after = images[0], None
        else:
            before, after = None, images[0]
        if keep is not None:
            if op in (Op.CREATE, Op.READ, Op.DELETE):
                if not keep[0]:
                    return None
            else:
                b, a = bool(keep[0]), bool(keep[1])
                if not b and not a:
                    return None
                if a and not b:
                    op, before = Op.CREATE, None
                elif b and not a:
                    op, after = Op.DELETE, None
        if op is Op.DELETE and self.converter_after_transform == "SOFT_DELETE":
            op, before, after = Op.CREATE, None, before
        return DataChangeEvent(e.table, op, before, after, schema, e.ts_ms, e.position, e.transaction)

    def apply_batch(self, table: TableId, schema: Schema, batch: pa.Table | pa.RecordBatch,
                    row_kinds: Sequence[str] | pa.Array, *, now: _dt.datetime | None = None) -> TransformedBatch:
        """Apply this rule to a batch of changelog rows of ``table`` (the columnar path).

        Args:
            batch: one column per column of ``schema`` that the rule reads (others may be absent
                when only computed columns are projected), in the Arrow types of
                :func:`~changelake.changelog.expressions.types.arrow_type` or types that cast to them.
            row_kinds: each row's kind, ``+I``, ``-U``, ``+U`` or ``-D`` (a ``-U`` directly followed
                by its ``+U``); ``__data_event_type__`` reads it.
            now: the processing time for NOW()/CURRENT_TIMESTAMP (default: the current time).

        Returns:
            the output rows, their kinds and their input indices (:class:`TransformedBatch`);
            with SOFT_DELETE a ``-D`` is output as ``+I``.

        Raises:
            TransformError: an expression fails; ``row`` is the input row's index.
        """
        plan = self._plan(schema)
        kind_array = row_kinds if isinstance(row_kinds, pa.Array) else pa.array(list(row_kinds), pa.string())
        n = batch.num_rows
        given = batch.column("__event_position__").to_pylist() if "__event_position__" in batch.column_names else None
        cols: dict[str, pa.Array] = _metadata(table, kind_array, given, plan.metadata)
        for c in schema.columns:
            if c.name in batch.column_names:
                cols[c.name] = normalise(batch.column(c.name), c.type)
        missing = [c for c in plan.needed if c not in cols]
        if missing:
            raise self._error("projection", f"batch of table {table} lacks column(s) {missing}")
        frame = Frame(cols, n, now or _dt.datetime.now(_dt.timezone.utc), self._tz)
        values, mask = self._evaluate(plan, frame)
        arrays = []
        for o in plan.outputs:
            if o.expression is not None:
                arrays.append(values[o.name])
            else:
                arrays.append(cols[o.source or o.name])
        out = pa.Table.from_arrays(arrays, names=[o.name for o in plan.outputs])
        keep = pa.repeat(pa.scalar(True), n) if mask is None else mask
        index_array = pc.indices_nonzero(keep).cast(pa.int64())
        before = pc.equal(kind_array, "-U")
        after = pc.equal(kind_array, "+U")
        soft = self.converter_after_transform == "SOFT_DELETE"
        if not (pc.any(before).as_py() or pc.any(after).as_py() or soft):
            return TransformedBatch(plan.schema, out.take(index_array), kind_array.take(index_array), index_array)
        kinds = kind_array
        if n:
            false = pa.array([False])
            next_kept = pa.concat_arrays([keep.slice(1), false])
            prev_pair_kept = pa.concat_arrays([false, pc.and_(before, keep).slice(0, n - 1)])
            # an update half whose partner was filtered out: -U alone is a delete, +U alone an insert
            kinds = pc.if_else(pc.and_(pc.and_(before, keep), pc.invert(next_kept)), "-D", kinds)
            kinds = pc.if_else(pc.and_(pc.and_(after, keep), pc.invert(prev_pair_kept)), "+I", kinds)
        if soft:
            kinds = pc.if_else(pc.equal(kinds, "-D"), "+I", kinds)
        return TransformedBatch(plan.schema, out.take(index_array), kinds.take(index_array), index_array)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], *, udfs: Mapping[str, UserDefinedFunction] | None = None,
                     time_zone: str | None = None, max_precision: int = 19) -> "TransformRule":
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
        return cls(
            source_table=str(raw.get("source-table") or ""),
            projection=raw.get("projection"),
            filter=raw.get("filter"),
            primary_keys=raw.get("primary-keys") or (),
            partition_keys=raw.get("partition-keys") or (),
            table_options=raw.get("table-options"),
            description=raw.get("description"),
            converter_after_transform=raw.get("converter-after-transform") or None,
            udfs=dict(udfs or {}),
            time_zone=time_zone,
            max_precision=max_precision,
        )


def append_only(events: Sequence[DataChangeEvent]) -> list[DataChangeEvent]:
    """Flink CDC's ``scan.read-changelog-as-append-only.enabled``: every change becomes an insert —
    an insert or snapshot read stays one, an update becomes two (its before image, then its after
    image), a delete becomes an insert of the deleted row; truncates pass unchanged. Applied after
    the transform, so ``__data_event_type__`` has already recorded each row's original kind."""
    out: list[DataChangeEvent] = []
    for e in events:
        if e.op is Op.UPDATE:
            out.append(DataChangeEvent(e.table, Op.CREATE, None, e.before, e.schema, e.ts_ms, e.position, e.transaction))
            out.append(DataChangeEvent(e.table, Op.CREATE, None, e.after, e.schema, e.ts_ms, e.position, e.transaction))
        elif e.op is Op.DELETE:
            out.append(DataChangeEvent(e.table, Op.CREATE, None, e.before, e.schema, e.ts_ms, e.position, e.transaction))
        else:
            out.append(e)
    return out


def _time_zone(name: str | None, source_table: str) -> _dt.tzinfo:
    """``pipeline.local-time-zone`` as a tzinfo (IANA name, ``UTC`` or an offset like ``+08:00``)."""
    if not name or name.upper() in ("UTC", "Z"):
        return _dt.timezone.utc
    text = name.strip()
    if text[0] in "+-" and ":" in text:
        sign = -1 if text[0] == "-" else 1
        hours, minutes = text[1:].split(":", 1)
        return _dt.timezone(sign * _dt.timedelta(hours=int(hours), minutes=int(minutes)))
    try:
        return zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise TransformError(f"pipeline.local-time-zone {name!r} is not a time zone", source_table=source_table,
                             option="local-time-zone") from None


def parse_transform_rules(raw: Iterable[Mapping[str, Any]], *, pipeline: Mapping[str, str] | None = None,
                          udfs: Sequence[Mapping[str, Any]] | Mapping[str, UserDefinedFunction] | None = None
                          ) -> list[TransformRule]:
    """Parse the YAML ``transform`` list.

    Args:
        pipeline: the ``pipeline`` block: ``local-time-zone`` and ``transform.decimal.precision.mode``
            (``UP_TO_19``, the default, or ``UP_TO_38``) apply to every rule.
        udfs: ``pipeline.user-defined-function`` entries (``name``, ``classpath``), or loaded UDFs.

    Raises:
        TransformError: a bad rule, option or UDF.
    """
    from changelake.changelog.expressions import load_udfs

    options = pipeline or {}
    mode = str(options.get("transform.decimal.precision.mode") or "UP_TO_19").upper()
    if mode not in ("UP_TO_19", "UP_TO_38"):
        raise TransformError(f"Could not parse value '{mode}' for key 'pipeline.transform.decimal.precision.mode'. "
                             "Expected one of: [UP_TO_19, UP_TO_38]", option="transform.decimal.precision.mode")
    loaded: Mapping[str, UserDefinedFunction]
    if udfs is None:
        loaded = {}
    elif isinstance(udfs, Mapping):
        loaded = udfs
    else:
        try:
            loaded = load_udfs(udfs)
        except ExpressionError as exc:
            raise TransformError(str(exc), option="user-defined-function") from exc
    return [TransformRule.from_mapping(r, udfs=loaded, time_zone=options.get("local-time-zone"),
                                       max_precision=38 if mode == "UP_TO_38" else 19) for r in raw]


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

    def apply_events(self, events: Sequence[DataChangeEvent]) -> list[DataChangeEvent | None]:
        """:meth:`apply` for many events, one Arrow evaluation per rule and schema (parallel list)."""
        out: list[DataChangeEvent | None] = list(events)
        by_rule: dict[int, list[int]] = {}
        for i, e in enumerate(events):
            rule = self.rule_for(e.table)
            if rule is not None:
                by_rule.setdefault(id(rule), []).append(i)
        rules = {id(r): r for r in self.rules}
        for rid, idx in by_rule.items():
            results = rules[rid].apply_events([events[i] for i in idx])
            for i, r in zip(idx, results):
                out[i] = r
        return out

    def apply_batch(self, table: TableId, schema: Schema, batch: pa.Table | pa.RecordBatch,
                    row_kinds: Sequence[str] | pa.Array) -> TransformedBatch | None:
        """The columnar path: :meth:`TransformRule.apply_batch` of the rule of ``table``, or None when
        no rule matches (the batch passes unchanged)."""
        rule = self.rule_for(table)
        return None if rule is None else rule.apply_batch(table, schema, batch, row_kinds)

    def apply_schema(self, table_id: TableId, schema: Schema) -> Schema:
        """The schema ``table_id`` has after its transform (unchanged when no rule matches)."""
        rule = self.rule_for(table_id)
        return schema if rule is None else rule.apply_schema(schema)
