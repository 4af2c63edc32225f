"""Fixes of two mysql-replication (pymysqlreplication 1.0.x) decoding defects, applied once.

Items 1-2 and 6 concern the library's reading of rows, which production no longer uses (the
compiled :mod:`.row_decoder` reads every rows event): they keep the library a faithful *test
oracle* (``values.library_rows``), and item 2's codecs are also the ones the decoder picks for a
table map's charsets. Items 3-5 and 7 frame the events the reader sees.

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

One cost is removed: the library parses every ``TABLE_MAP_EVENT`` in full (columns and FULL
optional metadata) although a table's map repeats unchanged before each rows event.

5. ``TableMapEvent.__init__`` is wrapped with a cache keyed by the event's body bytes (table id,
   names, column types and metadata, null bitmap, optional metadata): an identical body reuses the
   attributes parsed the first time (the library's ``Table`` object included) instead of parsing
   again; the event gets ``cache_key`` (those bytes) so that the schema tracker can cache by it too.
   A different body (new table id after DDL, other metadata) is parsed normally.

6. ``RowsEvent.__init__`` (about a quarter of the reader's time: a dozen keyword lookups, the
   ``Table.data`` dict built per event for the primary key, the filters) is replaced for
   WRITE/UPDATE/DELETE_ROWS_EVENT V1 and V2 by subclasses whose ``__init__`` reads the same header
   fields (table id, flags, V2 extra data, column count, column bitmaps) and sets the library's
   private state, so that the library can still read the rows (``rows``: the test oracle);
   production reads them with :mod:`.row_decoder`. They keep the wrapped behaviour of item 4. With a
   table/schema filter given to the stream reader (the reader gives none) the library's own
   ``__init__`` runs.

7. Rows events of tables that have a compiled decoder are not framed by the library at all:
   :func:`~.row_decoder.install_framer` puts :func:`~.row_decoder.frame_rows` in front of the
   library's packet framing, which reads the header, the column bitmaps and the span of the row
   images from the raw packet (no per-event library object); any packet it does not read exactly
   is framed by the library as before. A table map whose body bytes are in the cache of item 5
   is framed the same way (:class:`~.row_decoder.FramedTableMap`), and so are MariaDB's GTID and
   XID events (:mod:`.framed_events`). The binlog reader installs it
   (after :func:`apply`) and asks for its classes in ``only_events``; a stream reader that does
   not ask for them is framed by the library alone.

All are patched on the library's classes (there is no hook to give the stream reader other event
classes); :func:`apply` is idempotent and called by the binlog reader; :func:`event_classes` is
the set of classes to pass as ``only_events`` so that every event reaches the reader.
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

from changelake.connectors.mysql_cdc.binlog.compression import uncompress
from changelake.connectors.mysql_cdc.values import python_codec

__all__ = ["apply", "cached_table_map", "decode_time2", "event_classes", "fast_rows_classes", "FRACTION_BYTES"]

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


#: table-map body bytes -> attributes parsed from it (bounded: cleared past _TABLE_MAP_CACHE_MAX).
_table_maps: dict[bytes, dict[str, Any]] = {}
_TABLE_MAP_CACHE_MAX = 4096


def _cache_table_maps(cls: Any) -> None:
    """Wrap ``TableMapEvent.__init__`` with the body-bytes cache (see module doc, item 5)."""
    from pymysqlreplication.event import BinLogEvent

    original = cls.__init__
    if getattr(original, "_changelake_wrapped", False):
        return

    def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any, ctl_connection: Any, **kwargs: Any) -> None:
        raw = getattr(from_packet, "packet", None)
        data, position = getattr(raw, "_data", None), getattr(raw, "_position", None)
        if data is None or position is None or bool(getattr(from_packet, "_BinLogPacketWrapper__data_buffer", None)):
            original(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
            self.cache_key = None
            return
        key = bytes(data[position:position + event_size])
        cached = _table_maps.get(key)
        if cached is None:
            original(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
            self.cache_key = key
            if self._processed:
                if len(_table_maps) >= _TABLE_MAP_CACHE_MAX:
                    _table_maps.clear()
                base = set(_BASE_KEYS)
                _table_maps[key] = {k: v for k, v in self.__dict__.items() if k not in base}
            return
        BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        self.__dict__.update(cached)
        self.cache_key = key
        table_map[self.table_id] = self.table_obj

    setattr(__init__, "_changelake_wrapped", True)
    cls.__init__ = __init__


def cached_table_map(key: bytes) -> dict[str, Any] | None:
    """The attributes parsed from a table-map body (item 5), or None when not parsed yet."""
    return _table_maps.get(key)


#: attributes BinLogEvent.__init__ sets per event (not taken from the cache).
_BASE_KEYS = ("packet", "table_map", "event_type", "timestamp", "event_size", "_post_header_lengths", "_ctl_connection",
              "mysql_version", "_ignore_decode_errors", "_verify_checksum", "_is_event_valid", "_processed", "complete",
              "dbms", "cache_key")


_fast_rows: dict[type, int] = {}


def _fast_rows_event_classes() -> dict[int, type]:
    """The lean rows-event subclasses of item 6, by event type code."""
    from pymysqlreplication.event import BinLogEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    def make(base: Any, bitmaps: int) -> type:
        library_init = base.__init__  # _keep_unmapped's wrapper of the library's __init__

        def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any, ctl_connection: Any,
                     **kwargs: Any) -> None:
            if (kwargs.get("only_tables") is not None or kwargs.get("ignored_tables") is not None
                    or kwargs.get("only_schemas") is not None or kwargs.get("ignored_schemas") is not None):
                library_init(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
                return
            BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
            # RowsEvent's private state, read by its rows / _read_column_data
            self._RowsEvent__rows = None
            self._RowsEvent__only_tables = self._RowsEvent__ignored_tables = None
            self._RowsEvent__only_schemas = self._RowsEvent__ignored_schemas = None
            self._RowsEvent__use_column_name_cache = kwargs.get("use_column_name_cache", False)
            self._RowsEvent__enable_logging = kwargs.get("enable_logging", False)
            self._RowsEvent__none_sources = {}
            self.table_map_missing = False
            packet = self.packet
            self.table_id = table_id = int.from_bytes(packet.read(6), "little")
            table = table_map.get(table_id)
            if table is None:  # item 4: kept, flagged; the reader refuses it
                self.table_map_missing = True
                return
            self.primary_key = table.primary_key
            self.schema = table.schema
            self.table = table.table
            if self.event_type in (0x1E, 0x1F, 0x20):  # V2: flags, extra data (RowsEvent.__init__)
                self.flags, self.extra_data_length = struct.unpack("<HH", packet.read(4))
                self._advance_to_payload(10)
                if self.extra_data_length > 2:
                    self.extra_data_type = packet.read(1)[0]
                    if self.extra_data_type == 0:
                        self.nbd_info_length, self.nbd_info_format = struct.unpack("<BB", packet.read(2))
                        self.nbd_info = packet.read(self.nbd_info_length - 2)
                    elif self.extra_data_type == 1:
                        if self.event_type == 0x1F:
                            self.partition_id, self.source_partition_id = struct.unpack("<HH", packet.read(4))
                        else:
                            self.partition_id = struct.unpack("<H", packet.read(2))[0]
                    else:
                        self.extra_data = packet.read(self.extra_data_length - 3)
            else:
                self.flags = struct.unpack("<H", packet.read(2))[0]
                self._advance_to_payload(8)
            self.number_of_columns = n = packet.read_length_coded_binary()
            self.columns = table.columns
            size = (n + 7) // 8
            self.columns_present_bitmap = packet.read(size)
            if bitmaps == 2:
                self.columns_present_bitmap2 = packet.read(size)

        setattr(__init__, "_changelake_wrapped", True)
        return type(base.__name__, (base,), {"__init__": __init__, "__module__": __name__,
                                             "__doc__": f"{base.__name__} with the lean __init__ (module doc, item 6)."})

    write, update, delete = make(WriteRowsEvent, 1), make(UpdateRowsEvent, 2), make(DeleteRowsEvent, 1)
    _fast_rows.update({write: 1, update: 2, delete: 1})
    return {0x17: write, 0x18: update, 0x19: delete, 0x1E: write, 0x1F: update, 0x20: delete}


def fast_rows_classes() -> dict[type, int]:
    """The lean rows-event classes (item 6) -> row images per row (1, or 2 for updates)."""
    apply()
    return _fast_rows


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
    from pymysqlreplication.row_event import DeleteRowsEvent, RowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

    _cache_table_maps(TableMapEvent)
    setattr(RowsEvent, "_RowsEvent__read_time2", _read_time2)
    RowsEvent.charset_to_encoding = staticmethod(_charset_to_encoding)
    event_map: dict[int, type] = getattr(BinLogPacketWrapper, _MAP_ATTR)
    event_map.update(_compressed_classes())
    for cls in (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent):
        _keep_unmapped(cls)
    event_map.update(_fast_rows_event_classes())
    _event_classes = frozenset(event_map.values()) | {NotImplementedEvent}
    _applied = True
