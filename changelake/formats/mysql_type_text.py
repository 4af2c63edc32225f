"""MySQL column type text (canal-json's ``mysqlType``) -> changelake DataType.

Canal's FlatMessage carries ``mysqlType``: column -> the type text of the table definition, e.g.
``int unsigned``, ``decimal(10,2)``, ``enum('new','paid')``, ``datetime(3)``. The mapping is the
one the MySQL CDC source uses (and :mod:`changelake.connectors.iceberg.types` stores):

=====================================  ==============================================
MySQL                                  changelake type
=====================================  ==============================================
TINYINT(1), BIT(1), BOOL(EAN)          BOOLEAN
TINYINT / SMALLINT / MEDIUMINT / INT   TINYINT / SMALLINT / INT / INT (unsigned: one wider)
BIGINT                                 BIGINT (unsigned: DECIMAL(20, 0))
DECIMAL(p,s) / NUMERIC                 DECIMAL(p, s) (default (10, 0))
FLOAT / DOUBLE / REAL                  FLOAT / DOUBLE
CHAR(n) / VARCHAR(n)                   CHAR(n) / VARCHAR(n)
TEXT family, ENUM, SET, JSON, others   STRING
BINARY(n) / VARBINARY(n)               BINARY(n) / VARBINARY(n)
BLOB family, BIT(n > 1)                BYTES
DATE / YEAR                            DATE / INT
TIME(p) / DATETIME(p) / TIMESTAMP(p)   TIME(p) / TIMESTAMP(p) / TIMESTAMP_LTZ(p)
=====================================  ==============================================
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from changelake.changelog.schema import Column, Schema
from changelake.changelog.types import DataType, TypeRoot

__all__ = ["data_type_of_mysql", "schema_of_mysql_types"]

_TYPE_RE = re.compile(r"^\s*([a-z ]+?)\s*(?:\(([^)]*)\))?\s*((?:unsigned|signed|zerofill|\s)*)\s*$")
_SIGNED = {"tinyint": TypeRoot.TINYINT, "smallint": TypeRoot.SMALLINT, "mediumint": TypeRoot.INT,
           "int": TypeRoot.INT, "integer": TypeRoot.INT, "bigint": TypeRoot.BIGINT}
_UNSIGNED = {"tinyint": TypeRoot.SMALLINT, "smallint": TypeRoot.INT, "mediumint": TypeRoot.INT,
             "int": TypeRoot.BIGINT, "integer": TypeRoot.BIGINT}


def _ints(args: str | None) -> list[int]:
    return [int(a) for a in (args or "").split(",") if a.strip().isdigit()]


def data_type_of_mysql(text: str) -> DataType:
    """The changelake type of a MySQL column type text (see the module table); nullable.

    Unknown or unparsable texts (``geometry``, ``enum('a,b')``...) map to STRING, as the MySQL
    CDC source does for types it has no closer match for.
    """
    low = text.strip().lower()
    if low.startswith(("enum", "set")):
        return DataType(TypeRoot.STRING)
    m = _TYPE_RE.match(low)
    if not m:
        return DataType(TypeRoot.STRING)
    kind, args, flags = m.group(1).strip(), m.group(2), m.group(3) or ""
    unsigned = "unsigned" in flags or "zerofill" in flags
    nums = _ints(args)
    if kind in ("bool", "boolean") or (kind == "tinyint" and nums == [1] and not unsigned):
        return DataType(TypeRoot.BOOLEAN)
    if kind == "bigint" and unsigned:
        return DataType.decimal(20, 0)
    if kind in _SIGNED:
        return DataType((_UNSIGNED if unsigned else _SIGNED)[kind])
    if kind in ("decimal", "numeric", "dec", "fixed"):
        return DataType.decimal(nums[0] if nums else 10, nums[1] if len(nums) > 1 else 0)
    if kind == "float":
        return DataType(TypeRoot.FLOAT)
    if kind in ("double", "real", "double precision"):
        return DataType(TypeRoot.DOUBLE)
    if kind == "bit":
        return DataType(TypeRoot.BOOLEAN) if not nums or nums == [1] else DataType(TypeRoot.BYTES)
    if kind in ("char", "varchar") and nums:
        return DataType(TypeRoot.CHAR if kind == "char" else TypeRoot.VARCHAR, length=nums[0])
    if kind in ("binary", "varbinary") and nums:
        return DataType(TypeRoot.BINARY if kind == "binary" else TypeRoot.VARBINARY, length=nums[0])
    if kind in ("tinyblob", "blob", "mediumblob", "longblob"):
        return DataType(TypeRoot.BYTES)
    if kind == "date":
        return DataType(TypeRoot.DATE)
    if kind == "year":
        return DataType(TypeRoot.INT)
    precision = nums[0] if nums else 0
    if kind == "time":
        return DataType(TypeRoot.TIME, precision=precision)
    if kind == "datetime":
        return DataType(TypeRoot.TIMESTAMP, precision=precision)
    if kind == "timestamp":
        return DataType(TypeRoot.TIMESTAMP_LTZ, precision=precision)
    return DataType(TypeRoot.STRING)


def schema_of_mysql_types(mysql_types: Mapping[str, Any], pk_names: Sequence[str] | None) -> Schema:
    """The schema of a canal-json message from its ``mysqlType`` map (column order kept) and
    ``pkNames`` (key columns NOT NULL; names missing from the map are ignored)."""
    columns = [Column(str(name), data_type_of_mysql(str(text))) for name, text in mysql_types.items()]
    schema = Schema(tuple(columns))
    keys = [k for k in (pk_names or []) if k in schema]
    return schema.with_primary_key(keys) if keys else schema
