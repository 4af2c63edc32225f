"""Where a binlog read starts for ``earliest-offset``, ``timestamp`` and ``specific-offset`` by GTID set.

As Flink CDC's MySQL source (``StartupOptions``), but positions stay file/position (see
:mod:`~changelake.connectors.mysql_cdc.positions`): a GTID set or a timestamp is turned into the
file/position of a transaction boundary once, at start.

* :func:`earliest_position`: the first event of the oldest binlog file the server still has.
* :func:`gtid_start_position`: the first transaction *after* the one whose MariaDB GTID
  (``domain-server-seq``, as ``@@gtid_binlog_pos`` shows it) is given. The binlog file is found by
  the ``Gtid_list`` event that opens each file (the GTIDs before the file), then
  ``SHOW BINLOG EVENTS`` of that file is scanned for the GTID.
* :func:`timestamp_start_file`: the last binlog file whose first event (its format description,
  written when the file was opened) is not after the timestamp; the reader then drops the
  transactions committed before the timestamp (``EventHandler``'s ``min_ts_ms``).
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Any

from changelake.connectors.errors import OptionValidationError, SourceError
from changelake.connectors.mysql_cdc.positions import BinlogPosition, binlog_file_index

__all__ = ["Gtid", "parse_gtid_set", "earliest_position", "binlog_files", "gtid_start_position", "timestamp_start_file"]

_GTID = re.compile(r"(\d+)-(\d+)-(\d+)")


@dataclass(frozen=True, order=True)
class Gtid:
    """A MariaDB GTID ``domain-server-seq``."""

    domain: int
    server: int
    seq: int

    def __str__(self) -> str:
        return f"{self.domain}-{self.server}-{self.seq}"


def parse_gtid_set(text: str) -> dict[int, Gtid]:
    """Parse ``0-1-42[,1-2-7...]`` into domain -> GTID (one per domain, as ``gtid_binlog_pos``).

    Raises:
        OptionValidationError: not MariaDB GTIDs, a domain given twice, or more than one domain
            (file/position reading cannot skip per domain exactly; name one domain's GTID).
    """
    out: dict[int, Gtid] = {}
    for part in (p.strip() for p in text.split(",")):
        m = _GTID.fullmatch(part)
        if not m:
            raise OptionValidationError(
                f"The value of option 'scan.startup.specific-offset.gtid-set' is invalid: '{text}' "
                "(expected MariaDB GTIDs 'domain-server-seq' as @@gtid_binlog_pos shows them, e.g. '0-1-42')",
                option="scan.startup.specific-offset.gtid-set",
            )
        gtid = Gtid(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if gtid.domain in out:
            raise OptionValidationError(
                f"The value of option 'scan.startup.specific-offset.gtid-set' names domain {gtid.domain} twice: '{text}'",
                option="scan.startup.specific-offset.gtid-set",
            )
        out[gtid.domain] = gtid
    if len(out) > 1:
        raise OptionValidationError(
            f"The value of option 'scan.startup.specific-offset.gtid-set' = '{text}' names {len(out)} replication "
            "domains; only one domain is supported (give the GTID of the domain this server writes)",
            option="scan.startup.specific-offset.gtid-set",
        )
    return out


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


def binlog_files(conn: Any) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS``: (file name, size in bytes), oldest first."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(_text(r[0]), int(r[1])) for r in cur.fetchall()]


def earliest_position(conn: Any) -> BinlogPosition:
    """The start of the oldest binlog file on the server (``earliest-offset``)."""
    files = binlog_files(conn)
    if not files:
        raise SourceError("the server has no binlog files (SHOW BINARY LOGS is empty); is log_bin on?")
    return BinlogPosition(files[0][0], 4)


def _events(conn: Any, file: str, limit: int | None = None) -> list[tuple[int, str, int, str]]:
    """(pos, event type, end pos, info) of the events of ``file``."""
    sql = "SHOW BINLOG EVENTS IN %s" + (f" LIMIT {int(limit)}" if limit else "")
    with conn.cursor() as cur:
        cur.execute(sql, (file,))
        names = [d[0].lower() for d in cur.description]
        ip, it, ie, ii = names.index("pos"), names.index("event_type"), names.index("end_log_pos"), names.index("info")
        return [(int(r[ip]), _text(r[it]), int(r[ie]), _text(r[ii])) for r in cur.fetchall()]


def _gtid_list(conn: Any, file: str) -> dict[int, int]:
    """domain -> highest seq before ``file`` (its opening Gtid_list event)."""
    for _, etype, _, info in _events(conn, file, 6):
        if etype.lower() == "gtid_list":
            seqs: dict[int, int] = {}
            for m in _GTID.finditer(info):
                d, s = int(m.group(1)), int(m.group(3))
                seqs[d] = max(seqs.get(d, 0), s)
            return seqs
    return {}


def gtid_start_position(conn: Any, gtid: Gtid) -> BinlogPosition:
    """The transaction boundary right after GTID ``gtid`` (MariaDB).

    Raises:
        SourceError: the GTID is older than the oldest binlog file, or not in the binlog (names it
            and the files searched).
    """
    files = [f for f, _ in binlog_files(conn)]
    start_index = None
    for i in range(len(files) - 1, -1, -1):
        if _gtid_list(conn, files[i]).get(gtid.domain, 0) <= gtid.seq:
            start_index = i
            break
    if start_index is None:
        raise SourceError(
            f"GTID {gtid} of 'scan.startup.specific-offset.gtid-set' is older than the oldest binlog file "
            f"{files[0] if files else '(none)'} (oldest position {files[0] + ':4' if files else '(none)'}): those "
            "transactions were purged; start with 'initial' instead"
        )
    found = _gtid_list(conn, files[start_index]).get(gtid.domain, -1) == gtid.seq
    for file in files[start_index:]:
        last_end = 4
        for pos, etype, end, info in _events(conn, file):
            if etype.lower() == "gtid":
                if found:
                    return BinlogPosition(file, pos)
                m = _GTID.search(info)
                if m and int(m.group(1)) == gtid.domain and int(m.group(3)) == gtid.seq:
                    found = True
            last_end = max(last_end, end)
        if found and file == files[-1]:
            return BinlogPosition(file, last_end)  # the given GTID is the last transaction
    raise SourceError(
        f"GTID {gtid} of 'scan.startup.specific-offset.gtid-set' is not in the binlog (searched {files[start_index:]}); "
        "check the value against SELECT @@gtid_binlog_pos"
    )


def timestamp_start_file(connection: dict[str, Any], server_id: int, conn: Any, timestamp_ms: int) -> BinlogPosition:
    """The start of the last binlog file opened at or before ``timestamp_ms`` (else the oldest).

    Args:
        connection: PyMySQL connection kwargs (for mysql-replication).
        server_id: replica id to read the files' first events with.
        conn: an open control connection.
        timestamp_ms: ms since the epoch.
    """
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import FormatDescriptionEvent

    files = [f for f, _ in binlog_files(conn)]

    def opened_ms(file: str) -> int:
        stream = BinLogStreamReader(connection_settings=dict(connection), server_id=server_id, blocking=False,
                                    resume_stream=True, log_file=file, log_pos=4, only_events=[FormatDescriptionEvent])
        try:
            for ev in stream:
                return int(ev.timestamp) * 1000
            return 0
        finally:
            stream.close()

    if not files:
        raise SourceError("the server has no binlog files (SHOW BINARY LOGS is empty); is log_bin on?")
    lo, hi, best = 0, len(files) - 1, -1
    while lo <= hi:  # the files' opening times increase with their index
        mid = (lo + hi) // 2
        if opened_ms(files[mid]) <= timestamp_ms:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    if best < 0 and _history_before(conn, files[0]):
        # the oldest file was opened after the timestamp and transactions came before it: the
        # changes committed between the timestamp and that file were purged (Flink CDC #2125)
        oldest_ms = opened_ms(files[0])
        opened = _dt.datetime.fromtimestamp(oldest_ms / 1000, _dt.timezone.utc).isoformat()
        raise SourceError(
            f"'scan.startup.timestamp-millis' = {timestamp_ms} is older than the oldest binlog the server still has: "
            f"the oldest position is {files[0]}:4, opened at {oldest_ms} ({opened}); the changes committed between "
            "the timestamp and it were purged. Start at or after that time, or with 'scan.startup.mode' = 'initial' "
            "to take a snapshot"
        )
    return BinlogPosition(files[max(best, 0)], 4)


def _history_before(conn: Any, oldest: str) -> bool:
    """True when transactions were logged before binlog file ``oldest`` (so files were purged):
    its Gtid_list names earlier GTIDs (MariaDB), or, without one, it is not the first file."""
    if _gtid_list(conn, oldest):
        return True
    return binlog_file_index(oldest)[1] > 1 and not _has_gtid_list_event(conn, oldest)


def _has_gtid_list_event(conn: Any, file: str) -> bool:
    return any(etype.lower() == "gtid_list" for _, etype, _, _ in _events(conn, file, 6))
