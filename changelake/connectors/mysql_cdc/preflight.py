"""Start-up checks of the MySQL CDC source: row-based binlog settings and a free server id.

:func:`check_binlog_settings` is pure logic over ``SHOW GLOBAL VARIABLES`` rows (unit-tested
without a server); :func:`choose_server_id` picks an id not used by another replica or CDC reader
(``SHOW SLAVE HOSTS``: every mysql-cdc reader registers itself there with its server id).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from changelake.connectors.mysql_cdc.errors import BinlogSettingsError, ServerIdClashError
from changelake.connectors.mysql_cdc.options import ServerIdRange

__all__ = [
    "ServerIdClashError",
    "BinlogSettingsError",
    "check_binlog_settings",
    "choose_server_id",
    "read_variables",
    "used_server_ids",
    "server_flavor",
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
