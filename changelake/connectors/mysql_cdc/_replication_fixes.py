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

Two gaps are filled, so that no event of a captured table is skipped silently:

3. MariaDB's compressed events (``log_bin_compress=ON``: ``QUERY_COMPRESSED_EVENT`` and
   ``WRITE/UPDATE/DELETE_ROWS_COMPRESSED_EVENT_V1``) are unknown to the library, which turns them
   into ``NotImplementedEvent`` (and a reader that filters those never sees them). Subclasses of
   the library's query / rows events uncompress the payload (:mod:`.compression`) and are added
   to the library's event-type map.
4. A rows event whose table-map event was not seen is dropped by the library (``_processed``
   False). The rows event classes are wrapped so that such an event is kept and flagged
   ``table_map_missing = True``; the reader stops on it.

All are patched on the library's classes (there is no hook to give the stream reader other event
classes); :func:`apply` is idempotent and called by the binlog reader; :func:`event_classes` is
the set of classes to pass as ``only_events`` so that every event reaches the reader.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from changelake.connectors.mysql_cdc.compression import uncompress
from changelake.connectors.mysql_cdc.values import python_codec

__all__ = ["apply", "decode_time2", "event_classes", "FRACTION_BYTES"]

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


_MAP_ATTR = "_BinLogPacketWrapper__event_map"
_event_classes: frozenset[type] = frozenset()


def _keep_unmapped(cls: Any) -> None:
    """Wrap ``cls.__init__`` so that a rows event without its table map is kept and flagged."""
    original = cls.__init__
    if getattr(original, "_changelake_wrapped", False):
        return

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        self.table_map_missing = False
        original(self, *args, **kwargs)
        if not self._processed:
            self.table_map_missing = True
            self._processed = True

    setattr(__init__, "_changelake_wrapped", True)
    cls.__init__ = __init__


def _uncompress_rows(event: Any) -> None:
    """Replace the compressed row data still unread in ``event.packet`` by the uncompressed bytes."""
    if getattr(event, "table_map_missing", False) or not event._processed:
        return
    remaining = int(event.event_size) - int(event.packet.read_bytes)
    raw = event.packet.read(remaining)
    event.packet.unread(uncompress(raw))


def _compressed_classes() -> dict[int, type]:
    from pymysqlreplication.event import QueryEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    class CompressedQueryEvent(QueryEvent):  # type: ignore[misc]
        """MariaDB QUERY_COMPRESSED_EVENT: a query event whose text is zlib-compressed."""

        def __init__(self, from_packet: Any, *args: Any, **kwargs: Any) -> None:
            reads: list[bytes] = []
            original_read = from_packet.read

            def recording_read(size: Any) -> bytes:
                data: bytes = original_read(size)
                reads.append(data)
                return data

            from_packet.read = recording_read  # the query text is the last read of QueryEvent.__init__
            try:
                super().__init__(from_packet, *args, **kwargs)
            finally:
                del from_packet.read
            self.query = uncompress(reads[-1]).decode("utf-8", errors="backslashreplace")

    class CompressedWriteRowsEvent(WriteRowsEvent):  # type: ignore[misc]
        """MariaDB WRITE_ROWS_COMPRESSED_EVENT_V1."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            _uncompress_rows(self)

    class CompressedUpdateRowsEvent(UpdateRowsEvent):  # type: ignore[misc]
        """MariaDB UPDATE_ROWS_COMPRESSED_EVENT_V1."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            _uncompress_rows(self)

    class CompressedDeleteRowsEvent(DeleteRowsEvent):  # type: ignore[misc]
        """MariaDB DELETE_ROWS_COMPRESSED_EVENT_V1."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            _uncompress_rows(self)

    return {0xA5: CompressedQueryEvent, 0xA6: CompressedWriteRowsEvent, 0xA7: CompressedUpdateRowsEvent,
            0xA8: CompressedDeleteRowsEvent}


def event_classes() -> frozenset[type]:
    """Every event class the library can build (after :func:`apply`), incl. NotImplementedEvent."""
    apply()
    return _event_classes


def apply() -> None:
    """Patch mysql-replication's classes and event map (idempotent)."""
    global _applied, _event_classes
    if _applied:
        return
    from pymysqlreplication.event import NotImplementedEvent
    from pymysqlreplication.packet import BinLogPacketWrapper
    from pymysqlreplication.row_event import DeleteRowsEvent, RowsEvent, UpdateRowsEvent, WriteRowsEvent

    setattr(RowsEvent, "_RowsEvent__read_time2", _read_time2)
    RowsEvent.charset_to_encoding = staticmethod(_charset_to_encoding)
    event_map: dict[int, type] = getattr(BinLogPacketWrapper, _MAP_ATTR)
    event_map.update(_compressed_classes())
    for cls in (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent):
        _keep_unmapped(cls)
    _event_classes = frozenset(event_map.values()) | {NotImplementedEvent}
    _applied = True
