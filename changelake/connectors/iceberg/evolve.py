"""Iceberg table schemas from changelake schemas: creation and additive evolution.

Rules (data is never dropped):

* A new table gets one field per column; primary-key columns are ``required`` and are the
  table's identifier fields, every other column is optional (a later NULL or a dropped column
  never breaks a write).
* A new column is added as optional at the end; old rows read it as NULL.
* Types widen as Iceberg allows: int -> long, float -> double, decimal(p, s) -> decimal(p', s)
  with p' > p. A narrower incoming type (INT into a ``long`` column) is written into the wider
  lake column unchanged.
* A column missing from the incoming schema (dropped in MySQL) stays in the table, becomes
  optional, and rows written later hold NULL in it.
* Anything else (other primary key, changed DECIMAL scale, INT -> STRING, ...) raises
  :class:`SchemaEvolutionError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.table import Table
from pyiceberg.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
)

from changelake.changelog.schema import Schema
from changelake.connectors.iceberg.errors import IcebergSinkError, SchemaEvolutionError
from changelake.connectors.iceberg.types import to_iceberg_type

__all__ = ["SchemaChange", "iceberg_schema_of", "plan_evolution", "apply_evolution"]


@dataclass(frozen=True)
class SchemaChange:
    """One change to apply: ``kind`` is ``add``, ``widen`` or ``make-optional``."""

    kind: str
    column: str
    type: IcebergType | None = None

    def __str__(self) -> str:
        return f"{self.kind} {self.column}" + (f" {self.type}" if self.type is not None else "")


def iceberg_schema_of(schema: Schema, *, table: str) -> IcebergSchema:
    """The Iceberg schema of a new lake table for ``schema`` (field ids 1..n in column order).

    Raises:
        IcebergSinkError: ``schema`` has no primary key (the sink upserts by key).
    """
    if not schema.primary_key:
        raise IcebergSinkError(
            f"table {table!r} has no primary key; the Iceberg sink upserts by key. "
            "Declare one with the transform's 'primary-keys'",
            table=table,
        )
    fields = []
    for field_id, col in enumerate(schema.columns, start=1):
        required = col.name in schema.primary_key
        fields.append(NestedField(field_id, col.name, to_iceberg_type(col.type), required=required, doc=col.comment))
    ids = [schema.names.index(k) + 1 for k in schema.primary_key]
    return IcebergSchema(*fields, identifier_field_ids=ids)


def _widening(current: IcebergType, incoming: IcebergType) -> str:
    """``same``, ``widen`` (lake must widen to incoming) or ``keep`` (incoming fits the lake) or ``bad``."""
    if current == incoming:
        return "same"
    if isinstance(current, IntegerType) and isinstance(incoming, LongType):
        return "widen"
    if isinstance(current, LongType) and isinstance(incoming, IntegerType):
        return "keep"
    if isinstance(current, FloatType) and isinstance(incoming, DoubleType):
        return "widen"
    if isinstance(current, DoubleType) and isinstance(incoming, FloatType):
        return "keep"
    if isinstance(current, DecimalType) and isinstance(incoming, DecimalType) and current.scale == incoming.scale:
        return "widen" if incoming.precision > current.precision else "keep"
    return "bad"


def plan_evolution(current: IcebergSchema, incoming: Schema, *, table: str) -> list[SchemaChange]:
    """The changes that make the lake table accept rows of ``incoming``; empty when none.

    Raises:
        SchemaEvolutionError: the primary key differs from the table's identifier fields, or a
            column's type changes in a way Iceberg cannot widen (names the table and column).
    """
    identifier = [current.find_column_name(i) for i in current.identifier_field_ids]
    if incoming.primary_key and list(incoming.primary_key) != identifier:
        raise SchemaEvolutionError(
            f"primary key of table {table!r} changed from {identifier} to {list(incoming.primary_key)}; "
            "the lake table's identifier fields cannot change",
            table=table,
        )
    changes: list[SchemaChange] = []
    lake_names = {f.name for f in current.fields}
    for col in incoming.columns:
        new_type = to_iceberg_type(col.type)
        if col.name not in lake_names:
            changes.append(SchemaChange("add", col.name, new_type))
            continue
        lake_field = current.find_field(col.name)
        verdict = _widening(lake_field.field_type, new_type)
        if verdict == "bad":
            raise SchemaEvolutionError(
                f"column {col.name!r} of table {table!r} changed type from {lake_field.field_type} to "
                f"{new_type} ({col.type}); Iceberg can only widen int->long, float->double and "
                "decimal precision",
                table=table,
                column=col.name,
            )
        if verdict == "widen":
            changes.append(SchemaChange("widen", col.name, new_type))
    for lake_field in current.fields:
        if lake_field.required and lake_field.name not in identifier:
            if lake_field.name not in incoming or incoming.column(lake_field.name).type.nullable:
                changes.append(SchemaChange("make-optional", lake_field.name))
    return changes


def apply_evolution(table: Table, changes: list[SchemaChange]) -> None:
    """Apply ``changes`` to ``table`` in one schema commit (no-op when empty)."""
    if not changes:
        return
    with table.update_schema() as update:
        for change in changes:
            if change.kind == "add" and change.type is not None:
                update.add_column(change.column, change.type, required=False)
            elif change.kind == "widen" and change.type is not None:
                update.update_column(change.column, field_type=change.type)
            elif change.kind == "make-optional":
                update.update_column(change.column, required=False)


def apply_recreate(table: Table, incoming: Schema, *, table_name: str) -> list[str]:
    """Make an emptied table (its source table was dropped and created again) take the new
    definition: columns not in ``incoming`` are deleted, columns whose type changed get a new
    field (old snapshots keep reading the old one by time travel), new columns are added.

    Returns the changes made (``"drop c"``, ``"retype c"``, ``"add c"``).

    Raises:
        SchemaEvolutionError: the primary key changed (the table's identifier fields cannot).
    """
    current = table.schema()
    identifier = [current.find_column_name(i) for i in current.identifier_field_ids]
    if incoming.primary_key and list(incoming.primary_key) != identifier:
        raise SchemaEvolutionError(
            f"table {table_name!r} was dropped and created again with primary key {list(incoming.primary_key)} "
            f"instead of {identifier}; the lake table's identifier fields cannot change: drop the lake table "
            "(its history goes with it) or route the new table elsewhere",
            table=table_name,
        )
    lake = {f.name: f for f in current.fields}
    wanted = {c.name: to_iceberg_type(c.type) for c in incoming.columns}
    gone = [n for n in lake if n not in identifier and (n not in wanted or _widening(lake[n].field_type, wanted[n]) != "same")]
    done = [f"{'drop' if n not in wanted else 'retype'} {n}" for n in gone]
    if gone:
        with table.update_schema() as update:
            for n in gone:
                update.delete_column(n)
    added = [c for c in incoming.columns if c.name not in lake or c.name in gone]
    if added:
        with table.update_schema() as update:
            for c in added:
                update.add_column(c.name, wanted[c.name], doc=c.comment, required=False)
    done += [f"add {c.name}" for c in added if c.name not in gone]
    return done


def classify_columns(current: IcebergSchema, incoming: Schema) -> list[Any]:
    """Each column's difference between the table and ``incoming`` as
    :class:`~changelake.connectors.lake.schema_change.ColumnChange` (the schema-change policy's input)."""
    from changelake.connectors.lake.schema_change import ColumnChange

    identifier = {current.find_column_name(i) for i in current.identifier_field_ids}
    lake = {f.name: f for f in current.fields}
    out: list[Any] = []
    for col in incoming.columns:
        new_type = to_iceberg_type(col.type)
        found = lake.get(col.name)
        if found is None:
            out.append(ColumnChange("add", col.name, str(new_type)))
            continue
        verdict = _widening(found.field_type, new_type)
        if verdict != "same":
            out.append(ColumnChange(verdict, col.name, f"{found.field_type} -> {new_type}"))
        elif (col.comment or None) != (found.doc or None):
            out.append(ColumnChange("comment", col.name, f"{found.doc!r} -> {col.comment!r}"))
    out += [ColumnChange("drop", n) for n in lake if n not in incoming and n not in identifier]
    return out


def delete_columns(table: Table, columns: Sequence[str]) -> None:
    """Delete ``columns`` from the table's current schema (``evolve``'s ``drop.column``; old
    snapshots keep them, readable by time travel)."""
    if columns:
        with table.update_schema() as update:
            for name in columns:
                update.delete_column(name)


def apply_comments(table: Table, incoming: Schema) -> None:
    """Column comments (field docs) and the table comment (property ``comment``) of ``incoming``
    that differ from the table's; nothing when ``incoming`` carries no comment at all (the source
    reads none: ``include-comments.enabled`` off)."""
    if not incoming.comment and not any(c.comment for c in incoming.columns):
        return
    current = table.schema()
    lake = {f.name: f for f in current.fields}
    changed = [(c.name, c.comment) for c in incoming.columns
               if c.name in lake and (c.comment or None) != (lake[c.name].doc or None)]
    if changed:
        with table.update_schema() as update:
            for name, doc in changed:
                update.update_column(name, doc=doc or "")
    if (incoming.comment or None) != (table.properties.get("comment") or None):
        with table.transaction() as tx:
            tx.set_properties(comment=incoming.comment or "")
