"""A change batch: the changelog rows of many source records of one table, in Arrow (the columnar lane).

A :class:`ChangeBatch` holds what :meth:`DataChangeEvent.to_rows
<changelake.changelog.event.DataChangeEvent.to_rows>` would give for each of its records, in
order, as columns: one row per changelog row (``+I`` after image, ``-U`` before image then ``+U``
after image, ``-D`` before image), the row kinds beside them, and the Kafka offset of the record
each row came from. It is what a source that decodes a whole group of records at once (the
``kafka`` source with Pipeline 1's schema header) hands to the stage and on to a lake sink,
instead of one :class:`~changelake.changelog.event.DataChangeEvent` per record.

Column types (:func:`batch_arrow_type`): the Arrow types expressions evaluate in
(:func:`changelake.changelog.expressions.types.arrow_type`), except TIME, which is the text
Flink's JSON format writes (``[-]HH:mm:ss[.f]``, as the lakes store it). DECIMAL wider than 38
digits has no batch type (such a table takes the per-record path).

Every batch can give its records back as change events (:attr:`ChangeBatch.fallback`): the stage
or sink uses that when it needs per-record work (a row it must reject, a rule it cannot evaluate
on Arrow), so the per-record path decides exactly as it does without the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from changelake.changelog.event import DataChangeEvent
from changelake.changelog.expressions.types import arrow_type
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import DataType, TypeRoot

__all__ = ["ChangeBatch", "batch_arrow_type", "batch_arrow_schema", "op_counts"]

#: Row kinds that keep a key (Flink's accumulate messages).
ACCUMULATE = ("+I", "+U")


def batch_arrow_type(dtype: DataType) -> pa.DataType | None:
    """The Arrow type a :class:`ChangeBatch` column of ``dtype`` has (see the module docstring);
    None for DECIMAL wider than 38 digits (no batch type)."""
    if dtype.root is TypeRoot.TIME:
        return pa.string()
    if dtype.root is TypeRoot.DECIMAL and (dtype.precision or 10) > 38:
        return None
    return arrow_type(dtype)


def batch_arrow_schema(schema: Schema) -> pa.Schema | None:
    """The Arrow schema of a batch of ``schema`` (every column nullable), None when a column has
    no batch type."""
    fields = []
    for column in schema.columns:
        t = batch_arrow_type(column.type)
        if t is None:
            return None
        fields.append(pa.field(column.name, t))
    return pa.schema(fields)


@dataclass(frozen=True)
class ChangeBatch:
    """The changelog rows of consecutive records of one Kafka partition and one table schema.

    Attributes:
        table: the table (after route, the sink table).
        schema: the rows' schema (after transform, the output schema; the key is its primary key).
        rows: one row per changelog row, the columns of ``schema`` in :func:`batch_arrow_type`.
        kinds: string array parallel to ``rows``: ``+I``, ``-U``, ``+U``, ``-D`` (a ``-U`` directly
            followed by its ``+U``).
        offsets: int64 array parallel to ``rows``: the Kafka offset of the record of each row.
        topic, partition: where the records are.
        records: how many Kafka records the batch covers (each one change event).
        last_offset: the offset of the last record covered (rows may end before it when a
            transform filtered them out).
        fallback: the same records as change events (each with its ``position``), decoded one
            by one, for the per-record path; they are registered with the source, so it can
            reject one.
        ops: change events per Debezium op letter (``{"c": 3, "u": 1}``), as the runner reports them.
    """

    table: TableId
    schema: Schema
    rows: pa.Table
    kinds: pa.Array
    offsets: pa.Array
    topic: str
    partition: int
    records: int
    last_offset: int
    fallback: Callable[[], list[DataChangeEvent]] = field(compare=False, repr=False)
    ops: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def num_rows(self) -> int:
        return int(self.rows.num_rows)

    def retarget(self, table: TableId) -> "ChangeBatch":
        """The same batch addressed to sink table ``table`` (a route)."""
        return replace(self, table=table)

    def with_rows(self, schema: Schema, rows: pa.Table, kinds: pa.Array, indices: pa.Array | None) -> "ChangeBatch":
        """A batch of transformed ``rows`` (``indices``: each output row's input row; None: all)."""
        offsets = self.offsets if indices is None else self.offsets.take(indices)
        return replace(self, schema=schema, rows=rows, kinds=kinds, offsets=offsets)

    def null_key_rows(self) -> bool:
        """True when some row lacks a value of a primary-key column (the per-record key check
        must then name it)."""
        return any(name not in self.rows.column_names or self.rows.column(name).null_count
                   for name in self.schema.primary_key)


def op_counts(kinds: pa.Array) -> dict[str, int]:
    """Change events per op letter of the rows ``kinds`` (``-U`` not counted: its ``+U`` is the
    update): ``+I`` -> ``c``, ``+U`` -> ``u``, ``-D`` -> ``d``."""
    letters = {"+I": "c", "+U": "u", "-D": "d"}
    out: dict[str, int] = {}
    counts = pc.value_counts(kinds).to_pylist() if len(kinds) else []
    for entry in counts:
        letter = letters.get(str(entry["values"]))
        if letter is not None:
            out[letter] = out.get(letter, 0) + int(entry["counts"])
    return out
