"""Flink CDC's transform expression language, parsed with sqlglot and evaluated on Arrow batches.

As Flink CDC's ``transform`` (``docs/content/docs/core-concept/transform.md``): a ``projection`` is a
SELECT list (``*``, columns, computed columns ``expr AS name``), a ``filter`` a WHERE condition, in
the same language. Expressions are parsed once (:func:`parse_projection`, :func:`parse_filter`),
bound to a table schema (:func:`bind`: names resolved, types derived with Flink CDC's Calcite rules)
and evaluated column-wise with ``pyarrow.compute`` (:meth:`BoundExpression.evaluate`). Nothing is
ever passed to Python's ``eval``.

Modules: :mod:`.parser` (sqlglot -> checked syntax tree), :mod:`.types` (Flink type rules and the
Arrow types of evaluation), :mod:`.compiler` (binding and evaluation, built-in functions),
:mod:`.udf` (``pipeline.user-defined-function``).
"""

from changelake.changelog.expressions.compiler import BoundExpression, Frame, bind
from changelake.changelog.expressions.errors import ExpressionError
from changelake.changelog.expressions.parser import (
    METADATA_COLUMNS,
    ProjectionItem,
    parse_filter,
    parse_projection,
)
from changelake.changelog.expressions.types import arrow_type, to_arrow_array
from changelake.changelog.expressions.udf import UserDefinedFunction, load_udfs, vectorized

__all__ = [
    "BoundExpression",
    "ExpressionError",
    "Frame",
    "METADATA_COLUMNS",
    "ProjectionItem",
    "UserDefinedFunction",
    "arrow_type",
    "bind",
    "load_udfs",
    "parse_filter",
    "parse_projection",
    "to_arrow_array",
    "vectorized",
]
