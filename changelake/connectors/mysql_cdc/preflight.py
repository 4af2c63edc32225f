"""Start-up checks of the MySQL CDC source: row-based binlog settings and a free server id.

:func:`check_binlog_settings` is pure logic over ``SHOW GLOBAL VARIABLES`` rows (unit-tested
without a server); :func:`choose_server_id` picks an id not used by another replica or CDC reader
(``SHOW SLAVE HOSTS``: every mysql-cdc reader registers itself there with its server id).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from changelake.connectors.mysql_cdc.errors import (
    BinlogSettingsError,
    MissingPrivilegeError,
    ServerIdClashError,
    ServerTimeZoneMismatchError,
)
from changelake.connectors.mysql_cdc.options import ServerIdRange

__all__ = [
    "ServerIdClashError",
    "BinlogSettingsError",
    "check_binlog_settings",
    "choose_server_id",
    "read_variables",
    "used_server_ids",
    "server_flavor",
    "required_privileges",
    "check_privileges",
    "check_server_time_zone",
]

_VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "version", "server_id")


def server_flavor(version: str) -> tuple[str, tuple[int, ...]]:
    """('mariadb' | 'mysql', version tuple) from a ``version`` variable such as ``10.11.6-MariaDB-log``."""
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)", version)
    nums = tuple(int(x) for x in m.groups()) if m else (0, 0, 0)
    return ("mariadb" if "mariadb" in version.lower() else "mysql", nums)


def check_binlog_settings(variables: Mapping[str, Any]) -> None:
    """Refuse a server without a usable row-based binlog.

    Args:
        variables: lower-case variable name -> value (from ``SHOW GLOBAL VARIABLES``).

    Raises:
        BinlogSettingsError: ``log_bin`` off, ``binlog_format`` != ROW, ``binlog_row_image`` != FULL,
            or ``binlog_row_metadata`` != FULL on MariaDB >= 10.5 / MySQL >= 8.0.1. Names each setting.
    """
    v = {str(k).lower(): str(val) for k, val in variables.items()}
    problems: list[tuple[str, str, str]] = []
    if v.get("log_bin", "OFF").upper() not in ("ON", "1"):
        problems.append(("log_bin", v.get("log_bin", "OFF"), "ON"))
    if v.get("binlog_format", "").upper() != "ROW":
        problems.append(("binlog_format", v.get("binlog_format", ""), "ROW"))
    if v.get("binlog_row_image", "").upper() != "FULL":
        problems.append(("binlog_row_image", v.get("binlog_row_image", ""), "FULL"))
    flavor, ver = server_flavor(v.get("version", ""))
    needs_metadata = ver >= (10, 5, 0) if flavor == "mariadb" else ver >= (8, 0, 1)
    if needs_metadata and v.get("binlog_row_metadata", "").upper() != "FULL":
        problems.append(("binlog_row_metadata", v.get("binlog_row_metadata", "(unset)"), "FULL"))
    if problems:
        raise BinlogSettingsError(problems)


def choose_server_id(wanted: ServerIdRange, used: Iterable[int], own_server_id: int | None = None) -> int:
    """The first id of ``wanted`` not in ``used`` (and not the server's own id).

    Raises:
        ServerIdClashError: every id of the range is taken; names the option value and the ids in use.
    """
    taken = set(used)
    if own_server_id is not None:
        taken.add(own_server_id)
    for sid in wanted.ids():
        if sid not in taken:
            return sid
    raise ServerIdClashError(wanted, taken)


def read_variables(conn: Any) -> dict[str, str]:
    """The global variables :func:`check_binlog_settings` needs (lower-case names)."""
    with conn.cursor() as cur:
        cur.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + ", ".join(["%s"] * len(_VARIABLES)) + ")", _VARIABLES
        )
        out = {}
        for name, value in cur.fetchall():
            name = name.decode() if isinstance(name, bytes) else name
            value = value.decode() if isinstance(value, bytes) else value
            out[str(name).lower()] = str(value)
        return out


def used_server_ids(conn: Any) -> list[int]:
    """Server ids of replicas / CDC readers registered with this server (``SHOW SLAVE HOSTS``)."""
    with conn.cursor() as cur:
        cur.execute("SHOW SLAVE HOSTS")
        names = [d[0].lower() for d in cur.description]
        idx = names.index("server_id")
        return [int(r[idx]) for r in cur.fetchall()]


def required_privileges(version: str) -> dict[str, tuple[str, ...]]:
    """Global privileges the source needs -> accepted names, for the server ``version``.

    SELECT (snapshot and table schemas; global or per database / table), REPLICATION SLAVE (the
    binlog dump) and, to read binlog positions (SHOW MASTER STATUS, SHOW BINARY LOGS, SHOW BINLOG
    EVENTS), BINLOG MONITOR on MariaDB >= 10.5.2 (where REPLICATION CLIENT is its alias), else
    REPLICATION CLIENT. RELOAD is not needed: the snapshot takes no lock (MariaDB's
    ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` gives its binlog position).
    """
    flavor, ver = server_flavor(version)
    monitor = "BINLOG MONITOR" if flavor == "mariadb" and ver >= (10, 5, 2) else "REPLICATION CLIENT"
    return {"REPLICATION SLAVE": ("REPLICATION SLAVE",), monitor: (monitor, "REPLICATION CLIENT", "BINLOG MONITOR")}


_WHY = {
    "SELECT": "to snapshot the captured tables",
    "REPLICATION SLAVE": "to read the binlog",
    "BINLOG MONITOR": "to read binlog positions: SHOW MASTER STATUS, SHOW BINARY LOGS",
    "REPLICATION CLIENT": "to read binlog positions: SHOW MASTER STATUS, SHOW BINARY LOGS",
}


def check_privileges(conn: Any, tables: Iterable[Any], *, needs_snapshot: bool, version: str, user: str) -> None:
    """Refuse to start when the connected user lacks a privilege the source needs.

    Reads the user's (and its current role's) grants from information_schema
    (USER_PRIVILEGES, SCHEMA_PRIVILEGES, TABLE_PRIVILEGES).

    Args:
        conn: an open connection as the source's user.
        tables: the captured tables (TableId); SELECT is checked on each when ``needs_snapshot``.
        needs_snapshot: the run reads a snapshot (initial / snapshot mode, newly added tables).
        version: the server's ``version`` variable.
        user: the configured user name (for the message).

    Raises:
        MissingPrivilegeError: names each missing privilege and what it is for.
    """
    with conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER(), CURRENT_ROLE()")
        current, role = cur.fetchone()
        current = _text(current)
        name, _, host = current.rpartition("@")
        grantees = [f"'{name}'@'{host}'"] + ([f"'{_text(role)}'"] if role else [])
        marks = ", ".join(["%s"] * len(grantees))
        cur.execute(f"SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE IN ({marks})", grantees)
        global_privs = {_text(r[0]).upper() for r in cur.fetchall()}
        cur.execute(f"SELECT TABLE_SCHEMA FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE IN ({marks}) "
                    "AND PRIVILEGE_TYPE = 'SELECT'", grantees)
        schema_select = {_text(r[0]) for r in cur.fetchall()}
        cur.execute(f"SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLE_PRIVILEGES WHERE GRANTEE IN ({marks}) "
                    "AND PRIVILEGE_TYPE = 'SELECT'", grantees)
        table_select = {(_text(d), _text(t)) for d, t in cur.fetchall()}
    missing: dict[str, str] = {}
    for priv, accepted in required_privileges(version).items():
        if not global_privs.intersection(accepted):
            missing[priv] = _WHY[priv]
    no_select: list[str] = []
    if needs_snapshot and "SELECT" not in global_privs:
        no_select = [str(t) for t in tables if t.database not in schema_select and (t.database, t.table) not in table_select]
        if no_select:
            missing = {"SELECT": _WHY["SELECT"], **missing}
    if missing:
        raise MissingPrivilegeError(f"'{name}'@'{host}'" if name else repr(user), missing, no_select)


def check_server_time_zone(conn: Any, zone: str, tolerance_s: int = 60) -> None:
    """``server-time-zone`` must match the server's current offset from UTC, as Flink CDC's
    ``MySqlValidator.checkTimeZone`` (within ``tolerance_s``; a zone in daylight saving time
    also matches its standard offset).

    Raises:
        ServerTimeZoneMismatchError: names both offsets.
    """
    import datetime as dt
    import zoneinfo

    with conn.cursor() as cur:
        cur.execute("SELECT TIME_TO_SEC(TIMEDIFF(NOW(), UTC_TIMESTAMP()))")
        row = cur.fetchone()
    server = int(float(_text(row[0]))) if row and row[0] is not None else 0
    now = dt.datetime.now(zoneinfo.ZoneInfo(zone))
    utc_offset, dst_delta = now.utcoffset(), now.dst()
    offset = int(utc_offset.total_seconds()) if utc_offset is not None else 0
    dst = int(dst_delta.total_seconds()) if dst_delta is not None else 0
    if abs(server - offset) > tolerance_s and not (dst and abs(server - (offset - dst)) <= tolerance_s):
        raise ServerTimeZoneMismatchError(zone, server, offset)


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)
