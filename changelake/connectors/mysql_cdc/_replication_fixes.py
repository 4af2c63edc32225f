"""Fixes of two mysql-replication (pymysqlreplication 1.0.x) decoding defects, applied once.

1. ``TIME(fsp)`` (binlog type TIME2) with a fractional part and a negative value: the library takes
   the two's complement of the integer part only and reads the fraction as a *signed* big-endian
   number, so e.g. ``-00:00:01.5`` decodes wrongly for some precisions. MySQL stores the whole
   value (integer part and fraction together) as one big-endian number offset by
   ``0x800000 << (8 * fraction_bytes)`` (``my_time_packed_from_binary`` in MySQL's
   ``mysys/my_time.cc``); :func:`decode_time2` decodes it that way.
2. Column charsets are turned into Python codecs with the wrong byte order for ``utf16``,
   ``ucs2`` and ``utf32`` (MySQL's are big-endian) and none for some charsets; the library's
   ``charset_to_encoding`` is replaced by :func:`changelake.connectors.mysql_cdc.values.python_codec`.

Both are patched on the library's ``RowsEvent`` class (there is no hook to give the stream reader
other event classes); :func:`apply` is idempotent and called by the binlog reader.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from changelake.connectors.mysql_cdc.values import python_codec

__all__ = ["apply", "decode_time2", "FRACTION_BYTES"]

#: fractional-second digits -> bytes of the fraction in TIME2/DATETIME2/TIMESTAMP2.
FRACTION_BYTES = {0: 0, 1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3}
_applied = False


def decode_time2(data: bytes, fsp: int) -> dt.timedelta:
    """Decode MySQL's TIME2 binary form (3 bytes + fraction bytes, big-endian) to a timedelta.

    Args:
        data: the ``3 + FRACTION_BYTES[fsp]`` bytes of the value.
        fsp: fractional-second precision of the column (0..6).
    """
    nfrac = FRACTION_BYTES[fsp]
    raw = int.from_bytes(data[: 3 + nfrac], "big")
    value = raw - (0x800000 << (8 * nfrac))  # signed packed value
    negative = value < 0
    value = -value if negative else value
    intpart = value >> (8 * nfrac)
    frac = value & ((1 << (8 * nfrac)) - 1)
    hours = (intpart >> 12) & 0x3FF
    minutes = (intpart >> 6) & 0x3F
    seconds = intpart & 0x3F
    # fraction unit: 1/100 s (1 byte), 1/10000 s (2 bytes), microseconds (3 bytes)
    micros = frac * {0: 0, 1: 10000, 2: 100, 3: 1}[nfrac]
    delta = dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micros)
    return -delta if negative else delta


def _read_time2(self: Any, column: Any) -> dt.timedelta:
    fsp = int(getattr(column, "fsp", 0) or 0)
    return decode_time2(self.packet.read(3 + FRACTION_BYTES[fsp]), fsp)


def _charset_to_encoding(name: str) -> str:
    if name == "binary":
        return "binary"  # not a codec: the library keeps the bytes (BINARY, VARBINARY, BLOB)
    return python_codec(_MYSQL_NAMES.get(name, name))


# mysql-replication stores the *Python-ish* encoding name from its own charset table in
# column.character_set_name ("utf8" for utf8mb4, "cp1252" for latin1, otherwise the MySQL name).
_MYSQL_NAMES = {"utf8": "utf8mb4", "cp1252": "latin1"}


def apply() -> None:
    """Patch mysql-replication's RowsEvent (idempotent)."""
    global _applied
    if _applied:
        return
    from pymysqlreplication.row_event import RowsEvent

    setattr(RowsEvent, "_RowsEvent__read_time2", _read_time2)
    RowsEvent.charset_to_encoding = staticmethod(_charset_to_encoding)
    _applied = True
