"""MariaDB GTID and XID events framed from the raw packet, without mysql-replication's objects.

A sysbench transaction in MariaDB's binlog is a ``GTID_EVENT`` (0xA2), table maps and rows
events, and an ``XID_EVENT`` (0x10). The rows events and the table maps are framed by
:mod:`.row_decoder`; these two were the library's: a ``BinLogPacketWrapper`` plus a
``BinLogEvent`` (seventeen keyword arguments, ``_get_dbms()``) for 8 or 13 bytes of body. Here
they are read as the library reads them (``MariadbGtidEvent.__init__``: ``seq_no`` uint64,
``domain_id`` uint32, ``flags`` uint8, ``gtid`` = ``"domain-server-seq"``; ``XidEvent.__init__``:
``xid`` uint64, all little-endian, after the 19-byte event header), and answer the attributes
:class:`~.event_handler.EventHandler` and ``BinLogStreamReader.fetchone`` read (``packet`` and
``event`` are the object itself; ``event_size`` is the whole event's, as the library's wrapper has
it). ``tests/integration/mysql_cdc/test_mysql_cdc_framed_events.py`` compares both framings of the
same binlog.

Only :func:`~.row_decoder.install_framer`'s wrapper calls :func:`frame_gtid_or_xid`; a packet it
returns None for is framed by the library as before.
"""

from __future__ import annotations

import struct

__all__ = ["FramedMariadbGtid", "FramedXid", "frame_gtid_or_xid", "GTID_CODE", "XID_CODE"]

#: MariaDB's GTID_EVENT and the XID_EVENT type codes (pymysqlreplication.constants.BINLOG)
GTID_CODE, XID_CODE = 0xA2, 0x10

#: after the OK byte: timestamp, type, server id, size, next pos, flags (the 19-byte event header)
_HEADER = struct.Struct("<IBIIIH")
_GTID_BODY = struct.Struct("<QIB")  # seq_no, domain_id, flags
_XID_BODY = struct.Struct("<Q")


class FramedMariadbGtid:
    """A MariaDB GTID event: ``server_id``, ``gtid_seq_no``, ``domain_id``, ``flags`` (the GTID
    event's flags byte, ``FL_STANDALONE`` 0x01 ...), ``gtid`` (``"domain-server-seq"``) and the
    header fields (``event_type``, ``timestamp`` in s, ``log_pos``, ``event_size`` in bytes)."""

    __slots__ = ("event_type", "timestamp", "log_pos", "event_size", "server_id", "gtid_seq_no", "domain_id",
                 "flags", "gtid")
    event_type: int
    timestamp: int
    log_pos: int
    event_size: int
    server_id: int
    gtid_seq_no: int
    domain_id: int
    flags: int
    gtid: str
    table_map_missing = False  # as the library's events answer getattr(ev, "table_map_missing", False)

    @property
    def packet(self) -> "FramedMariadbGtid":
        return self

    @property
    def event(self) -> "FramedMariadbGtid":
        return self


class FramedXid:
    """An XID event (the COMMIT of a transaction of XA-capable tables): ``xid`` and the header
    fields (``event_type``, ``timestamp`` in s, ``log_pos``, ``event_size`` in bytes)."""

    __slots__ = ("event_type", "timestamp", "log_pos", "event_size", "xid")
    event_type: int
    timestamp: int
    log_pos: int
    event_size: int
    xid: int
    table_map_missing = False

    @property
    def packet(self) -> "FramedXid":
        return self

    @property
    def event(self) -> "FramedXid":
        return self


def frame_gtid_or_xid(data: bytes, use_checksum: bool) -> FramedMariadbGtid | FramedXid | None:
    """The MariaDB GTID or XID event in a binlog packet (``data``: the OK byte, the 19-byte event
    header, the body, the CRC32 when ``use_checksum``), read as the library reads it; None for
    any other packet or one too short for the fields (the library then frames it)."""
    if len(data) < 20 or data[0] != 0:
        return None
    code = data[5]
    if code != GTID_CODE and code != XID_CODE:
        return None
    timestamp, _, server_id, event_size, log_pos, _ = _HEADER.unpack_from(data, 1)
    end = 1 + event_size - (4 if use_checksum else 0)
    if end > len(data):
        return None
    if code == GTID_CODE:
        if end < 20 + _GTID_BODY.size:
            return None
        seq_no, domain_id, flags = _GTID_BODY.unpack_from(data, 20)
        gtid = FramedMariadbGtid()
        gtid.event_type, gtid.timestamp, gtid.log_pos, gtid.event_size = code, timestamp, log_pos, event_size
        gtid.server_id, gtid.gtid_seq_no, gtid.domain_id, gtid.flags = server_id, seq_no, domain_id, flags
        gtid.gtid = f"{domain_id}-{server_id}-{seq_no}"
        return gtid
    if end < 20 + _XID_BODY.size:
        return None
    xid = FramedXid()
    xid.event_type, xid.timestamp, xid.log_pos, xid.event_size = code, timestamp, log_pos, event_size
    xid.xid = _XID_BODY.unpack_from(data, 20)[0]
    return xid
