"""Is the change capture behind its MySQL server? Compares the binlog position Pipeline 1 last
committed (its sink's stored position: ``{"file": ..., "pos": ...}``) with the server's current
end, ``SHOW MASTER STATUS`` (engine; no Dagster import). Used by the lake's freshness check, so a
lake whose topics are drained but whose Pipeline 1 stopped reading does not look fresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["SourceGap", "master_position", "source_gap"]


@dataclass(frozen=True)
class SourceGap:
    """The server's binlog end and the captured position (``file:pos`` text; ``captured`` is
    ``"none"`` when Pipeline 1 never committed)."""

    server: str
    captured: str
    behind: bool


def master_position(params: Mapping[str, Any]) -> tuple[str, int]:
    """``(file, pos)`` of ``SHOW MASTER STATUS`` on the server of PyMySQL ``params``.

    Raises:
        CheckError: binary logging is off (the statement returns no row).
    """
    import pymysql

    from changelake.checks.errors import CheckError

    conn = pymysql.connect(**{k: v for k, v in params.items() if k in ("host", "port", "user", "password")},
                           connect_timeout=10)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
    finally:
        conn.close()
    if not row:
        raise CheckError("SHOW MASTER STATUS returned nothing: binary logging is off on the MySQL server")
    return str(row[0]), int(row[1])


def source_gap(stored: Mapping[str, Any] | None, server: tuple[str, int]) -> SourceGap:
    """Compare a stored Pipeline 1 position with the server's end. Binlog file names share a
    prefix and a zero-padded sequence number, so ``(file, pos)`` pairs order as the binlog does.
    A position without ``file``/``pos`` (a GTID-only position) is never called behind."""
    text = f"{server[0]}:{server[1]}"
    if not stored:
        return SourceGap(server=text, captured="none", behind=True)
    if "file" not in stored or "pos" not in stored:
        return SourceGap(server=text, captured=str(stored.get("gtid", "?")), behind=False)
    captured = (str(stored["file"]), int(stored["pos"]))
    return SourceGap(server=text, captured=f"{captured[0]}:{captured[1]}", behind=captured < server)
