"""Retract-aware grouped aggregation over a changelog, as Flink's ``GroupAggFunction``.

Input rows of all four kinds are accepted: ``+I``/``+U`` accumulate, ``-U``/``-D`` retract. The
output is a **retract** changelog keyed by the group-by columns:

====================================  ================================================
situation                             emitted
====================================  ================================================
first row of a group                  ``+I(new)``
the aggregate values changed          ``-U(old)`` then ``+U(new)``
the aggregate values did not change   nothing
the group's row count fell to 0       ``-D(old)`` and the group's state is cleared
retraction for a group with no state  nothing (as Flink: no accumulator is created)
====================================  ================================================

MIN, MAX and every DISTINCT aggregate keep a per-group multiset of values (value -> count), so
retracting the current MIN or a distinct user's last row is exact, as Flink's
``MinWithRetractAggFunction`` and ``COUNT(DISTINCT)`` MapView. NULL values are ignored by every
aggregate but ``COUNT(*)``; SUM/MIN/MAX of no non-null values is NULL.

Example::

    agg = GroupAggregate(["user_region"], [AggSpec.count_star("pv"),
                                           AggSpec.count("uv", "user_id", distinct=True)])
    agg.process(ChangelogRow.insert({"user_id": 1, "user_region": "EU"}))
    # -> [+I[EU, 1, 1]]
    agg.process(ChangelogRow.insert({"user_id": 1, "user_region": "EU"}))
    # -> [-U[EU, 1, 1], +U[EU, 2, 1]]

State lives in a pluggable :class:`AggStateStore` (in memory: :class:`MemoryAggStateStore`); the
whole state can be snapshotted to bytes and restored (:meth:`GroupAggregate.snapshot`), and one
group's state can be encoded alone (:func:`encode_group_state`) for a compacted state topic.
"""

from __future__ import annotations

import abc
import base64
import bisect
import collections
import datetime as dt
import decimal
import enum
import functools
import json
from collections import _count_elements  # type: ignore[attr-defined]  # Counter's C loop
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from changelake.changelog.decimals import ARITHMETIC
from changelake.changelog.errors import ChangelogError, SchemaError
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RETRACT, UPSERT, RowKind
from changelake.changelog.schema import Column, Schema, TableId
from changelake.changelog.types import DataType, TypeRoot

__all__ = [
    "AggFunction",
    "AggSpec",
    "AggStateStore",
    "GroupAccumulator",
    "GroupAggregate",
    "InvalidAggregateError",
    "MemoryAggStateStore",
    "ValueMultiset",
    "decode_group_state",
    "encode_group_state",
]

GroupKey = tuple[Any, ...]

_SNAPSHOT_VERSION = 1


class InvalidAggregateError(ChangelogError):
    """An aggregate specification is invalid (unknown function, missing column, duplicate name),
    or a state snapshot does not match the operator that restores it."""


class AggFunction(enum.Enum):
    """Aggregate functions; the value is the SQL name."""

    COUNT = "COUNT"
    SUM = "SUM"
    MIN = "MIN"
    MAX = "MAX"


@dataclass(frozen=True)
class AggSpec:
    """One named aggregate output column.

    Attributes:
        name: output column name (e.g. ``pv``).
        function: COUNT, SUM, MIN or MAX.
        column: input column, or None for ``COUNT(*)`` (only COUNT may omit it).
        distinct: aggregate distinct non-null values only (``COUNT(DISTINCT user_id)``).

    Raises:
        InvalidAggregateError: a non-COUNT aggregate without a column, or an empty name.
    """

    name: str
    function: AggFunction
    column: str | None = None
    distinct: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidAggregateError("aggregate output name must not be empty")
        if self.column is None and self.function is not AggFunction.COUNT:
            raise InvalidAggregateError(f"{self.function.value}(*) is not allowed; give {self.name!r} a column")
        if self.column is None and self.distinct:
            raise InvalidAggregateError(f"COUNT(DISTINCT *) is not allowed for {self.name!r}; name a column")

    @staticmethod
    def count_star(name: str) -> "AggSpec":
        """``COUNT(*) AS name``: rows in the group, NULLs included."""
        return AggSpec(name, AggFunction.COUNT)

    @staticmethod
    def count(name: str, column: str, distinct: bool = False) -> "AggSpec":
        """``COUNT([DISTINCT] column) AS name``: non-null values."""
        return AggSpec(name, AggFunction.COUNT, column, distinct)

    @staticmethod
    def sum(name: str, column: str, distinct: bool = False) -> "AggSpec":
        """``SUM([DISTINCT] column) AS name``; NULL when the group has no non-null value."""
        return AggSpec(name, AggFunction.SUM, column, distinct)

    @staticmethod
    def min(name: str, column: str) -> "AggSpec":
        """``MIN(column) AS name``; exact under retraction (multiset of values)."""
        return AggSpec(name, AggFunction.MIN, column)

    @staticmethod
    def max(name: str, column: str) -> "AggSpec":
        """``MAX(column) AS name``; exact under retraction (multiset of values)."""
        return AggSpec(name, AggFunction.MAX, column)

    @property
    def needs_multiset(self) -> bool:
        return self.distinct or self.function in (AggFunction.MIN, AggFunction.MAX)

    def sql(self) -> str:
        """SQL text as Flink's plan prints it, e.g. ``COUNT(DISTINCT user_id) AS uv``."""
        arg = "*" if self.column is None else (f"DISTINCT {self.column}" if self.distinct else self.column)
        return f"{self.function.value}({arg}) AS {self.name}"

    def result_type(self, input_type: DataType | None) -> DataType:
        """Output type as Flink derives it: COUNT -> BIGINT NOT NULL; SUM(DECIMAL(p, s)) ->
        DECIMAL(38, s); SUM of other numerics, MIN and MAX keep the input type (nullable)."""
        if self.function is AggFunction.COUNT:
            return DataType(TypeRoot.BIGINT, nullable=False)
        if input_type is None:
            raise InvalidAggregateError(f"{self.sql()} needs the type of column {self.column!r}")
        if self.function is AggFunction.SUM and input_type.root is TypeRoot.DECIMAL:
            return DataType.decimal(38, input_type.scale or 0)
        return input_type.with_nullable(True)


class ValueMultiset:
    """A multiset of hashable, mutually orderable values: value -> count.

    Counts may go negative when a value is retracted before it was accumulated (as Flink's
    MapView-backed accumulators); only values with a positive count are *present*.
    ``distinct_count`` is O(1). The sorted list of present values (for ``min()``, ``max()``,
    ``present()``) is built on first use and then kept up to date (O(log n) plus a list insert
    when a value appears or disappears), so COUNT(DISTINCT) never pays for ordering.
    :meth:`add_all` accumulates many values at C speed (``collections.Counter``'s counting loop)
    while no count is negative and no sorted list is kept.
    """

    __slots__ = ("_counts", "_present", "_npresent", "_nnegative")

    def __init__(self) -> None:
        self._counts: dict[Any, int] = {}
        self._present: list[Any] | None = None  # sorted values with count > 0, once asked for
        self._npresent = 0  # values with count > 0
        self._nnegative = 0  # values with count < 0

    def add(self, value: Any, n: int = 1) -> None:
        """Change ``value``'s count by ``n`` (negative to retract)."""
        before = self._counts.get(value, 0)
        after = before + n
        if after == 0:
            self._counts.pop(value, None)
        else:
            self._counts[value] = after
        if before < 0 <= after:
            self._nnegative -= 1
        elif after < 0 <= before:
            self._nnegative += 1
        if before <= 0 < after:
            self._npresent += 1
            if self._present is not None:
                bisect.insort(self._present, value)
        elif after <= 0 < before:
            self._npresent -= 1
            if self._present is not None:
                i = bisect.bisect_left(self._present, value)
                del self._present[i]

    def add_all(self, values: Sequence[Any]) -> int:
        """Accumulate one occurrence of each non-None value of ``values``; None is skipped.

        Returns the number of non-None values. The same result as ``add(v)`` for each of them.
        """
        counts = self._counts
        if self._nnegative or self._present is not None or None in counts:
            n = 0
            for v in values:
                if v is not None:
                    self.add(v)
                    n += 1
            return n
        _count_elements(counts, values)
        nulls = counts.pop(None, 0)
        self._npresent = len(counts)  # no count is negative, so every key is present
        return len(values) - nulls

    def remove(self, value: Any) -> None:
        """Retract one occurrence of ``value``."""
        self.add(value, -1)

    def count(self, value: Any) -> int:
        return self._counts.get(value, 0)

    @property
    def distinct_count(self) -> int:
        """Number of distinct present values (COUNT DISTINCT)."""
        return self._npresent

    def _sorted(self) -> list[Any]:
        if self._present is None:
            self._present = sorted(v for v, c in self._counts.items() if c > 0)
        return self._present

    def min(self) -> Any:
        """Smallest present value, or None when none is present."""
        present = self._sorted()
        return present[0] if present else None

    def max(self) -> Any:
        """Largest present value, or None when none is present."""
        present = self._sorted()
        return present[-1] if present else None

    def present(self) -> list[Any]:
        """Present values in ascending order."""
        return list(self._sorted())

    def items(self) -> list[tuple[Any, int]]:
        """All (value, count) pairs, including non-positive counts."""
        return list(self._counts.items())

    def __len__(self) -> int:
        return len(self._counts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ValueMultiset) and self._counts == other._counts


@dataclass
class GroupAccumulator:
    """The state of one group.

    Attributes:
        row_count: accumulated minus retracted rows (Flink's record counter); the group is
            empty, and emits ``-D``, when it reaches 0.
        counts: per aggregate, the number of accumulated non-null values (COUNT(col), and the
            null test of SUM).
        sums: per aggregate, the running sum (SUM only, else None).
        multisets: per aggregate, the value multiset (MIN, MAX, DISTINCT only, else None).
    """

    row_count: int = 0
    counts: list[int] = field(default_factory=list)
    sums: list[Any] = field(default_factory=list)
    multisets: list[ValueMultiset | None] = field(default_factory=list)

    @staticmethod
    def create(specs: Sequence[AggSpec]) -> "GroupAccumulator":
        return GroupAccumulator(
            0,
            [0] * len(specs),
            [None] * len(specs),
            [ValueMultiset() if s.needs_multiset else None for s in specs],
        )

    def update(self, specs: Sequence[AggSpec], values: Mapping[str, Any], sign: int) -> None:
        """Accumulate (sign=+1) or retract (sign=-1) one input row."""
        self.row_count += sign
        for i, spec in enumerate(specs):
            if spec.column is None:
                continue
            v = values[spec.column]
            if v is None:
                continue
            self.counts[i] += sign
            ms = self.multisets[i]
            if ms is not None:
                ms.add(v, sign)
            elif spec.function is AggFunction.SUM:
                self.sums[i] = _sum_step(self.sums[i], v, sign)

    def value(self, specs: Sequence[AggSpec]) -> tuple[Any, ...]:
        """The current aggregate values, in spec order."""
        out: list[Any] = []
        for i, spec in enumerate(specs):
            ms = self.multisets[i]
            f = spec.function
            if f is AggFunction.COUNT:
                if spec.column is None:
                    out.append(self.row_count)
                elif ms is not None:
                    out.append(ms.distinct_count)
                else:
                    out.append(self.counts[i])
            elif f is AggFunction.SUM:
                if ms is not None:
                    present = ms.present()
                    out.append(functools.reduce(_plus, present) if present else None)
                else:
                    out.append(self.sums[i] if self.counts[i] > 0 else None)
            elif f is AggFunction.MIN:
                assert ms is not None
                out.append(ms.min())
            else:
                assert ms is not None
                out.append(ms.max())
        return tuple(out)


# -- state encoding -------------------------------------------------------------------------------
def _enc(v: Any) -> Any:
    """A JSON-safe, type-tagged form of a column value (see :mod:`changelake.changelog.types`)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return {"f": repr(v)}  # keeps nan/inf and distinguishes 1.0 from 1
    if isinstance(v, decimal.Decimal):
        return {"d": str(v)}
    if isinstance(v, (bytes, bytearray)):
        return {"b": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, dt.datetime):
        return {"ts": v.isoformat()}
    if isinstance(v, dt.date):
        return {"da": v.isoformat()}
    if isinstance(v, dt.timedelta):
        return {"td": [v.days, v.seconds, v.microseconds]}
    if isinstance(v, dt.time):
        return {"t": v.isoformat()}
    raise InvalidAggregateError(f"cannot snapshot a value of type {type(v).__name__}")


def _plus(a: Any, b: Any) -> Any:
    """``a + b``; DECIMAL operands under ``decimals.ARITHMETIC``, never the thread's 28 digits
    (Flink's SUM(DECIMAL(p, s)) is DECIMAL(38, s))."""
    if type(a) is decimal.Decimal or type(b) is decimal.Decimal:
        return ARITHMETIC.add(a, b)
    return a + b


def _sum_step(s: Any, v: Any, sign: int) -> Any:
    """The running SUM ``s`` (None before the first value) after accumulating (``sign`` > 0) or
    retracting ``v``."""
    if type(v) is decimal.Decimal:
        if sign > 0:
            return v if s is None else ARITHMETIC.add(s, v)
        return ARITHMETIC.minus(v) if s is None else ARITHMETIC.subtract(s, v)
    if sign > 0:
        return v if s is None else s + v
    return -v if s is None else s - v


def _dec(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    (tag, x), = v.items()
    if tag == "f":
        return float(x)
    if tag == "d":
        return decimal.Decimal(x)
    if tag == "b":
        return base64.b64decode(x)
    if tag == "ts":
        return dt.datetime.fromisoformat(x)
    if tag == "da":
        return dt.date.fromisoformat(x)
    if tag == "td":
        return dt.timedelta(days=x[0], seconds=x[1], microseconds=x[2])
    if tag == "t":
        return dt.time.fromisoformat(x)
    raise InvalidAggregateError(f"unknown value tag {tag!r} in aggregate state")


def _acc_to_json(acc: GroupAccumulator) -> dict[str, Any]:
    return {
        "n": acc.row_count,
        "c": acc.counts,
        "s": [_enc(s) for s in acc.sums],
        "m": [None if m is None else [[_enc(v), c] for v, c in m.items()] for m in acc.multisets],
    }


def _acc_from_json(obj: Mapping[str, Any]) -> GroupAccumulator:
    multisets: list[ValueMultiset | None] = []
    for m in obj["m"]:
        if m is None:
            multisets.append(None)
            continue
        ms = ValueMultiset()
        for v, c in m:
            ms.add(_dec(v), c)
        multisets.append(ms)
    return GroupAccumulator(obj["n"], list(obj["c"]), [_dec(s) for s in obj["s"]], multisets)


def encode_group_state(key: GroupKey, acc: GroupAccumulator | None) -> tuple[bytes, bytes | None]:
    """One group's state as (key bytes, value bytes); value None when the group is empty.

    Shaped for a compacted Kafka state topic: key = compact JSON array of the group-key values,
    value = compact JSON of the accumulator (a tombstone once the group empties).
    """
    k = json.dumps([_enc(v) for v in key], separators=(",", ":")).encode()
    if acc is None:
        return k, None
    return k, json.dumps(_acc_to_json(acc), separators=(",", ":")).encode()


def decode_group_state(key: bytes, value: bytes | None) -> tuple[GroupKey, GroupAccumulator | None]:
    """Inverse of :func:`encode_group_state`. Raises InvalidAggregateError on bad bytes."""
    try:
        k = tuple(_dec(v) for v in json.loads(key))
        return k, None if value is None else _acc_from_json(json.loads(value))
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidAggregateError(f"corrupt aggregate state for key {key[:200]!r}: {exc}") from exc


# -- state stores ---------------------------------------------------------------------------------
class AggStateStore(abc.ABC):
    """Where a :class:`GroupAggregate` keeps one :class:`GroupAccumulator` per group key.

    Implementations provide get/put/delete/items/clear; snapshot and restore are built on them.
    """

    @abc.abstractmethod
    def get(self, key: GroupKey) -> GroupAccumulator | None:
        """The group's accumulator, or None when the group has no state."""

    @abc.abstractmethod
    def put(self, key: GroupKey, acc: GroupAccumulator) -> None:
        """Store the group's accumulator (called after every change)."""

    @abc.abstractmethod
    def delete(self, key: GroupKey) -> None:
        """Drop the group's state (its row count fell to 0)."""

    @abc.abstractmethod
    def items(self) -> Iterator[tuple[GroupKey, GroupAccumulator]]:
        """All (key, accumulator) pairs, in no particular order."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Drop all state."""

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    def snapshot(self) -> bytes:
        """All state as bytes (compact JSON, deterministic order of keys as stored)."""
        groups = [[[_enc(v) for v in k], _acc_to_json(a)] for k, a in self.items()]
        return json.dumps({"version": _SNAPSHOT_VERSION, "groups": groups}, separators=(",", ":")).encode()

    def restore(self, data: bytes) -> None:
        """Replace all state with a :meth:`snapshot`. Raises InvalidAggregateError on bad bytes."""
        try:
            obj = json.loads(data)
            if obj.get("version") != _SNAPSHOT_VERSION:
                raise InvalidAggregateError(f"unsupported aggregate snapshot version {obj.get('version')!r}")
            groups = [(tuple(_dec(v) for v in k), _acc_from_json(a)) for k, a in obj["groups"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidAggregateError(f"corrupt aggregate snapshot: {exc}") from exc
        self.clear()
        for k, a in groups:
            self.put(k, a)


class MemoryAggStateStore(AggStateStore):
    """In-memory state (a dict); lost on exit unless snapshotted."""

    def __init__(self) -> None:
        self._groups: dict[GroupKey, GroupAccumulator] = {}

    def get(self, key: GroupKey) -> GroupAccumulator | None:
        return self._groups.get(key)

    def put(self, key: GroupKey, acc: GroupAccumulator) -> None:
        self._groups[key] = acc

    def delete(self, key: GroupKey) -> None:
        self._groups.pop(key, None)

    def items(self) -> Iterator[tuple[GroupKey, GroupAccumulator]]:
        return iter(list(self._groups.items()))

    def clear(self) -> None:
        self._groups.clear()

    def __len__(self) -> int:
        return len(self._groups)


# -- the operator ---------------------------------------------------------------------------------
class GroupAggregate:
    """``SELECT <group_by>, <aggregates> FROM input GROUP BY <group_by>`` over a changelog.

    Args:
        group_by: group-by column names (may be empty: one global group).
        aggregates: the named aggregate outputs; names must be unique and differ from group_by.
        store: state store; default a fresh :class:`MemoryAggStateStore`.
        output_table: TableId put on every output row (None: no table).
        generate_update_before: emit ``-U`` before ``+U`` (True: a retract changelog, as Flink
            when the downstream needs update-before; False: an upsert changelog {+I, +U, -D}).

    Output rows have the group-by columns then the aggregate columns, in that order.

    Raises:
        InvalidAggregateError: duplicate or clashing output names, or no aggregates.
    """

    def __init__(
        self,
        group_by: Sequence[str],
        aggregates: Sequence[AggSpec],
        *,
        store: AggStateStore | None = None,
        output_table: TableId | None = None,
        generate_update_before: bool = True,
    ) -> None:
        self.group_by = tuple(group_by)
        self.aggregates = tuple(aggregates)
        if not self.aggregates:
            raise InvalidAggregateError("GroupAggregate needs at least one aggregate")
        names = list(self.group_by) + [a.name for a in self.aggregates]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InvalidAggregateError(f"duplicate output column names {dupes} in {self.describe()}")
        self.store: AggStateStore = store if store is not None else MemoryAggStateStore()
        self.output_table = output_table
        self.generate_update_before = generate_update_before

    # -- description ------------------------------------------------------------------------------
    @property
    def output_columns(self) -> list[str]:
        """Output column names: group-by columns, then aggregate names."""
        return list(self.group_by) + [a.name for a in self.aggregates]

    @property
    def changelog_mode(self) -> frozenset[RowKind]:
        """Kinds this operator emits: all four (retract), or {+I, +U, -D} without update-before."""
        return RETRACT if self.generate_update_before else UPSERT

    def describe(self) -> str:
        """The plan node as Flink prints it: ``GroupAggregate(groupBy=[r], select=[r, COUNT(*) AS pv])``."""
        select = ", ".join(list(self.group_by) + [a.sql() for a in self.aggregates])
        return f"GroupAggregate(groupBy=[{', '.join(self.group_by)}], select=[{select}])"

    def output_schema(self, input_schema: Schema) -> Schema:
        """The output schema for an input schema; primary key = the group-by columns.

        Raises:
            SchemaError: a group-by or aggregate column is not in ``input_schema``.
        """
        cols = [input_schema.column(g) for g in self.group_by]
        for a in self.aggregates:
            in_type = input_schema.column(a.column).type if a.column is not None else None
            cols.append(Column(a.name, a.result_type(in_type)))
        return Schema(tuple(cols)).with_primary_key(self.group_by) if self.group_by else Schema(tuple(cols))

    # -- processing -------------------------------------------------------------------------------
    def _key(self, row: ChangelogRow) -> GroupKey:
        try:
            return tuple(row.values[g] for g in self.group_by)
        except KeyError as exc:
            raise SchemaError(
                f"{self.describe()}: group-by column {exc.args[0]!r} missing from {row.kind} row "
                f"with columns {list(row.values)}"
            ) from None

    def _check_columns(self, row: ChangelogRow) -> None:
        for a in self.aggregates:
            if a.column is not None and a.column not in row.values:
                raise SchemaError(
                    f"{self.describe()}: column {a.column!r} of {a.sql()} missing from {row.kind} row "
                    f"with columns {list(row.values)}"
                )

    def _out(self, kind: RowKind, key: GroupKey, agg: tuple[Any, ...]) -> ChangelogRow:
        values = dict(zip(self.group_by, key))
        values.update(zip((a.name for a in self.aggregates), agg))
        return ChangelogRow(kind, values, self.output_table)

    def _apply(self, row: ChangelogRow) -> tuple[GroupKey, bool, tuple[Any, ...] | None, tuple[Any, ...] | None] | None:
        """Apply one row to the state: (key, first, old value, new value), or None if ignored.
        ``new`` is None when the group emptied (its state is then deleted)."""
        key = self._key(row)
        self._check_columns(row)
        acc = self.store.get(key)
        first = acc is None
        if acc is None:
            if row.kind.is_retraction:
                return None  # as Flink: never create state for a retraction
            acc = GroupAccumulator.create(self.aggregates)
            old = None
        else:
            old = acc.value(self.aggregates)
        acc.update(self.aggregates, row.values, 1 if row.kind.is_accumulate else -1)
        if acc.row_count > 0:
            self.store.put(key, acc)
            return key, first, old, acc.value(self.aggregates)
        self.store.delete(key)
        return key, first, old, None

    def _emit(self, key: GroupKey, old: tuple[Any, ...] | None, new: tuple[Any, ...] | None) -> list[ChangelogRow]:
        if old is None:
            return [] if new is None else [self._out(RowKind.INSERT, key, new)]
        if new is None:
            return [self._out(RowKind.DELETE, key, old)]
        if new == old:
            return []
        out = [self._out(RowKind.UPDATE_AFTER, key, new)]
        if self.generate_update_before:
            out.insert(0, self._out(RowKind.UPDATE_BEFORE, key, old))
        return out

    def process(self, row: ChangelogRow) -> list[ChangelogRow]:
        """Apply one input row; return the output rows it causes (0, 1 or 2 rows).

        Raises:
            SchemaError: a group-by or aggregate column is missing from the row.
        """
        applied = self._apply(row)
        if applied is None:
            return []
        key, _first, old, new = applied
        return self._emit(key, old, new)

    def process_batch(self, rows: Iterable[ChangelogRow]) -> list[ChangelogRow]:
        """Apply rows in order but emit once per touched group, as Flink's mini-batch
        aggregation (``table.exec.mini-batch.enabled``, MiniBatchGroupAggFunction): the group's
        value before the batch against its value after it (+I, -U/+U, -D or nothing). Groups
        are emitted in order of first touch. The final result equals :meth:`process_all`'s.

        Raises:
            SchemaError: a group-by or aggregate column is missing from a row.
        """
        before: dict[GroupKey, tuple[Any, ...] | None] = {}
        after: dict[GroupKey, tuple[Any, ...] | None] = {}
        for r in rows:
            applied = self._apply(r)
            if applied is None:
                continue
            key, _first, old, new = applied
            if key not in before:
                before[key] = old
            after[key] = new
        out: list[ChangelogRow] = []
        for key, old in before.items():
            out.extend(self._emit(key, old, after[key]))
        return out

    def process_arrow(self, table: pa.Table, kinds: Sequence[RowKind] | None = None) -> list[ChangelogRow]:
        """:meth:`process_batch` over columnar input: one mini-batch given as an Arrow table.

        As Flink's mini-batch aggregation (``MiniBatchGroupAggFunction``): the rows are grouped
        per batch (``GROUP BY`` with Arrow's dictionary encoding and a stable sort, so rows of
        one group keep their order), each touched group's accumulator is updated once, and one
        change per group is emitted (``+I``, ``-U``/``+U``, ``-D`` or nothing; groups in order of
        first touch). Output and state are exactly those of ``process_batch`` on the same rows
        (row ``i`` has kind ``kinds[i]`` and the values of the table's row ``i`` as
        ``to_pylist()`` gives them).

        Args:
            table: the input rows; must hold the group-by and aggregate columns (others are
                ignored).
            kinds: one RowKind per row, or None for insert-only input (all ``+I``). Runs of
                accumulate (``+I``/``+U``) and retract (``-U``/``-D``) rows are applied in
                order; a group whose row count could reach 0 within a retract run is applied
                row by row (its state is cleared at 0 and later retractions are ignored, as
                Flink's).

        Raises:
            SchemaError: a group-by or aggregate column is missing from ``table``.
            ValueError: ``kinds`` does not have one entry per row.
        """
        n = table.num_rows
        names = set(table.column_names)
        for c in self.group_by:
            if c not in names:
                raise SchemaError(
                    f"{self.describe()}: group-by column {c!r} missing from the batch with columns {table.column_names}"
                )
        for a in self.aggregates:
            if a.column is not None and a.column not in names:
                raise SchemaError(
                    f"{self.describe()}: column {a.column!r} of {a.sql()} missing from the batch with columns "
                    f"{table.column_names}"
                )
        if kinds is not None and len(kinds) != n:
            raise ValueError(f"{len(kinds)} row kinds for a batch of {n} rows")
        before: dict[GroupKey, tuple[Any, ...] | None] = {}
        after: dict[GroupKey, tuple[Any, ...] | None] = {}
        if n == 0:
            return []
        if kinds is None:
            self._apply_columns(table, 1, None, before, after)
        else:
            start = 0
            sign = 1 if kinds[0].is_accumulate else -1
            for i in range(1, n + 1):
                s = 0 if i == n else (1 if kinds[i].is_accumulate else -1)
                if s != sign:
                    self._apply_columns(table.slice(start, i - start), sign, kinds[start:i], before, after)
                    start, sign = i, s
        out: list[ChangelogRow] = []
        for key, old in before.items():
            out.extend(self._emit(key, old, after[key]))
        return out

    def _group_ids(self, table: pa.Table) -> tuple[list[GroupKey], pa.Array]:
        """Group keys in order of first occurrence and one group id (int32) per row."""
        if len(self.group_by) == 1:
            enc = pc.dictionary_encode(table.column(self.group_by[0]), null_encoding="encode").combine_chunks()
            return [(k,) for k in enc.dictionary.to_pylist()], enc.indices
        if not self.group_by:
            return [()], pa.array([0] * table.num_rows, pa.int32())
        ids: dict[GroupKey, int] = {}
        gids = [ids.setdefault(k, len(ids)) for k in zip(*(table.column(c).to_pylist() for c in self.group_by))]
        return list(ids), pa.array(gids, pa.int32())

    def _apply_columns(
        self,
        table: pa.Table,
        sign: int,
        kinds: Sequence[RowKind] | None,
        before: dict[GroupKey, tuple[Any, ...] | None],
        after: dict[GroupKey, tuple[Any, ...] | None],
    ) -> None:
        """Apply a run of rows of one sign (+1 accumulate, -1 retract), grouped."""
        keys, gids = self._group_ids(table)
        order = pc.sort_indices(gids)  # stable: rows of a group keep their order
        sorted_gids = gids.take(order)
        runs = pc.run_end_encode(sorted_gids)
        ends = runs.run_ends.to_pylist()
        run_gids = runs.values.to_pylist()
        columns = sorted({a.column for a in self.aggregates if a.column is not None})
        vals = {c: table.column(c).take(order).to_pylist() for c in columns}
        specs = self.aggregates
        store = self.store
        start = 0
        for gid, end in zip(run_gids, ends):
            key = keys[gid]
            cnt = end - start
            acc = store.get(key)
            if sign < 0 and (acc is None or acc.row_count <= cnt):
                if acc is not None:  # may empty the group: exact row-by-row order matters
                    assert kinds is not None
                    rows = order.slice(start, cnt).to_pylist()
                    for j in range(cnt):
                        values = dict(zip(self.group_by, key))
                        values.update((c, vals[c][start + j]) for c in columns)
                        applied = self._apply(ChangelogRow(kinds[rows[j]], values))
                        if applied is not None:
                            k, _first, old_v, new_v = applied
                            if k not in before:
                                before[k] = old_v
                            after[k] = new_v
                # without state every retraction is ignored: nothing is touched
                start = end
                continue
            if acc is None:
                acc = GroupAccumulator.create(specs)
                old: tuple[Any, ...] | None = None
            else:
                old = acc.value(specs)
            acc.row_count += sign * cnt
            for i, spec in enumerate(specs):
                if spec.column is None:
                    continue
                group_vals = vals[spec.column][start:end]
                ms = acc.multisets[i]
                if ms is not None:
                    if sign > 0:
                        nonnull = ms.add_all(group_vals)
                    else:
                        nonnull = 0
                        for v, c in collections.Counter(v for v in group_vals if v is not None).items():
                            ms.add(v, -c)
                            nonnull += c
                elif spec.function is AggFunction.SUM:
                    s = acc.sums[i]
                    nonnull = 0
                    for v in group_vals:
                        if v is None:
                            continue
                        nonnull += 1
                        s = _sum_step(s, v, sign)
                    acc.sums[i] = s
                else:
                    nonnull = cnt - group_vals.count(None)
                acc.counts[i] += sign * nonnull
            store.put(key, acc)  # row_count > 0: accumulated, or retracted by fewer than it had
            if key not in before:
                before[key] = old
            after[key] = acc.value(specs)
            start = end

    def process_all(self, rows: Iterable[ChangelogRow]) -> list[ChangelogRow]:
        """Apply rows in order; return all output rows in order."""
        out: list[ChangelogRow] = []
        for r in rows:
            out.extend(self.process(r))
        return out

    def result(self) -> dict[GroupKey, dict[str, Any]]:
        """The current result table: group key -> output row values (groups with rows only)."""
        return {
            k: dict(self._out(RowKind.INSERT, k, a.value(self.aggregates)).values)
            for k, a in self.store.items()
            if a.row_count > 0
        }

    # -- state ------------------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        """All group state as bytes; the operator description is included and checked on restore."""
        body = json.loads(self.store.snapshot())
        body["operator"] = self.describe()
        return json.dumps(body, separators=(",", ":")).encode()

    def restore(self, data: bytes) -> None:
        """Replace the state with a :meth:`snapshot` of an operator with the same description.

        Raises:
            InvalidAggregateError: corrupt bytes, or a snapshot of another aggregation.
        """
        try:
            body = json.loads(data)
            op = body.pop("operator")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidAggregateError(f"corrupt aggregate snapshot: {exc}") from exc
        if op != self.describe():
            raise InvalidAggregateError(
                f"snapshot belongs to {op}, not {self.describe()}; start from empty state instead"
            )
        self.store.restore(json.dumps(body).encode())
