"""Type mapping changelake -> Paimon -> Arrow, and the widening rules of schema evolution.

=============================  ======================  ==================================
changelake type                Paimon type             Arrow type (as pypaimon reads it)
=============================  ======================  ==================================
BOOLEAN                        BOOLEAN                 bool
TINYINT / SMALLINT             TINYINT / SMALLINT      int8 / int16
INT / BIGINT                   INT / BIGINT            int32 / int64
FLOAT / DOUBLE                 FLOAT / DOUBLE          float32 / float64
DECIMAL(p, s), p <= 38         DECIMAL(p, s)           decimal128(p, s)
DECIMAL(p, s), p > 38          STRING (plain text)     string
CHAR / VARCHAR / STRING        STRING                  string
BINARY / VARBINARY / BYTES     BYTES                   binary
DATE                           DATE                    date32
TIME(p)                        STRING                  string, ``[-]HH:mm:ss[.f]``
TIMESTAMP(p)                   TIMESTAMP(6)            timestamp[us]
TIMESTAMP_LTZ(p)               TIMESTAMP_LTZ(6)        timestamp[us, tz=UTC]
=============================  ======================  ==================================

Integer widths are kept as Flink CDC's Paimon sink keeps them. TIME, wide DECIMAL and
timestamps are stored exactly as the Iceberg sink stores them (Paimon's TIME is a time of day,
MySQL's ranges over -838:59:59..838:59:59), with the lake family's one value conversion
(:mod:`changelake.connectors.lake.arrow`, pypaimon's layout :data:`~changelake.connectors.lake.arrow.PAIMON`),
so both lakes hold the same values.
"""

from __future__ import annotations

from functools import partial

import pyarrow as pa

from changelake.changelog.types import DataType, TypeRoot, parse_data_type
from changelake.connectors.lake import arrow
from changelake.connectors.lake.arrow import decimal_precision_scale
from changelake.connectors.paimon.errors import PaimonTypeError

__all__ = ["to_paimon_type", "arrow_type_of", "to_arrow_array", "widening"]

_SIMPLE: dict[TypeRoot, str] = {
    TypeRoot.BOOLEAN: "BOOLEAN",
    TypeRoot.TINYINT: "TINYINT",
    TypeRoot.SMALLINT: "SMALLINT",
    TypeRoot.INT: "INT",
    TypeRoot.BIGINT: "BIGINT",
    TypeRoot.FLOAT: "FLOAT",
    TypeRoot.DOUBLE: "DOUBLE",
    TypeRoot.CHAR: "STRING",
    TypeRoot.VARCHAR: "STRING",
    TypeRoot.STRING: "STRING",
    TypeRoot.BINARY: "BYTES",
    TypeRoot.VARBINARY: "BYTES",
    TypeRoot.BYTES: "BYTES",
    TypeRoot.DATE: "DATE",
    TypeRoot.TIME: "STRING",
    TypeRoot.TIMESTAMP: "TIMESTAMP(6)",
    TypeRoot.TIMESTAMP_LTZ: "TIMESTAMP_LTZ(6)",
}
_INTEGER_ORDER = ("TINYINT", "SMALLINT", "INT", "BIGINT")


def to_paimon_type(data_type: DataType) -> str:
    """The Paimon type name storing ``data_type`` (see the module table), e.g. ``DECIMAL(10, 2)``.

    Nullability is not part of it.
    """
    if data_type.root is TypeRoot.DECIMAL:
        precision, scale = decimal_precision_scale(data_type)
        return "STRING" if arrow.is_text_decimal(data_type) else f"DECIMAL({precision}, {scale})"
    return _SIMPLE[data_type.root]


def _decimal(paimon_type: str) -> tuple[int, int] | None:
    if not paimon_type.startswith("DECIMAL("):
        return None
    precision, _, scale = paimon_type[len("DECIMAL("):-1].partition(",")
    return int(precision), int(scale or 0)


#: Paimon type names this sink writes (:func:`to_paimon_type`) or reads back from a table schema.
_KNOWN = frozenset({*_SIMPLE.values(), "CHAR", "VARCHAR", "BINARY", "VARBINARY", "DECIMAL"})


def arrow_type_of(paimon_type: str) -> pa.DataType:
    """The Arrow type pypaimon writes and reads for a Paimon type name of :func:`to_paimon_type`
    (the lake family's mapping, :func:`changelake.connectors.lake.arrow.to_arrow_type`, in
    pypaimon's layout).

    Raises:
        PaimonTypeError: a type this sink never creates (e.g. ``MAP<...>``).
    """
    name = paimon_type.upper().replace(" NOT NULL", "")
    if name not in _KNOWN and name.partition("(")[0] not in _KNOWN:
        raise PaimonTypeError(f"Paimon type {paimon_type!r} is not one the changelake sink writes")
    try:
        return arrow.to_arrow_type(parse_data_type(name), arrow.PAIMON)
    except (ValueError, KeyError):
        raise PaimonTypeError(f"Paimon type {paimon_type!r} is not one the changelake sink writes") from None


def widening(current: str, incoming: str) -> str:
    """How a lake column of Paimon type ``current`` takes values of ``incoming``.

    Returns ``same``, ``widen`` (the lake column must widen to ``incoming``), ``keep`` (incoming
    fits the lake column as it is) or ``bad`` (no lossless way). Widenings are those Paimon's
    ``ALTER TABLE ... MODIFY`` performs without loss: integer widths up, FLOAT -> DOUBLE, DECIMAL
    precision up with the same scale.
    """
    if current == incoming:
        return "same"
    if current in _INTEGER_ORDER and incoming in _INTEGER_ORDER:
        return "widen" if _INTEGER_ORDER.index(incoming) > _INTEGER_ORDER.index(current) else "keep"
    if (current, incoming) == ("FLOAT", "DOUBLE"):
        return "widen"
    if (current, incoming) == ("DOUBLE", "FLOAT"):
        return "keep"
    old, new = _decimal(current), _decimal(incoming)
    if old is not None and new is not None and old[1] == new[1]:
        return "widen" if new[0] > old[0] else "keep"
    return "bad"


#: :func:`changelake.connectors.lake.arrow.to_arrow_array` raising PaimonTypeError (a value does not fit:
#: overflow, DECIMAL scale loss, wrong Python type; names table and column).
to_arrow_array = partial(arrow.to_arrow_array, error=PaimonTypeError, lake="Paimon ")
