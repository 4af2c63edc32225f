"""TableId, Column and Schema: what a changelog row belongs to and what it holds."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from changelake.changelog.errors import SchemaError
from changelake.changelog.types import DataType

__all__ = ["TableId", "Column", "Schema"]


@dataclass(frozen=True, order=True)
class TableId:
    """Identity of a table: ``database.table`` (Flink CDC's TableId with the MySQL database as schema).

    ``str(TableId("kafka_test", "customers")) == "kafka_test.customers"``; a TableId without a
    database prints as the table name alone.
    """

    database: str | None
    table: str

    def __str__(self) -> str:
        return f"{self.database}.{self.table}" if self.database else self.table

    @classmethod
    def parse(cls, text: str) -> "TableId":
        """Parse ``db.table`` (split at the first dot) or ``table``."""
        db, dot, table = text.partition(".")
        return cls(db, table) if dot else cls(None, db)


@dataclass(frozen=True)
class Column:
    """A named, typed column. ``comment`` is optional documentation."""

    name: str
    type: DataType
    comment: str | None = None


@dataclass(frozen=True)
class Schema:
    """Ordered columns plus the primary key (column names in key order; may be empty).

    Raises SchemaError on construction if a primary-key column is not among the columns or a
    column name repeats.
    """

    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    _index: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False, hash=False)
    #: the table comment, when the source carries comments (Flink CDC's ``Schema.comment``).
    comment: str | None = None

    def __post_init__(self) -> None:
        index = {c.name: i for i, c in enumerate(self.columns)}
        if len(index) != len(self.columns):
            names = [c.name for c in self.columns]
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise SchemaError(f"duplicate column names {dupes}")
        missing = [k for k in self.primary_key if k not in index]
        if missing:
            raise SchemaError(
                f"primary key column(s) {missing} not found among columns {list(index)}"
            )
        object.__setattr__(self, "_index", index)

    @classmethod
    def of(cls, columns: Iterable[tuple[str, DataType] | Column], primary_key: Sequence[str] = ()) -> "Schema":
        cols = tuple(c if isinstance(c, Column) else Column(c[0], c[1]) for c in columns)
        return cls(cols, tuple(primary_key))

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def column(self, name: str) -> Column:
        """The column called ``name``. Raises SchemaError if absent."""
        try:
            return self.columns[self._index[name]]
        except KeyError:
            raise SchemaError(f"no column {name!r}; columns are {self.names}") from None

    def key_of(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The primary-key tuple of a row's values (PK order). Raises SchemaError without a PK."""
        if not self.primary_key:
            raise SchemaError("schema has no primary key")
        return tuple(values.get(k) for k in self.primary_key)

    def with_primary_key(self, primary_key: Sequence[str]) -> "Schema":
        """A copy with another primary key; key columns become NOT NULL."""
        pk = tuple(primary_key)
        cols = tuple(replace(c, type=c.type.with_nullable(False)) if c.name in pk else c for c in self.columns)
        return Schema(cols, pk, comment=self.comment)

    def project(self, names: Sequence[str]) -> "Schema":
        """The sub-schema of ``names`` (in that order); the PK is kept only if fully projected."""
        cols = tuple(self.column(n) for n in names)
        pk = self.primary_key if all(k in names for k in self.primary_key) else ()
        return Schema(cols, pk, comment=self.comment)
