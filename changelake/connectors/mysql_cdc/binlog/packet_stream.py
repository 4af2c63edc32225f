"""The binlog stream's events read from the socket in chunks, instead of one
``BinLogStreamReader.fetchone`` (and PyMySQL ``_read_packet``) per packet.

After mysql-replication has connected and framed the first event (the stream reader's own
``fetchone``: register as a replica, heartbeat, ``COM_BINLOG_DUMP``), :func:`events` reads the
stream connection's bytes itself, up to ``chunk`` bytes per read from PyMySQL's buffered socket
file (``read1``: what is buffered, else one ``recv``), and splits them into MySQL packets as
PyMySQL's ``Connection._read_packet`` does (3-byte little-endian length and a sequence number
checked against the expected one; a payload of 2^24-1 bytes continues in the next packet; an
error packet raises PyMySQL's error; a broken or silent connection raises PyMySQL's
``OperationalError`` 2013, *Lost connection*). Each OK packet is then what ``fetchone`` makes of
it: rows events, table maps, MariaDB GTID and XID events framed by
:func:`~.row_decoder.frame_packet` (the install_framer framing), every other packet by the
library's ``BinLogPacketWrapper`` with ``fetchone``'s own bookkeeping (``log_pos`` and
``log_file`` of rotate events, the table map reset on a rotate with a timestamp, the format
description's server version and post-header lengths, the library's table maps); an EOF packet
closes the stream and ends the iteration, as ``fetchone`` returns None.

Before it would block on the socket (no whole packet left in what was read) it calls ``idle()``:
the reader hands its buffered items to the consumer there, so that batching never holds an item
back while the server has nothing more to send.

Only for a stream reader that the binlog reader made (``only_events`` with the framed classes, no
table/schema filter, no ``end_log_pos`` or ``skip_to_timestamp``, no checksum verification);
any other falls back to the library's own iteration (with ``idle()`` before each event).
``tests/integration/mysql_cdc/test_mysql_cdc_packet_stream.py`` compares both readings of one
binlog event by event.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from changelake.connectors.mysql_cdc.binlog import row_decoder

__all__ = ["events"]

#: PyMySQL's MAX_PACKET_LEN: a payload of this many bytes continues in the next packet
_MAX_PACKET = 0xFFFFFF
_ROTATE, _FORMAT_DESCRIPTION, _TABLE_MAP = 0x04, 0x0F, 0x13
_PREFIX = "_BinLogStreamReader__"


def _private(stream: Any, name: str) -> Any:
    try:
        return getattr(stream, _PREFIX + name)
    except AttributeError:
        raise RuntimeError(f"mysql-replication's BinLogStreamReader has no {name!r}: packet_stream reads "
                           f"the attributes of pymysqlreplication 1.0.x") from None


def _fast_path(stream: Any) -> bool:
    """True when :func:`events` may read this stream reader's packets itself."""
    allowed = _private(stream, "allowed_events")
    return (row_decoder.framing_enabled and row_decoder._library_wrapper is not None
            and row_decoder.FramedWriteRows in allowed
            and _private(stream, "only_tables") is None and _private(stream, "ignored_tables") is None
            and _private(stream, "only_schemas") is None and _private(stream, "ignored_schemas") is None
            and not _private(stream, "verify_checksum") and not stream.end_log_pos and not stream.skip_to_timestamp)


def events(stream: Any, idle: Callable[[], None], chunk: int = 1 << 18) -> Iterator[Any]:
    """The events of a ``BinLogStreamReader`` (as iterating it yields them), ``idle()`` called
    before each read that may block.

    Raises:
        pymysql.err.OperationalError: 2013 when the connection breaks, ends or stays silent past
            its read timeout (the socket error is the cause), or the server's error packet.
        pymysql.err.InternalError: a packet out of sequence.
    """
    import pymysql
    from pymysql.protocol import MysqlPacket

    idle()
    first = stream.fetchone()  # the library connects and frames the first event
    if first is None:
        return
    yield first
    if not _fast_path(stream):
        while True:
            idle()
            ev = stream.fetchone()
            if ev is None:
                return
            yield ev
    conn = stream._stream_connection
    rfile = conn._rfile
    encoding = conn.encoding
    library = row_decoder._library_wrapper
    frame_packet = row_decoder.frame_packet
    framed_kinds = row_decoder.FRAMED_CODES
    framed_rows = row_decoder.FramedRows
    allowed = _private(stream, "allowed_events")
    use_checksum = bool(_private(stream, "use_checksum"))

    def library_args() -> tuple[Any, ...]:  # fetchone's arguments after the packet and the table map
        return (stream._ctl_connection, stream.mysql_version, _private(stream, "use_checksum"),
                _private(stream, "allowed_events_in_packet"), _private(stream, "only_tables"),
                _private(stream, "ignored_tables"), _private(stream, "only_schemas"),
                _private(stream, "ignored_schemas"), _private(stream, "freeze_schema"),
                _private(stream, "ignore_decode_errors"), _private(stream, "verify_checksum"),
                _private(stream, "optional_meta_data"), _private(stream, "enable_logging"),
                _private(stream, "use_column_name_cache"), _private(stream, "post_header_lengths"))

    args = library_args()
    post_header_lengths = args[14]
    table_map = stream.table_map
    seq = conn._next_seq_id
    buf, pos = b"", 0
    parts: list[bytes] = []  # a payload of 2^24-1 bytes and more, until its last packet
    while True:
        n = len(buf)
        if pos + 4 <= n:
            length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
            end = pos + 4 + length
        else:
            length, end = -1, -1
        if end < 0 or end > n:  # no whole packet left: read more
            buf, pos = buf[pos:], 0
            idle()
            want = end - n if end > n and end - n > chunk else chunk
            try:
                more = rfile.read(want) if want > chunk else rfile.read1(want)
            except OSError as exc:
                conn._force_close()
                raise pymysql.err.OperationalError(2013, f"Lost connection to MySQL server during query ({exc})") from exc
            if not more:
                conn._force_close()
                raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
            buf = buf + more if buf else more
            continue
        if buf[pos + 3] != seq:
            got = buf[pos + 3]
            conn._force_close()
            if got == 0:  # MariaDB sends an error packet with sequence 0 when it shuts down
                raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
            raise pymysql.err.InternalError(f"Packet sequence number wrong - got {got} expected {seq}")
        seq = (seq + 1) % 256
        data = buf[pos + 4:end]
        pos = end
        if length == _MAX_PACKET:
            parts.append(data)
            continue
        if parts:
            parts.append(data)
            data = b"".join(parts)
            parts = []
        conn._next_seq_id = seq
        head = data[0] if data else -1
        if head == 0xFF:
            MysqlPacket(data, encoding).raise_for_error()
        if head == 0xFE and len(data) < 9:  # EOF: the server ended the stream (fetchone returns None)
            stream.close()
            return
        if head != 0 or len(data) < 7:
            continue  # not an OK packet (fetchone skips it)
        code = data[5]
        if code in framed_kinds:
            ev = frame_packet(data, table_map, use_checksum, post_header_lengths)
            if ev is not None:
                if ev.log_pos:
                    stream.log_pos = ev.log_pos
                if isinstance(ev, framed_rows):  # the library's reading of the same packet (test oracle)
                    ev._library_args = (data, table_map, args)
                yield ev
                continue
        wrapped = library(MysqlPacket(data, encoding), table_map, *args)
        event = wrapped.event
        if wrapped.event_type == _ROTATE:
            stream.log_pos = event.position
            stream.log_file = event.next_binlog
            if wrapped.timestamp != 0:  # fetchone: table ids are not kept across a rotate
                table_map = stream.table_map = {}
        elif wrapped.log_pos:
            stream.log_pos = wrapped.log_pos
        if wrapped.event_type == _FORMAT_DESCRIPTION and event is not None:
            stream.mysql_version = event.mysql_version
            setattr(stream, _PREFIX + "post_header_lengths", event.post_header_len)
            args = library_args()
            post_header_lengths = args[14]
        if wrapped.event_type == _TABLE_MAP and event is not None:
            table_map[event.table_id] = event.get_table()
        if event is None or event.__class__ not in allowed:
            continue
        yield event
