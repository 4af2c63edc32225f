"""Logical data types of changelog columns, named as Flink SQL names them.

Python values carried in a :class:`~changelake.changelog.row.ChangelogRow` per type root:

============================  =====================================================
type root                     Python value
============================  =====================================================
BOOLEAN                       ``bool``
TINYINT/SMALLINT/INT/BIGINT   ``int`` (BIGINT UNSIGNED is DECIMAL(20, 0))
FLOAT / DOUBLE                ``float`` (FLOAT keeps float32 precision when encoded)
DECIMAL(p, s)                 ``decimal.Decimal`` with exactly ``s`` fraction digits
CHAR / VARCHAR / STRING       ``str`` (MySQL JSON, ENUM and SET are STRING)
BINARY / VARBINARY / BYTES    ``bytes``
DATE                          ``datetime.date``
TIME(p)                       ``datetime.timedelta`` (MySQL TIME may be negative or > 24 h)
TIMESTAMP(p)                  naive ``datetime.datetime`` (wall clock, MySQL DATETIME)
TIMESTAMP_LTZ(p)              aware ``datetime.datetime`` in UTC (MySQL TIMESTAMP)
============================  =====================================================

``None`` is SQL NULL for every type.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace

__all__ = ["TypeRoot", "DataType", "parse_data_type"]


class TypeRoot(enum.Enum):
    """The root of a logical type; the value is Flink SQL's type name."""

    BOOLEAN = "BOOLEAN"
    TINYINT = "TINYINT"
    SMALLINT = "SMALLINT"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    CHAR = "CHAR"
    VARCHAR = "VARCHAR"
    STRING = "STRING"
    BINARY = "BINARY"
    VARBINARY = "VARBINARY"
    BYTES = "BYTES"
    DATE = "DATE"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"
    TIMESTAMP_LTZ = "TIMESTAMP_LTZ"


_INTEGERS = {TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT}
_STRINGS = {TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.STRING}
_BINARIES = {TypeRoot.BINARY, TypeRoot.VARBINARY, TypeRoot.BYTES}


@dataclass(frozen=True)
class DataType:
    """A column type: root, nullability and parameters.

    Attributes:
        root: the type root.
        nullable: whether NULL is allowed (primary-key columns are NOT NULL).
        precision: DECIMAL precision (digits), or fractional-second digits for TIME/TIMESTAMP(_LTZ).
        scale: DECIMAL scale (fraction digits).
        length: CHAR/VARCHAR/BINARY/VARBINARY length in characters or bytes.
    """

    root: TypeRoot
    nullable: bool = True
    precision: int | None = None
    scale: int | None = None
    length: int | None = None

    # -- constructors ---------------------------------------------------------------------------
    @staticmethod
    def decimal(precision: int, scale: int, nullable: bool = True) -> "DataType":
        return DataType(TypeRoot.DECIMAL, nullable, precision=precision, scale=scale)

    @staticmethod
    def of(root: TypeRoot | str, nullable: bool = True, **params: int) -> "DataType":
        """Build a type from a root (enum or Flink name) and optional parameters."""
        if isinstance(root, str):
            root = TypeRoot(root.upper())
        return DataType(root, nullable, **params)

    # -- predicates ------------------------------------------------------------------------------
    @property
    def is_integer(self) -> bool:
        return self.root in _INTEGERS

    @property
    def is_string(self) -> bool:
        return self.root in _STRINGS

    @property
    def is_binary(self) -> bool:
        return self.root in _BINARIES

    @property
    def is_temporal(self) -> bool:
        return self.root in (TypeRoot.DATE, TypeRoot.TIME, TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ)

    def with_nullable(self, nullable: bool) -> "DataType":
        return replace(self, nullable=nullable)

    # -- text ------------------------------------------------------------------------------------
    def to_sql(self) -> str:
        """Flink SQL spelling, e.g. ``DECIMAL(10, 2) NOT NULL``, ``TIMESTAMP_LTZ(3)``, ``STRING``."""
        name = self.root.value
        if self.root is TypeRoot.DECIMAL:
            name = f"DECIMAL({self.precision if self.precision is not None else 10}, {self.scale or 0})"
        elif self.root in (TypeRoot.TIME, TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ) and self.precision is not None:
            name = f"{name}({self.precision})"
        elif self.root in (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY) and self.length is not None:
            name = f"{name}({self.length})"
        return name if self.nullable else f"{name} NOT NULL"

    def __str__(self) -> str:
        return self.to_sql()


_ALIASES = {
    "INTEGER": "INT",
    "BOOL": "BOOLEAN",
    "NUMERIC": "DECIMAL",
    "DEC": "DECIMAL",
    "REAL": "FLOAT",
    "DOUBLE PRECISION": "DOUBLE",
    "TEXT": "STRING",
    "TIMESTAMP WITH LOCAL TIME ZONE": "TIMESTAMP_LTZ",
    "TIMESTAMP WITHOUT TIME ZONE": "TIMESTAMP",
}
_TYPE_RE = re.compile(r"^\s*([A-Za-z_ ]+?)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*(NOT\s+NULL|NULL)?\s*$", re.I)


def parse_data_type(text: str) -> DataType:
    """Parse a Flink SQL type such as ``BIGINT``, ``DECIMAL(10,2) NOT NULL``, ``TIMESTAMP(3)``.

    Raises:
        ValueError: the text is not a supported type; the message quotes it.
    """
    m = _TYPE_RE.match(text)
    if not m:
        raise ValueError(f"unsupported data type {text!r}")
    name = " ".join(m.group(1).upper().split())
    name = _ALIASES.get(name, name)
    try:
        root = TypeRoot(name)
    except ValueError:
        raise ValueError(f"unsupported data type {text!r}") from None
    a = int(m.group(2)) if m.group(2) else None
    b = int(m.group(3)) if m.group(3) else None
    nullable = not (m.group(4) and m.group(4).upper().startswith("NOT"))
    if root is TypeRoot.DECIMAL:
        return DataType(root, nullable, precision=a if a is not None else 10, scale=b if b is not None else 0)
    if root in (TypeRoot.TIME, TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        default = 0 if root is TypeRoot.TIME else 6
        return DataType(root, nullable, precision=a if a is not None else default)
    if root in (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY):
        return DataType(root, nullable, length=a)
    return DataType(root, nullable)
