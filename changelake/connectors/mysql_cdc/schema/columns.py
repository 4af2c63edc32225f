"""MySQL column descriptions and their changelake DataType, shared by the snapshot and binlog paths.

A :class:`MySqlColumn` is built either from ``information_schema.COLUMNS`` (snapshot path, see
:func:`column_from_information_schema`) or from a binlog table-map event with FULL metadata
(binlog path, :mod:`changelake.connectors.mysql_cdc.schema.tracker`). Both feed the same
:func:`to_data_type`, which maps types as Flink CDC's MySQL pipeline connector does
(``MySqlTypeUtils``): DATETIME -> TIMESTAMP(p), TIMESTAMP -> TIMESTAMP_LTZ(p), BIGINT UNSIGNED ->
DECIMAL(20, 0), other unsigned integers widened, TINYINT(1) and BIT(1) -> BOOLEAN, BIT(n) ->
BINARY(ceil(n/8)), YEAR -> INT, JSON/ENUM/SET/GEOMETRY -> STRING, DECIMAL(p > 38) -> STRING,
character types -> STRING, binary types -> BYTES.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from changelake.changelog.types import DataType, TypeRoot

__all__ = ["MySqlColumn", "to_data_type", "column_from_information_schema", "parse_labels", "INTEGER_BITS"]

#: integer kinds -> storage width in bits (to undo a signed read of an unsigned value).
INTEGER_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
_BLOB = {"tinyblob", "blob", "mediumblob", "longblob"}
_GEOMETRY = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection", "geomcollection"}


@dataclass(frozen=True)
class MySqlColumn:
    """One MySQL column, normalised.

    Attributes:
        name: column name.
        kind: lower-case MySQL type family: tinyint, smallint, mediumint, int, bigint, decimal,
            float, double, bit, year, date, time, datetime, timestamp, char, varchar, text,
            binary, varbinary, blob, enum, set, json, geometry.
        unsigned: UNSIGNED integer/decimal.
        nullable: NULL allowed.
        width: display width of an integer type (TINYINT(1) -> 1), when known.
        precision: DECIMAL digits; fractional-second digits of TIME/DATETIME/TIMESTAMP; BIT bits.
        scale: DECIMAL fraction digits.
        length: BINARY(N) length in bytes (for 0x00 right padding).
        charset: MySQL character set name of a text column (``utf8mb4``, ``latin1``...).
        labels: ENUM / SET labels in definition order.
        comment: the column comment (only with ``include-comments.enabled``).
    """

    name: str
    kind: str
    unsigned: bool = False
    nullable: bool = True
    width: int | None = None
    precision: int | None = None
    scale: int | None = None
    length: int | None = None
    charset: str | None = None
    labels: tuple[str, ...] = ()
    comment: str | None = None


def to_data_type(col: MySqlColumn) -> DataType:
    """The changelake DataType of ``col`` (Flink CDC's MySQL type mapping; see module doc)."""
    n = col.nullable
    k = col.kind
    if k == "tinyint":
        if col.width == 1 and not col.unsigned:
            return DataType(TypeRoot.BOOLEAN, n)
        return DataType(TypeRoot.SMALLINT if col.unsigned else TypeRoot.TINYINT, n)
    if k == "smallint":
        return DataType(TypeRoot.INT if col.unsigned else TypeRoot.SMALLINT, n)
    if k == "mediumint":
        return DataType(TypeRoot.INT, n)
    if k == "int":
        return DataType(TypeRoot.BIGINT if col.unsigned else TypeRoot.INT, n)
    if k == "bigint":
        return DataType.decimal(20, 0, n) if col.unsigned else DataType(TypeRoot.BIGINT, n)
    if k == "decimal":
        p, s = col.precision or 10, col.scale or 0
        return DataType.decimal(p, s, n) if p <= 38 else DataType(TypeRoot.STRING, n)
    if k == "float":
        return DataType(TypeRoot.FLOAT, n)
    if k == "double":
        return DataType(TypeRoot.DOUBLE, n)
    if k == "bit":
        bits = col.precision or 1
        return DataType(TypeRoot.BOOLEAN, n) if bits == 1 else DataType(TypeRoot.BINARY, n, length=(bits + 7) // 8)
    if k == "year":
        return DataType(TypeRoot.INT, n)
    if k == "date":
        return DataType(TypeRoot.DATE, n)
    if k == "time":
        return DataType(TypeRoot.TIME, n, precision=col.precision or 0)
    if k == "datetime":
        return DataType(TypeRoot.TIMESTAMP, n, precision=col.precision or 0)
    if k == "timestamp":
        return DataType(TypeRoot.TIMESTAMP_LTZ, n, precision=col.precision or 0)
    if k in ("binary", "varbinary", "blob"):
        return DataType(TypeRoot.BYTES, n)
    return DataType(TypeRoot.STRING, n)  # char, varchar, text, enum, set, json, geometry


_LABEL = re.compile(r"'((?:[^']|'')*)'")


def parse_labels(column_type: str) -> tuple[str, ...]:
    """ENUM/SET labels of an information_schema COLUMN_TYPE such as ``enum('a','it''s')``."""
    inner = column_type[column_type.find("(") + 1 : column_type.rfind(")")]
    return tuple(m.group(1).replace("''", "'") for m in _LABEL.finditer(inner))


def _kind_of(data_type: str) -> str:
    dt = data_type.lower()
    if dt in ("integer",):
        return "int"
    if dt in ("numeric", "dec", "fixed"):
        return "decimal"
    if dt in ("real", "double precision"):
        return "double"
    if dt in _TEXT and dt not in ("char", "varchar"):
        return "text"
    if dt in _BLOB:
        return "blob"
    if dt in _GEOMETRY:
        return "geometry"
    return dt


def column_from_information_schema(row: Mapping[str, Any], primary_key: bool = False) -> MySqlColumn:
    """Build a column from an ``information_schema.COLUMNS`` row.

    Args:
        row: mapping with COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION,
            NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME (upper-case keys).
        primary_key: True for a primary-key column (always NOT NULL).
    """
    ctype = str(row["COLUMN_TYPE"]).lower()
    kind = _kind_of(str(row["DATA_TYPE"]))
    if kind == "longtext" or (kind == "text" and "json" in ctype):
        kind = "text"
    if ctype.startswith("json"):
        kind = "json"
    m = re.match(r"^\w+\s*\((\d+)(?:\s*,\s*(\d+))?\)", ctype)
    a = int(m.group(1)) if m else None
    b = int(m.group(2)) if m and m.group(2) else None
    col: dict[str, Any] = {
        "name": str(row["COLUMN_NAME"]),
        "kind": kind,
        "unsigned": " unsigned" in ctype,
        "nullable": str(row["IS_NULLABLE"]).upper() == "YES" and not primary_key,
    }
    if kind in INTEGER_BITS:
        col["width"] = a
    elif kind == "decimal":
        col["precision"] = a if a is not None else 10
        col["scale"] = b if b is not None else 0
    elif kind == "bit":
        col["precision"] = a if a is not None else 1
    elif kind in ("time", "datetime", "timestamp"):
        dp = row.get("DATETIME_PRECISION")
        col["precision"] = int(dp) if dp is not None else (a or 0)
    elif kind == "binary":
        col["length"] = a if a is not None else 1
    elif kind in ("enum", "set"):
        col["labels"] = parse_labels(str(row["COLUMN_TYPE"]))
    if row.get("CHARACTER_SET_NAME"):
        col["charset"] = str(row["CHARACTER_SET_NAME"])
    return MySqlColumn(**col)
