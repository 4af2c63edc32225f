"""Paimon table schemas from changelake schemas: creation and additive evolution.

The rules are the Iceberg sink's (:mod:`changelake.connectors.iceberg.evolve`); data is never dropped:

* A new table gets one field per column plus :data:`~changelake.connectors.paimon.options.ROW_KIND_FIELD`;
  its primary key is the schema's (NOT NULL), every other column is nullable (a delete row
  carries only its key, a dropped column is written as NULL).
* A new column is added as nullable at the end; old rows read it as NULL.
* Types widen as :func:`~changelake.connectors.paimon.types.widening` allows; a narrower incoming
  type is written into the wider lake column unchanged.
* A column missing from the incoming schema stays in the table.
* Anything else (other primary key, changed DECIMAL scale, INT -> STRING, ...) raises
  :class:`~changelake.connectors.paimon.errors.SchemaEvolutionError` naming the table, the column,
  the old and the new type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from changelake.changelog.schema import Schema
from changelake.connectors.paimon.errors import PaimonSinkError, SchemaEvolutionError
from changelake.connectors.paimon.options import ROW_KIND_FIELD
from changelake.connectors.paimon.types import to_paimon_type, widening

__all__ = ["SchemaChange", "paimon_schema_of", "plan_evolution", "to_schema_changes"]


@dataclass(frozen=True)
class SchemaChange:
    """One change to apply: ``kind`` is ``add`` or ``widen``; ``type`` is the Paimon type name."""

    kind: str
    column: str
    type: str

    def __str__(self) -> str:
        return f"{self.kind} {self.column} {self.type}"


def paimon_schema_of(
    schema: Schema,
    *,
    table: str,
    options: Mapping[str, str],
    partition_keys: Sequence[str] = (),
) -> Any:
    """The pypaimon ``Schema`` of a new primary-key table for ``schema``.

    Args:
        schema: the incoming schema (with its primary key).
        table: the lake table's name, for errors.
        options: Paimon table options (``table.properties.*``); ``rowkind.field`` is added.
        partition_keys: partition columns (each must be a column; Paimon requires the primary key
            to contain them).

    Raises:
        PaimonSinkError: no primary key, or a partition key that is not a column or not in the key.
    """
    from pypaimon import Schema as PaimonSchema
    from pypaimon.schema.data_types import AtomicType, DataField

    if not schema.primary_key:
        raise PaimonSinkError(
            f"table {table!r} has no primary key; the Paimon sink writes primary-key tables. "
            "Declare one with the transform's 'primary-keys'",
            table=table,
        )
    for key in partition_keys:
        if key not in schema.primary_key:
            raise PaimonSinkError(
                f"partition key {key!r} of Paimon table {table!r} must be one of its primary-key "
                f"columns {list(schema.primary_key)} ('partition.key')",
                table=table,
                column=key,
            )
    fields = []
    for field_id, col in enumerate(schema.columns):
        nullable = col.name not in schema.primary_key
        fields.append(DataField(field_id, col.name, AtomicType(to_paimon_type(col.type), nullable), col.comment))
    fields.append(DataField(len(fields), ROW_KIND_FIELD, AtomicType("STRING", False)))
    return PaimonSchema(
        fields,
        partition_keys=list(partition_keys),
        primary_keys=list(schema.primary_key),
        options={**options, "rowkind.field": ROW_KIND_FIELD},
    )


def plan_evolution(
    fields: Sequence[tuple[str, str]], primary_key: Sequence[str], incoming: Schema, *, table: str
) -> list[SchemaChange]:
    """The changes that make the lake table accept rows of ``incoming``; empty when none.

    Args:
        fields: the lake table's ``(column, Paimon type name)`` in order (row-kind column included
            or not, it is ignored).
        primary_key: the lake table's primary key.
        incoming: the schema of the rows to write.
        table: named in errors.

    Raises:
        SchemaEvolutionError: the primary key differs, or a column's type changes in a way Paimon
            cannot widen (names table, column, old and new type).
    """
    if incoming.primary_key and list(incoming.primary_key) != list(primary_key):
        raise SchemaEvolutionError(
            f"primary key of Paimon table {table!r} changed from {list(primary_key)} to "
            f"{list(incoming.primary_key)}; a Paimon table's primary key cannot change",
            table=table,
        )
    lake = {name: type_name for name, type_name in fields if name != ROW_KIND_FIELD}
    changes: list[SchemaChange] = []
    for col in incoming.columns:
        new_type = to_paimon_type(col.type)
        if col.name not in lake:
            changes.append(SchemaChange("add", col.name, new_type))
            continue
        old_type = lake[col.name]
        verdict = widening(old_type, new_type)
        if verdict == "bad":
            raise SchemaEvolutionError(
                f"column {col.name!r} of Paimon table {table!r} changed type from {old_type} to "
                f"{new_type} ({col.type}); the sink only widens TINYINT->SMALLINT->INT->BIGINT, "
                "FLOAT->DOUBLE and DECIMAL precision",
                table=table,
                column=col.name,
                old_type=old_type,
                new_type=new_type,
            )
        if verdict == "widen":
            changes.append(SchemaChange("widen", col.name, new_type))
    return changes


def to_schema_changes(changes: Sequence[SchemaChange]) -> list[Any]:
    """pypaimon ``SchemaChange`` objects for ``changes`` (added columns are nullable, last)."""
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange as PaimonChange

    out: list[Any] = []
    for change in changes:
        if change.kind == "add":
            out.append(PaimonChange.add_column(change.column, AtomicType(change.type, True)))
        else:
            out.append(PaimonChange.update_column_type(change.column, AtomicType(change.type, True), True))
    return out


def plan_recreate(fields: Sequence[tuple[str, str]], primary_key: Sequence[str], incoming: Schema,
                  *, table: str) -> tuple[list[Any], list[Any]]:
    """The two alterations that make an emptied table (its source table was dropped and created
    again) take the new definition: first drop the columns that are gone or changed type, then
    add the new and changed ones (nullable, last). Returns pypaimon ``SchemaChange`` lists.

    Raises:
        SchemaEvolutionError: the primary key changed (a Paimon table's cannot).
    """
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange as PaimonChange

    if incoming.primary_key and list(incoming.primary_key) != list(primary_key):
        raise SchemaEvolutionError(
            f"Paimon table {table!r} was dropped and created again with primary key {list(incoming.primary_key)} "
            f"instead of {list(primary_key)}; a Paimon table's primary key cannot change: drop the lake table "
            "(its history goes with it) or route the new table elsewhere",
            table=table,
        )
    lake = {name: type_name for name, type_name in fields if name != ROW_KIND_FIELD}
    wanted = {c.name: to_paimon_type(c.type) for c in incoming.columns}
    gone = [n for n in lake if n not in primary_key and (n not in wanted or _base(lake[n]) != _base(wanted[n]))]
    drops = [PaimonChange.drop_column(n) for n in gone]
    adds = [PaimonChange.add_column(c.name, AtomicType(wanted[c.name], True), c.comment)
            for c in incoming.columns if c.name not in lake or c.name in gone]
    return drops, adds


def _base(type_name: str) -> str:
    return type_name.upper().replace(" NOT NULL", "").strip()


def classify_columns(fields: Sequence[tuple[str, str]], primary_key: Sequence[str], incoming: Schema,
                     comments: Mapping[str, str | None] | None = None) -> list[Any]:
    """Each column's difference between the table (``(column, Paimon type)``, comments by column)
    and ``incoming`` as :class:`~changelake.connectors.lake.schema_change.ColumnChange`."""
    from changelake.connectors.lake.schema_change import ColumnChange

    lake = {name: type_name for name, type_name in fields if name != ROW_KIND_FIELD}
    out: list[Any] = []
    for col in incoming.columns:
        new_type = to_paimon_type(col.type)
        if col.name not in lake:
            out.append(ColumnChange("add", col.name, new_type))
            continue
        verdict = widening(lake[col.name], new_type)
        if verdict != "same":
            out.append(ColumnChange(verdict, col.name, f"{lake[col.name]} -> {new_type}"))
        elif comments is not None and (col.comment or None) != (comments.get(col.name) or None):
            out.append(ColumnChange("comment", col.name, f"{comments.get(col.name)!r} -> {col.comment!r}"))
    out += [ColumnChange("drop", n) for n in lake if n not in incoming and n not in primary_key]
    return out


def comment_changes(fields: Sequence[tuple[str, str | None]], table_comment: str | None, incoming: Schema) -> list[Any]:
    """pypaimon changes for the column comments (``(column, description)``) and the table comment
    of ``incoming`` that differ from the table's; none when ``incoming`` carries no comment at all
    (``include-comments.enabled`` off at the source)."""
    from pypaimon.schema.schema_change import SchemaChange as PaimonChange

    if not incoming.comment and not any(c.comment for c in incoming.columns):
        return []
    lake = dict(fields)
    out: list[Any] = [PaimonChange.update_column_comment(c.name, c.comment or "") for c in incoming.columns
                      if c.name in lake and (c.comment or None) != (lake[c.name] or None)]
    if (incoming.comment or None) != (table_comment or None):
        out.append(PaimonChange.update_comment(incoming.comment))
    return out
