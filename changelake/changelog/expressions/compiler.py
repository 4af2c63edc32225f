"""Bind parsed expressions to a schema (names, Flink types) and evaluate them on Arrow batches.

:func:`bind` resolves every column against a scope (source columns, metadata columns, and for a
filter the projection's computed columns), derives the result type with Flink CDC's rules
(:mod:`.types`) and returns a :class:`BoundExpression`, whose :meth:`~BoundExpression.evaluate`
computes one Arrow array for a :class:`Frame` (the batch's columns) with ``pyarrow.compute``;
functions without an Arrow kernel with Flink's semantics run per value in Python.

NULL semantics are Flink CDC's: a comparison (``=``, ``<>``, ``<``, ``LIKE``, ``IN``, ``BETWEEN``)
with a NULL operand is FALSE (not NULL); AND/OR/NOT on NULL booleans are three-valued; arithmetic
and functions return NULL when an operand is NULL (COALESCE, IF, CASE and IS [NOT] NULL aside).
Integer arithmetic wraps on overflow and divides as Java does (truncating; ``%`` has the dividend's
sign; division by zero is an error); DECIMAL results that do not fit their type are an error.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from changelake.changelog.expressions.errors import ExpressionError
from changelake.changelog.expressions.parser import NILADIC, FlinkCdcDialect
from changelake.changelog.expressions.types import (
    BIGINT, BOOLEAN, DOUBLE, INT, STRING, arrow_type, decimal_add, decimal_divide, decimal_mod,
    decimal_multiply, exact_digits, is_exact, is_numeric, least_restrictive,
)
from changelake.changelog.expressions.udf import UserDefinedFunction
from changelake.changelog.expressions.values import (
    cast_value, java_date_formatter, java_date_parser,
)
from changelake.changelog.types import DataType, TypeRoot

__all__ = ["Frame", "BoundExpression", "bind"]

Datum = Any  # pa.Array | pa.Scalar
_CTX = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_UP)


@dataclass(frozen=True)
class Frame:
    """The columns one evaluation sees.

    Attributes:
        columns: column name -> Arrow array (each of ``length`` values, in the evaluation type of
            its DataType, :func:`~changelake.changelog.expressions.types.arrow_type`).
        length: the number of rows.
        now: the processing time of the batch (UTC-aware), for NOW()/CURRENT_TIMESTAMP.
        time_zone: the pipeline's ``local-time-zone`` (LOCALTIMESTAMP, CURRENT_DATE, casts between
            TIMESTAMP and TIMESTAMP_LTZ, DATE_FORMAT of a TIMESTAMP_LTZ).
    """

    columns: Mapping[str, pa.Array]
    length: int
    now: _dt.datetime = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc))
    time_zone: _dt.tzinfo = _dt.timezone.utc

    def slice(self, offset: int, length: int) -> "Frame":
        return Frame({k: v.slice(offset, length) for k, v in self.columns.items()}, length, self.now, self.time_zone)


@dataclass(frozen=True)
class _N:
    dtype: DataType | None  # None: the NULL literal
    fn: Callable[[Frame], Datum]
    literal: Any = None
    is_literal: bool = False


@dataclass(frozen=True)
class BoundExpression:
    """An expression bound to a scope: its Flink result type and its evaluation.

    Attributes:
        dtype: the result type (computed columns are nullable).
        text: the expression as written.
    """

    dtype: DataType
    text: str
    _node: _N = field(repr=False)

    def evaluate(self, frame: Frame) -> pa.Array:
        """The expression's values for every row of ``frame`` (an array of ``frame.length``).

        Raises:
            ExpressionError: a row cannot be evaluated (division by zero, a bad CAST, an overflow,
                a UDF error); ``row`` is the index of the first such row in the frame.
        """
        try:
            return self._evaluate(frame)
        except Exception as exc:  # locate the first failing row, then report it
            if isinstance(exc, ExpressionError) and exc.row is not None:
                raise
            row = None
            if frame.length > 1:
                for i in range(frame.length):
                    try:
                        self._evaluate(frame.slice(i, 1))
                    except Exception:
                        row = i
                        break
            elif frame.length == 1:
                row = 0
            message = exc.args[0] if isinstance(exc, ExpressionError) and exc.args else f"{type(exc).__name__}: {exc}"
            raise ExpressionError(f"cannot evaluate {self.text!r}: {message}", expression=self.text, row=row) from exc

    def _evaluate(self, frame: Frame) -> pa.Array:
        target = arrow_type(self.dtype)
        out = _materialise(self._node.fn(frame), frame, target)
        return out if out.type == target else out.cast(target)


def _materialise(d: Datum, frame: Frame, type_: pa.DataType | None = None) -> pa.Array:
    if isinstance(d, pa.ChunkedArray):
        return d.combine_chunks()
    if isinstance(d, pa.Array):
        return d
    value = d.as_py() if isinstance(d, pa.Scalar) else d
    t = type_ if type_ is not None else (d.type if isinstance(d, pa.Scalar) else None)
    if t is None or pa.types.is_null(t):
        t = type_ or pa.string()
    return pa.repeat(pa.scalar(value, type=t), frame.length)


@dataclass(frozen=True)
class _Ctx:
    scope: Mapping[str, DataType]
    udfs: Mapping[str, UserDefinedFunction]
    max_precision: int
    text: str


def bind(node: exp.Expression, scope: Mapping[str, DataType], *, text: str | None = None,
         udfs: Mapping[str, UserDefinedFunction] | None = None, max_precision: int = 19) -> BoundExpression:
    """Bind ``node`` (from :func:`~changelake.changelog.expressions.parse_projection` or
    ``parse_filter``) to the columns of ``scope`` (name -> type).

    Args:
        udfs: user-defined functions by lower-case name.
        max_precision: the largest DECIMAL precision (``transform.decimal.precision.mode``: 19 or 38).

    Raises:
        ExpressionError: an unknown column or function, a wrong argument count or type, operands
            with no common type (names the expression).
    """
    ctx = _Ctx(scope, {k.lower(): v for k, v in (udfs or {}).items()}, max_precision, text or node.sql(dialect=FlinkCdcDialect))
    try:
        n = _compile(node, ctx)
    except ExpressionError as exc:
        if exc.expression is None:
            raise ExpressionError(f"{exc.args[0]} (in {ctx.text!r})", expression=ctx.text) from None
        raise
    dtype = (n.dtype or STRING).with_nullable(True)
    return BoundExpression(dtype, ctx.text, n)


# -- helpers -----------------------------------------------------------------------------------------

def _lit(value: Any, dtype: DataType | None) -> _N:
    t = arrow_type(dtype) if dtype is not None else pa.null()
    scalar = pa.scalar(value, type=t)
    return _N(dtype, lambda f: scalar, value, True)


def _arr(n: _N, f: Frame) -> pa.Array:
    return _materialise(n.fn(f), f, arrow_type(n.dtype) if n.dtype is not None else pa.null())


def _rowwise(fn: Callable[..., Any], args: Sequence[_N], out: DataType, *, nulls: bool = True) -> Callable[[Frame], Datum]:
    """Evaluate ``fn`` per row on Python values; with ``nulls`` a NULL argument gives NULL."""
    target = arrow_type(out)

    def run(f: Frame) -> Datum:
        columns = [_arr(a, f).to_pylist() for a in args]
        if not columns:
            return pa.array([fn() for _ in range(f.length)], type=target)
        result = [None if nulls and any(v is None for v in vals) else fn(*vals) for vals in zip(*columns)]
        return pa.array(result, type=target)

    return run


def _cast(n: _N, dst: DataType, ctx: _Ctx, tz_holder: list[Any] | None = None) -> _N:
    """CAST ``n`` to ``dst`` (Flink CDC's conversion table, :func:`cast_value`)."""
    src = n.dtype
    if src is None:
        return _lit(None, dst)
    if src == dst or (src.root == dst.root and src.with_nullable(True) == dst.with_nullable(True)):
        return n
    target = arrow_type(dst)
    if src.is_string and dst.is_string:
        return _N(dst, n.fn)
    widening = (src.is_integer and (dst.is_integer and arrow_type(dst).bit_width >= arrow_type(src).bit_width
                                    or dst.root in (TypeRoot.DOUBLE, TypeRoot.FLOAT)))
    if widening or (is_exact(src) and dst.root is TypeRoot.DECIMAL and _fits(src, dst)):
        return _N(dst, lambda f: pc.cast(n.fn(f), target))
    if src.root is TypeRoot.DECIMAL and dst.root is TypeRoot.DOUBLE or src.root is TypeRoot.FLOAT and dst.root is TypeRoot.DOUBLE:
        return _N(dst, lambda f: pc.cast(n.fn(f), target))
    if src.is_integer and dst.is_string:
        return _N(dst, lambda f: pc.cast(n.fn(f), pa.string()))

    def run(f: Frame) -> Datum:
        values = _arr(n, f).to_pylist()
        tz = f.time_zone
        out: list[Any] = []
        for v in values:
            if v is None:
                out.append(None)
                continue
            try:
                out.append(cast_value(v, src, dst, tz))
            except (ValueError, ArithmeticError, OverflowError) as exc:
                raise ValueError(f"cannot CAST {v!r} AS {dst}: {exc}") from None
        return pa.array(out, type=target)

    _check_cast_path(src, dst)
    return _N(dst, run)


def _check_cast_path(src: DataType, dst: DataType) -> None:
    ok = (dst.is_string
          or (dst.root is TypeRoot.BOOLEAN and (is_numeric(src) or src.is_string or src.root is TypeRoot.BOOLEAN))
          or (is_numeric(dst) and (is_numeric(src) or src.is_string or src.root is TypeRoot.BOOLEAN))
          or (dst.root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ, TypeRoot.DATE)
              and (src.is_string or src.root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ, TypeRoot.DATE)))
          or (dst.root is TypeRoot.TIME and (src.is_string or src.root in (TypeRoot.TIME, TypeRoot.TIMESTAMP)))
          or (dst.is_binary and (src.is_string or src.is_binary)))
    if not ok:
        raise ExpressionError(f"cannot CAST {src} AS {dst}")


def _fits(src: DataType, dst: DataType) -> bool:
    p1, s1 = exact_digits(src)
    p2, s2 = dst.precision or 10, dst.scale or 0
    return s2 >= s1 and p2 - s2 >= p1 - s1


def _data_type(node: exp.DataType) -> DataType:
    """A CAST target as a changelake DataType (Flink names: STRING, VARCHAR(n), DECIMAL(p, s), ...)."""
    name = node.this.name if hasattr(node.this, "name") else str(node.this)
    params = [int(p.this.name) for p in node.expressions if isinstance(p, exp.DataTypeParam)]
    name = name.upper()
    simple = {
        "BOOLEAN": TypeRoot.BOOLEAN, "TINYINT": TypeRoot.TINYINT, "SMALLINT": TypeRoot.SMALLINT,
        "INT": TypeRoot.INT, "BIGINT": TypeRoot.BIGINT, "FLOAT": TypeRoot.FLOAT, "DOUBLE": TypeRoot.DOUBLE,
        "TEXT": TypeRoot.STRING, "DATE": TypeRoot.DATE, "VARBINARY": TypeRoot.BYTES, "BINARY": TypeRoot.BYTES,
    }
    if name in simple:
        return DataType(simple[name])
    if name in ("VARCHAR", "CHAR", "NVARCHAR", "NCHAR"):
        return DataType(TypeRoot.VARCHAR, length=params[0]) if params else STRING
    if name == "DECIMAL":
        return DataType.decimal(params[0] if params else 10, params[1] if len(params) > 1 else 0)
    if name in ("TIMESTAMP", "DATETIME"):
        return DataType(TypeRoot.TIMESTAMP, precision=params[0] if params else 6)
    if name in ("TIMESTAMPLTZ", "TIMESTAMPTZ"):
        return DataType(TypeRoot.TIMESTAMP_LTZ, precision=params[0] if params else 6)
    if name == "TIME":
        return DataType(TypeRoot.TIME, precision=params[0] if params else 0)
    raise ExpressionError(f"CAST target type {node.sql()!r} is not supported")


# -- comparison --------------------------------------------------------------------------------------

def _coerce_pair(a: _N, b: _N, what: str, ctx: _Ctx) -> tuple[_N, _N]:
    ta, tb = a.dtype, b.dtype
    assert ta is not None and tb is not None
    if is_numeric(ta) and is_numeric(tb):
        common = least_restrictive([ta, tb], what)
        return _cast(a, common, ctx), _cast(b, common, ctx)
    if ta.is_string and tb.is_string or ta.is_binary and tb.is_binary or ta.root is tb.root is TypeRoot.BOOLEAN:
        return a, b
    if ta.is_string and not tb.is_string:
        return _cast(a, tb, ctx), b
    if tb.is_string and not ta.is_string:
        return a, _cast(b, ta, ctx)
    if ta.is_temporal and tb.is_temporal:
        if ta.root is tb.root:
            return a, b
        if TypeRoot.TIMESTAMP_LTZ in (ta.root, tb.root):
            ltz = DataType(TypeRoot.TIMESTAMP_LTZ, precision=6)
            return _cast(a, ltz, ctx), _cast(b, ltz, ctx)
        ts = DataType(TypeRoot.TIMESTAMP, precision=6)
        return _cast(a, ts, ctx), _cast(b, ts, ctx)
    raise ExpressionError(f"{what}: cannot compare {ta} with {tb}")


_CMP: dict[type[exp.Expression], Callable[..., Any]] = {exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.GT: pc.greater, exp.GTE: pc.greater_equal,
        exp.LT: pc.less, exp.LTE: pc.less_equal}
_FALSE = pa.scalar(False)


def _compare_raw(kind: type[exp.Expression], a: _N, b: _N, ctx: _Ctx) -> Callable[[Frame], Datum]:
    """A nullable boolean (NULL where an operand is NULL)."""
    if a.dtype is None or b.dtype is None:
        return lambda f: pa.scalar(None, pa.bool_())
    a, b = _coerce_pair(a, b, f"'{kind.__name__}'", ctx)
    op = _CMP[kind]
    return lambda f: op(a.fn(f), b.fn(f))


def _predicate_raw(node: exp.Expression, ctx: _Ctx) -> Callable[[Frame], Datum] | None:
    """The nullable result of a comparison-like predicate, or None when ``node`` is not one."""
    if type(node) in _CMP:
        return _compare_raw(type(node), _compile(node.this, ctx), _compile(node.expression, ctx), ctx)
    if isinstance(node, exp.Like):
        subject = _compile(node.this, ctx)
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise ExpressionError("LIKE needs a string literal pattern")
        if subject.dtype is not None and not subject.dtype.is_string:
            subject = _cast(subject, STRING, ctx)
        text = pattern.this
        def like(f: Frame) -> Datum:
            return pc.match_like(subject.fn(f), text)
        return (lambda f: pc.invert(like(f))) if node.args.get("negate") else like
    if isinstance(node, exp.In):
        subject = _compile(node.this, ctx)
        items = [_compile(e, ctx) for e in node.expressions]
        if subject.dtype is None:
            return lambda f: pa.scalar(None, pa.bool_())
        if items and all(i.is_literal for i in items):
            common = least_restrictive([subject.dtype, *[i.dtype for i in items]], "IN")
            if subject.dtype.is_string and not all(i.dtype is None or i.dtype.is_string for i in items):
                common = subject.dtype
            s2 = _cast(subject, common, ctx) if is_numeric(common) else subject
            values = [cast_value(i.literal, i.dtype, common, _dt.timezone.utc) if i.dtype is not None and i.dtype != common
                      else i.literal for i in items]
            value_set = pa.array([v for v in values if v is not None], type=arrow_type(s2.dtype or common))

            def run_in(f: Frame) -> Datum:
                arr = _arr(s2, f)
                hit = pc.is_in(arr, value_set=value_set)
                return pc.if_else(pc.is_null(arr), pa.scalar(None, pa.bool_()), hit)

            return run_in
        raws = [_compare_raw(exp.EQ, subject, i, ctx) for i in items]

        def run_or(f: Frame) -> Datum:
            acc: Datum = _FALSE
            for r in raws:
                acc = pc.or_kleene(acc, r(f))
            return acc

        return run_or
    if isinstance(node, exp.Between):
        subject = _compile(node.this, ctx)
        low = _compare_raw(exp.GTE, subject, _compile(node.args["low"], ctx), ctx)
        high = _compare_raw(exp.LTE, subject, _compile(node.args["high"], ctx), ctx)
        return lambda f: pc.and_kleene(low(f), high(f))
    return None


def _boolean(n: _N, what: str) -> _N:
    if n.dtype is not None and n.dtype.root is not TypeRoot.BOOLEAN:
        raise ExpressionError(f"{what} needs a BOOLEAN operand, got {n.dtype}")
    return n


def _not_null(raw: Callable[[Frame], Datum]) -> Callable[[Frame], Datum]:
    return lambda f: pc.fill_null(raw(f), False)


# -- arithmetic --------------------------------------------------------------------------------------

def _arith(kind: str, a: _N, b: _N, ctx: _Ctx) -> _N:
    ta, tb = a.dtype, b.dtype
    if ta is None or tb is None:
        t = ta or tb or INT
        return _lit(None, t)
    if not (is_numeric(ta) and is_numeric(tb)):
        raise ExpressionError(f"'{kind}' needs numeric operands, got {ta} and {tb}")
    if ta.root in (TypeRoot.FLOAT, TypeRoot.DOUBLE) or tb.root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        out = least_restrictive([ta, tb], kind)
        a2, b2 = _cast(a, out, ctx), _cast(b, out, ctx)
        return _N(out, _float_op(kind, a2, b2))
    if ta.is_integer and tb.is_integer:
        out = least_restrictive([ta, tb], kind)
        if kind == "%":
            out = tb  # Calcite: MOD of integers has the divisor's type
        wide = least_restrictive([ta, tb], kind)
        a2, b2 = _cast(a, wide, ctx), _cast(b, wide, ctx)
        return _N(out, _int_op(kind, a2, b2, arrow_type(out)))
    rule = {"+": decimal_add, "-": decimal_add, "*": decimal_multiply, "/": decimal_divide, "%": decimal_mod}[kind]
    out = rule(ta, tb, ctx.max_precision)
    return _N(out, _decimal_op(kind, a, b, out))


def _float_op(kind: str, a: _N, b: _N) -> Callable[[Frame], Datum]:
    if kind == "%":
        def fmod(f: Frame) -> Datum:
            x, y = a.fn(f), b.fn(f)
            return pc.subtract(x, pc.multiply(pc.trunc(pc.divide(x, y)), y))
        return fmod
    op = {"+": pc.add, "-": pc.subtract, "*": pc.multiply, "/": pc.divide}[kind]
    return lambda f: op(a.fn(f), b.fn(f))


def _int_op(kind: str, a: _N, b: _N, out: pa.DataType) -> Callable[[Frame], Datum]:
    def run(f: Frame) -> Datum:
        x, y = a.fn(f), b.fn(f)
        if kind in ("/", "%"):
            zero = pc.equal(y, 0)
            if pc.any(zero).as_py():
                raise ExpressionError("division by zero")
            q = pc.divide(x, y)  # truncates toward zero, as Java
            r = q if kind == "/" else pc.subtract(x, pc.multiply(q, y))
        else:
            r = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}[kind](x, y)  # wraps, as Java
        return pc.cast(r, out, safe=False)
    return run


def _to_decimal(values: Datum, out: DataType) -> Datum:
    target = arrow_type(out)
    t = values.type
    if pa.types.is_decimal(t) and t.scale > (out.scale or 0):
        values = pc.round(values, ndigits=out.scale or 0, round_mode="half_towards_infinity")
    try:
        return pc.cast(values, target)
    except pa.ArrowInvalid as exc:
        raise ExpressionError(f"a value does not fit {out}: {exc}") from None


def _decimal_op(kind: str, a: _N, b: _N, out: DataType) -> Callable[[Frame], Datum]:
    ta, tb = a.dtype, b.dtype
    assert ta is not None and tb is not None
    da = DataType.decimal(*exact_digits(ta))
    db = DataType.decimal(*exact_digits(tb))
    quantum = decimal.Decimal(1).scaleb(-(out.scale or 0))

    if kind in ("/", "%"):
        def py(x: decimal.Decimal, y: decimal.Decimal) -> decimal.Decimal:
            if y == 0:
                raise ExpressionError("division by zero")
            r = _CTX.divide(decimal.Decimal(x), decimal.Decimal(y)) if kind == "/" else _CTX.remainder(
                decimal.Decimal(x), decimal.Decimal(y))
            q = r.quantize(quantum, context=_CTX)
            if len(q.as_tuple().digits) > (out.precision or 10) and q != 0:
                raise ExpressionError(f"{q} does not fit {out}")
            return q
        return _rowwise(py, [a, b], out)

    op = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}[kind]

    def run(f: Frame) -> Datum:
        x = pc.cast(a.fn(f), arrow_type(da))
        y = pc.cast(b.fn(f), arrow_type(db))
        return _to_decimal(op(x, y), out)
    return run


# -- the compiler ------------------------------------------------------------------------------------

def _compile(node: exp.Expression, ctx: _Ctx) -> _N:
    if isinstance(node, exp.Paren):
        return _compile(node.this, ctx)
    if isinstance(node, exp.Column):
        return _column(node, ctx)
    if isinstance(node, exp.Literal):
        return _literal(node)
    if isinstance(node, exp.Boolean):
        return _lit(bool(node.this), BOOLEAN)
    if isinstance(node, exp.Null):
        return _lit(None, None)
    if isinstance(node, exp.Neg):
        inner = _compile(node.this, ctx)
        if inner.is_literal and inner.dtype is not None and is_numeric(inner.dtype):
            return _literal_value(-inner.literal)
        if not is_numeric(inner.dtype):
            raise ExpressionError(f"unary '-' needs a numeric operand, got {inner.dtype}")
        return _N(inner.dtype, lambda f: pc.negate(inner.fn(f)))
    if isinstance(node, exp.Not):
        inner_raw = _predicate_raw(node.this, ctx)
        if inner_raw is not None:
            return _N(BOOLEAN, _not_null(lambda f: pc.invert(inner_raw(f))))
        if isinstance(node.this, exp.Is):
            base = _compile(node.this, ctx)
            return _N(BOOLEAN, lambda f: pc.invert(base.fn(f)))
        inner = _boolean(_compile(node.this, ctx), "NOT")
        return _N(BOOLEAN, lambda f: pc.invert(inner.fn(f)))
    if isinstance(node, (exp.And, exp.Or)):
        left = _boolean(_compile(node.this, ctx), node.key.upper())
        right = _boolean(_compile(node.expression, ctx), node.key.upper())
        op = pc.and_kleene if isinstance(node, exp.And) else pc.or_kleene
        return _N(BOOLEAN, lambda f: op(left.fn(f), right.fn(f)))
    raw = _predicate_raw(node, ctx)
    if raw is not None:
        return _N(BOOLEAN, _not_null(raw))
    if isinstance(node, exp.Is):
        subject = _compile(node.this, ctx)
        target = node.expression
        if isinstance(target, exp.Null):
            return _N(BOOLEAN, lambda f: pc.is_null(_arr(subject, f)))
        if isinstance(target, exp.Boolean):
            want = bool(target.this)
            _boolean(subject, "IS TRUE/FALSE")
            return _N(BOOLEAN, lambda f: pc.fill_null(pc.equal(subject.fn(f), want), False))
        raise ExpressionError(f"IS {target.sql()} is not supported")
    for kind, cls in (("+", exp.Add), ("-", exp.Sub), ("*", exp.Mul), ("/", exp.Div), ("%", exp.Mod)):
        if isinstance(node, cls):
            return _arith(kind, _compile(node.this, ctx), _compile(node.expression, ctx), ctx)
    if isinstance(node, exp.DPipe):
        return _concat([_compile(node.this, ctx), _compile(node.expression, ctx)], ctx, pipes=True)
    if isinstance(node, exp.Case):
        return _case(node, ctx)
    if isinstance(node, exp.If):
        return _if(_compile(node.this, ctx), _compile(node.args["true"], ctx),
                   _compile(node.args["false"], ctx) if node.args.get("false") else _lit(None, None), ctx)
    if isinstance(node, exp.Cast):
        inner = _compile(node.this, ctx)
        return _cast(inner, _data_type(node.args["to"]), ctx)
    if isinstance(node, exp.Substring):
        args = [node.this, node.args.get("start"), node.args.get("length")]
        return _function("SUBSTRING", [_compile(a, ctx) for a in args if a is not None], ctx)
    if isinstance(node, exp.Trim):
        return _trim(node, ctx)
    if isinstance(node, exp.CurrentTimestamp):
        return _function("CURRENT_TIMESTAMP", [], ctx)
    if isinstance(node, exp.CurrentDate):
        return _function("CURRENT_DATE", [], ctx)
    if isinstance(node, exp.CurrentTime):
        return _function("CURRENT_TIME", [], ctx)
    if isinstance(node, (exp.Ceil, exp.Floor)):
        return _function(type(node).__name__.upper(), [_compile(node.this, ctx)], ctx)
    if isinstance(node, exp.Anonymous):
        return _function(str(node.name), [_compile(a, ctx) for a in node.expressions], ctx)
    raise ExpressionError(f"{type(node).__name__.upper()} is not supported")


def _column(node: exp.Column, ctx: _Ctx) -> _N:
    name = str(node.name)
    ident = node.this
    quoted = bool(getattr(ident, "quoted", False))
    if name in ctx.scope:
        dtype = ctx.scope[name]
        return _N(dtype, lambda f: f.columns[name])
    if not quoted and name.upper() in NILADIC:
        return _function(name.upper(), [], ctx)
    raise ExpressionError(f"unknown column {name!r}; columns are {list(ctx.scope)}")


def _literal_value(v: Any) -> _N:
    if isinstance(v, bool):
        return _lit(v, BOOLEAN)
    if isinstance(v, int):
        return _lit(v, INT if -(2**31) <= v < 2**31 else BIGINT if -(2**63) <= v < 2**63
                    else DataType.decimal(len(str(abs(v))), 0))
    if isinstance(v, float):
        return _lit(v, DOUBLE)
    if isinstance(v, decimal.Decimal):
        _, digits, e = v.as_tuple()
        scale = max(0, -e) if isinstance(e, int) else 0
        return _lit(v, DataType.decimal(max(len(digits), scale, 1), scale))
    return _lit(v, DataType(TypeRoot.CHAR, length=len(v)) if v else STRING)


def _literal(node: exp.Literal) -> _N:
    text = str(node.this)
    if node.is_string:
        return _literal_value(text)
    if re.fullmatch(r"\d+", text):
        return _literal_value(int(text))
    if "e" in text.lower():
        return _literal_value(float(text))
    return _literal_value(decimal.Decimal(text))


def _common_cast(nodes: Sequence[_N], what: str, ctx: _Ctx) -> tuple[DataType, list[_N]]:
    out = least_restrictive([n.dtype for n in nodes], what)
    return out, [_cast(n, out, ctx) for n in nodes]


def _case(node: exp.Case, ctx: _Ctx) -> _N:
    operand = _compile(node.this, ctx) if node.this is not None else None
    conds: list[Callable[[Frame], Datum]] = []
    results: list[_N] = []
    for branch in node.args.get("ifs") or []:
        if operand is not None:
            conds.append(_not_null(_compare_raw(exp.EQ, operand, _compile(branch.this, ctx), ctx)))
        else:
            c = _boolean(_compile(branch.this, ctx), "CASE WHEN")
            conds.append(_not_null(c.fn))
        results.append(_compile(branch.args["true"], ctx))
    default = _compile(node.args["default"], ctx) if node.args.get("default") is not None else _lit(None, None)
    out, cast = _common_cast([*results, default], "CASE", ctx)
    target = arrow_type(out)

    def run(f: Frame) -> Datum:
        struct = pa.StructArray.from_arrays([_materialise(c(f), f, pa.bool_()) for c in conds],
                                            names=[f"c{i}" for i in range(len(conds))])
        values = [_materialise(r.fn(f), f, target) for r in cast]
        return pc.case_when(struct, *values)

    return _N(out, run)


def _if(cond: _N, a: _N, b: _N, ctx: _Ctx) -> _N:
    _boolean(cond, "IF")
    out, (a2, b2) = _common_cast([a, b], "IF", ctx)
    target = arrow_type(out)
    return _N(out, lambda f: pc.if_else(pc.fill_null(_arr(cond, f), False), _materialise(a2.fn(f), f, target),
                                        _materialise(b2.fn(f), f, target)))


def _concat(args: Sequence[_N], ctx: _Ctx, pipes: bool = False) -> _N:
    parts = [a if a.dtype is None or a.dtype.is_string else _cast(a, STRING, ctx) for a in args]
    lengths = [a.dtype.length if a.dtype is not None and a.dtype.root is not TypeRoot.STRING else None for a in parts]
    out = (DataType(TypeRoot.VARCHAR, length=sum(n for n in lengths if n is not None))
           if pipes and all(n is not None for n in lengths) else STRING)
    return _N(out, lambda f: pc.binary_join_element_wise(*[_arr(p, f) if p.dtype is not None
                                                            else pa.nulls(f.length, pa.string()) for p in parts], ""))


def _trim(node: exp.Trim, ctx: _Ctx) -> _N:
    subject = _string_arg(_compile(node.this, ctx), "TRIM", ctx)
    chars_node = node.args.get("expression")
    chars = " "
    if chars_node is not None:
        if not (isinstance(chars_node, exp.Literal) and chars_node.is_string):
            raise ExpressionError("TRIM characters must be a string literal")
        chars = str(chars_node.this)
    position = str(node.args.get("position") or "BOTH").upper()
    op = {"BOTH": pc.utf8_trim, "LEADING": pc.utf8_ltrim, "TRAILING": pc.utf8_rtrim}[position]
    return _N(subject.dtype, lambda f: op(_arr(subject, f), characters=chars))


def _string_arg(n: _N, fname: str, ctx: _Ctx) -> _N:
    if n.dtype is None or n.dtype.is_string:
        return n if n.dtype is not None else _lit(None, STRING)
    raise ExpressionError(f"{fname} needs a string argument, got {n.dtype}")


def _arity(fname: str, args: Sequence[_N], *counts: int) -> None:
    if len(args) not in counts:
        want = " or ".join(str(c) for c in counts)
        raise ExpressionError(f"{fname} takes {want} argument(s), got {len(args)}")


def _int_literal(n: _N, fname: str) -> int:
    if not (n.is_literal and isinstance(n.literal, int)):
        raise ExpressionError(f"{fname}: the number of digits must be an integer literal")
    return int(n.literal)


def _substring(s: str, begin: int, length: int | None = None) -> str:
    """Flink CDC's ``substring``: 1-based; a negative start counts from the end; 0 is the start."""
    if length is not None and length < 0:
        raise ValueError(f"length of SUBSTR must be >= 0, but is {length}")
    if not s:
        return ""
    if begin > 0:
        start = begin - 1
        if start >= len(s):
            return ""
    elif begin < 0:
        start = len(s) + begin
        if start < 0:
            return ""
    else:
        start = 0
    end = len(s) if length is None or len(s) - start < length else start + length
    return s[start:end]


def _round_decimal(v: decimal.Decimal, digits: int) -> decimal.Decimal:
    return decimal.Decimal(v).quantize(decimal.Decimal(1).scaleb(-digits), context=_CTX)


def _function(name: str, args: list[_N], ctx: _Ctx) -> _N:  # noqa: C901 (one table of built-ins)
    fname = name.upper()
    udf = ctx.udfs.get(name.lower())
    if udf is not None:
        getters: list[Callable[[Any], pa.Array]] = [(lambda f, a=a: _arr(a, f)) for a in args]  # type: ignore[misc]
        return _N(udf.return_type, udf.bind([a.dtype for a in args], getters))
    if fname in ("UPPER", "LOWER"):
        _arity(fname, args, 1)
        s = _string_arg(args[0], fname, ctx)
        op = pc.utf8_upper if fname == "UPPER" else pc.utf8_lower
        return _N(s.dtype, lambda f: op(_arr(s, f)))
    if fname in ("CHAR_LENGTH", "CHARACTER_LENGTH"):
        _arity(fname, args, 1)
        s = _string_arg(args[0], fname, ctx)
        return _N(INT, lambda f: pc.cast(pc.utf8_length(_arr(s, f)), pa.int32()))
    if fname == "CONCAT":
        if not args:
            raise ExpressionError("CONCAT takes at least one argument")
        return _concat(args, ctx)
    if fname in ("SUBSTR", "SUBSTRING"):
        _arity(fname, args, 2, 3)
        s = _string_arg(args[0], fname, ctx)
        for a in args[1:]:
            if a.dtype is not None and not a.dtype.is_integer:
                raise ExpressionError(f"{fname} needs integer positions, got {a.dtype}")
        assert s.dtype is not None
        out = DataType(TypeRoot.VARCHAR, length=s.dtype.length) if s.dtype.root is not TypeRoot.STRING else STRING
        return _N(out, _rowwise(_substring, [s, *args[1:]], out))
    if fname == "REGEXP_REPLACE":
        _arity(fname, args, 3)
        s = _string_arg(args[0], fname, ctx)
        pattern, repl = args[1], args[2]
        if not (pattern.is_literal and repl.is_literal):
            raise ExpressionError("REGEXP_REPLACE needs literal pattern and replacement")
        try:
            regex = re.compile(str(pattern.literal))
        except re.error as exc:
            raise ExpressionError(f"REGEXP_REPLACE pattern {pattern.literal!r} is not a valid regular expression: {exc}") from None
        replacement = str(repl.literal)
        return _N(STRING, _rowwise(lambda v: regex.sub(lambda m: replacement, v), [s], STRING))
    if fname == "TRIM":
        _arity(fname, args, 1)
        s = _string_arg(args[0], fname, ctx)
        return _N(s.dtype, lambda f: pc.utf8_trim(_arr(s, f), characters=" "))
    if fname in ("NOW", "CURRENT_TIMESTAMP"):
        _arity(fname, args, 0)
        ltz = DataType(TypeRoot.TIMESTAMP_LTZ, precision=3)
        return _N(ltz, lambda f: pa.scalar(_ms(f.now), arrow_type(ltz)))
    if fname == "LOCALTIMESTAMP":
        ts = DataType(TypeRoot.TIMESTAMP, precision=3)
        return _N(ts, lambda f: pa.scalar(_ms(f.now.astimezone(f.time_zone).replace(tzinfo=None)), arrow_type(ts)))
    if fname == "CURRENT_DATE":
        d = DataType(TypeRoot.DATE)
        return _N(d, lambda f: pa.scalar(f.now.astimezone(f.time_zone).date(), pa.date32()))
    if fname in ("CURRENT_TIME", "LOCALTIME"):
        t = DataType(TypeRoot.TIME, precision=0)

        def time_now(f: Frame) -> Datum:
            local = f.now.astimezone(f.time_zone)
            return pa.scalar(_dt.timedelta(hours=local.hour, minutes=local.minute, seconds=local.second), pa.duration("us"))
        return _N(t, time_now)
    if fname == "DATE_FORMAT":
        _arity(fname, args, 2)
        value, pattern = args
        if not pattern.is_literal:
            raise ExpressionError("DATE_FORMAT needs a literal format")
        formatter = java_date_formatter(str(pattern.literal))
        src = value.dtype

        def fmt(f: Frame) -> Datum:
            out: list[str | None] = []
            for v in _arr(value, f).to_pylist():
                if v is None:
                    out.append(None)
                    continue
                if isinstance(v, str):
                    v = _dt.datetime.fromisoformat(v.strip())
                if isinstance(v, _dt.datetime) and v.tzinfo is not None:
                    v = v.astimezone(f.time_zone)
                elif isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
                    v = _dt.datetime(v.year, v.month, v.day)
                out.append(formatter(v))
            return pa.array(out, type=pa.string())
        if src is not None and not (src.is_string or src.is_temporal):
            raise ExpressionError(f"DATE_FORMAT needs a TIMESTAMP, DATE or STRING, got {src}")
        return _N(STRING, fmt)
    if fname in ("TO_TIMESTAMP", "TO_DATE"):
        _arity(fname, args, 1, 2)
        s = _string_arg(args[0], fname, ctx)
        default = "yyyy-MM-dd HH:mm:ss" if fname == "TO_TIMESTAMP" else "yyyy-MM-dd"
        if len(args) == 2 and not args[1].is_literal:
            raise ExpressionError(f"{fname} needs a literal format")
        parse = java_date_parser(str(args[1].literal) if len(args) == 2 else default)
        out = DataType(TypeRoot.TIMESTAMP, precision=3) if fname == "TO_TIMESTAMP" else DataType(TypeRoot.DATE)

        def to_ts(v: str) -> Any:
            try:
                parsed = parse(v)
            except ValueError:
                return None  # as Flink: text that does not match the format gives NULL
            return _ms(parsed) if fname == "TO_TIMESTAMP" else parsed.date()
        return _N(out, _rowwise(to_ts, [s], out))
    if fname == "ABS":
        _arity(fname, args, 1)
        x = args[0]
        if not is_numeric(x.dtype):
            raise ExpressionError(f"ABS needs a numeric argument, got {x.dtype}")
        return _N(x.dtype, lambda f: pc.abs(x.fn(f)))
    if fname in ("CEIL", "CEILING", "FLOOR"):
        _arity(fname, args, 1)
        x = args[0]
        if not is_numeric(x.dtype):
            raise ExpressionError(f"{fname} needs a numeric argument, got {x.dtype}")
        assert x.dtype is not None
        if x.dtype.is_integer:
            return x
        op = pc.floor if fname == "FLOOR" else pc.ceil
        if x.dtype.root is TypeRoot.DECIMAL:
            out = DataType.decimal(x.dtype.precision or 10, 0)
            return _N(out, lambda f: _to_decimal(op(x.fn(f)), out))
        return _N(x.dtype, lambda f: op(x.fn(f)))
    if fname == "ROUND":
        _arity(fname, args, 1, 2)
        x = args[0]
        digits = _int_literal(args[1], fname) if len(args) == 2 else 0
        if not is_numeric(x.dtype):
            raise ExpressionError(f"ROUND needs a numeric argument, got {x.dtype}")
        assert x.dtype is not None
        if x.dtype.root is TypeRoot.DECIMAL:
            prec, sc = x.dtype.precision or 10, x.dtype.scale or 0
            rounded = x.dtype if digits >= sc else (DataType.decimal(min(38, 1 + prec - sc), 0) if digits < 0
                                                    else DataType.decimal(1 + prec - sc + digits, digits))
            scale = rounded.scale or 0
            return _N(rounded, _rowwise(lambda v: _round_decimal(_round_decimal(v, digits), scale), [x], rounded))
        if x.dtype.is_integer:
            if digits >= 0:
                return x
            return _N(x.dtype, _rowwise(lambda v: int(_round_decimal(decimal.Decimal(v), digits)), [x], x.dtype))
        return _N(x.dtype, _rowwise(lambda v: v if v != v or v in (float("inf"), float("-inf"))
                                    else float(_round_decimal(decimal.Decimal(repr(v)), digits)), [x], x.dtype))
    if fname == "MOD":
        _arity(fname, args, 2)
        return _arith("%", args[0], args[1], ctx)
    if fname == "COALESCE":
        if not args:
            raise ExpressionError("COALESCE takes at least one argument")
        out, cast = _common_cast(args, "COALESCE", ctx)
        target = arrow_type(out)
        return _N(out, lambda f: pc.coalesce(*[_materialise(c.fn(f), f, target) for c in cast]))
    if fname == "IF":
        _arity(fname, args, 3)
        return _if(args[0], args[1], args[2], ctx)
    if fname == "NULLIF":
        _arity(fname, args, 2)
        a, b = args
        same = _not_null(_compare_raw(exp.EQ, a, b, ctx))
        out = a.dtype or STRING
        target = arrow_type(out)
        return _N(out, lambda f: pc.if_else(_materialise(same(f), f, pa.bool_()), pa.scalar(None, target),
                                            _materialise(a.fn(f), f, target)))
    known = ", ".join(sorted(_BUILT_INS))
    raise ExpressionError(f"unknown function {name}(); built-ins are {known}"
                          + (f"; user-defined functions are {sorted(ctx.udfs)}" if ctx.udfs else
                             "; user-defined functions are registered in pipeline.user-defined-function"))


def _ms(v: _dt.datetime) -> _dt.datetime:
    return v.replace(microsecond=v.microsecond - v.microsecond % 1000)


_BUILT_INS = (
    "ABS", "CEIL", "CHAR_LENGTH", "COALESCE", "CONCAT", "CURRENT_DATE", "CURRENT_TIME", "CURRENT_TIMESTAMP",
    "DATE_FORMAT", "FLOOR", "IF", "LOCALTIME", "LOCALTIMESTAMP", "LOWER", "MOD", "NOW", "NULLIF",
    "REGEXP_REPLACE", "ROUND", "SUBSTR", "SUBSTRING", "TO_DATE", "TO_TIMESTAMP", "TRIM", "UPPER",
)
