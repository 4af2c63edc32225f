"""User-defined functions: Flink CDC's ``pipeline.user-defined-function``, with Python classpaths.

As Flink CDC::

    pipeline:
      user-defined-function:
        - name: addone
          classpath: my_package.udfs.add_one        # a Python dotted path (module.attribute)

The attribute is either

- a **function** called once per row with the arguments' Python values (NULL is ``None``); its
  result type is its ``return_type`` attribute (a Flink SQL type such as ``"INT"``; default
  ``STRING``); or a **vectorised** function (``vectorized = True``, or decorated with
  :func:`vectorized`) called once per batch with one ``pyarrow.Array`` per argument, returning an
  array (or sequence) of the batch's length;
- a **class**, as Flink CDC's ``UserDefinedFunction``: built with no arguments, ``open()`` called
  once if present, ``eval`` called per row, ``get_return_type()`` (or ``return_type``) giving the
  result type.

UDFs can be used in ``projection`` and ``filter`` like built-ins; names are case-insensitive.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypeVar

import pyarrow as pa

from changelake.changelog.expressions.errors import ExpressionError
from changelake.changelog.expressions.types import arrow_type
from changelake.changelog.types import DataType, TypeRoot, parse_data_type

__all__ = ["UserDefinedFunction", "load_udfs", "vectorized"]

F = TypeVar("F", bound=Callable[..., Any])


def vectorized(return_type: str = "STRING") -> Callable[[F], F]:
    """Mark a function as an Arrow-vectorised UDF returning ``return_type`` (a Flink SQL type)."""

    def mark(fn: F) -> F:
        fn.vectorized = True  # type: ignore[attr-defined]
        fn.return_type = return_type  # type: ignore[attr-defined]
        return fn

    return mark


def _type_of(value: Any, where: str) -> DataType:
    if value is None:
        return DataType(TypeRoot.STRING)
    if isinstance(value, DataType):
        return value
    try:
        return parse_data_type(str(value))
    except ValueError as exc:
        raise ExpressionError(f"{where}: return type {value!r} is not a Flink SQL type: {exc}") from None


@dataclass(frozen=True)
class UserDefinedFunction:
    """A loaded UDF.

    Attributes:
        name: the name used in expressions.
        classpath: the dotted path it was loaded from.
        function: the per-row (or, when ``is_vectorized``, per-batch) callable.
        return_type: the result type.
    """

    name: str
    classpath: str
    function: Callable[..., Any]
    return_type: DataType
    is_vectorized: bool = False

    def bind(self, arg_types: Sequence[DataType | None], args: Sequence[Callable[[Any], pa.Array]]) -> Callable[[Any], Any]:
        """The evaluation of a call with these arguments (a function of a Frame)."""
        target = arrow_type(self.return_type)
        fn, name = self.function, self.name

        def run(frame: Any) -> pa.Array:
            arrays = [a(frame) for a in args]
            try:
                if self.is_vectorized:
                    out = fn(*arrays)
                    result = out if isinstance(out, pa.Array) else pa.array(list(out), type=target)
                    if len(result) != frame.length:
                        raise ExpressionError(f"vectorised UDF {name} returned {len(result)} values for {frame.length} rows")
                    return result if result.type == target else result.cast(target)
                columns = [a.to_pylist() for a in arrays]
                values = [fn(*vals) for vals in zip(*columns)] if columns else [fn() for _ in range(frame.length)]
                return pa.array(values, type=target)
            except ExpressionError:
                raise
            except Exception as exc:
                raise ExpressionError(f"UDF {name} ({self.classpath}) failed: {type(exc).__name__}: {exc}") from exc

        return run


def _import(classpath: str) -> Any:
    module_name, sep, attr = classpath.replace(":", ".").rpartition(".")
    if not sep or not module_name:
        raise ExpressionError(f"UDF classpath {classpath!r} must be a dotted path 'package.module.function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ExpressionError(f"UDF classpath {classpath!r}: cannot import module {module_name!r}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ExpressionError(f"UDF classpath {classpath!r}: module {module_name!r} has no attribute {attr!r}") from None


def load_udfs(specs: Sequence[Mapping[str, Any]]) -> dict[str, UserDefinedFunction]:
    """Load ``pipeline.user-defined-function`` entries (``name``, ``classpath``), keyed by lower-case name.

    Raises:
        ExpressionError: a missing key, a duplicate name, an import failure, a class without
            ``eval``, or a return type that is not a Flink SQL type (names the UDF).
    """
    out: dict[str, UserDefinedFunction] = {}
    for i, spec in enumerate(specs):
        name, classpath = str(spec.get("name") or ""), str(spec.get("classpath") or "")
        if not name or not classpath:
            raise ExpressionError(f"pipeline.user-defined-function[{i}] needs 'name' and 'classpath'")
        unknown = sorted(set(spec) - {"name", "classpath"})
        if unknown:
            raise ExpressionError(f"pipeline.user-defined-function[{i}] ({name}): unsupported keys {unknown}")
        if name.lower() in out:
            raise ExpressionError(f"user-defined function {name!r} is registered twice")
        target = _import(classpath)
        where = f"UDF {name} ({classpath})"
        if isinstance(target, type):
            instance = target()
            if not callable(getattr(instance, "eval", None)):
                raise ExpressionError(f"{where}: a UDF class needs an 'eval' method")
            if callable(getattr(instance, "open", None)):
                instance.open()
            rtype = instance.get_return_type() if callable(getattr(instance, "get_return_type", None)) \
                else getattr(instance, "return_type", None)
            fn, vec = instance.eval, bool(getattr(instance, "vectorized", False))
        elif callable(target):
            rtype, fn, vec = getattr(target, "return_type", None), target, bool(getattr(target, "vectorized", False))
        else:
            raise ExpressionError(f"{where} is neither a function nor a class")
        out[name.lower()] = UserDefinedFunction(name, classpath, fn, _type_of(rtype, where), vec)
    return out
