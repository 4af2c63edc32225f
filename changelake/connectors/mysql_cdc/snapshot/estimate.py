"""The server's estimate of how many rows an initial snapshot will read (for progress lines):
the sum of ``information_schema.TABLES.TABLE_ROWS`` over the captured tables (InnoDB's estimate:
exact enough for a percentage, never used for correctness)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["snapshot_row_estimate"]


def snapshot_row_estimate(options: Mapping[str, str]) -> int | None:
    """Estimated rows of the tables a ``mysql`` source's options capture (``tables``,
    ``tables.exclude``), or None when the server cannot be asked (the run reports the error
    itself; progress lines then show rows done without a percentage)."""
    from changelake.connectors.mysql_cdc.factory import validate_options

    try:
        opts = validate_options({k: v for k, v in options.items() if k not in ("type", "name")})
        import pymysql

        conn = pymysql.connect(**{**opts.connection_kwargs(), "connect_timeout": 10})
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_TYPE = "
                    "'BASE TABLE' AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"
                )
                rows = cur.fetchall()
        finally:
            conn.close()
    except Exception:  # noqa: BLE001 - an estimate only
        return None
    from changelake.changelog import TableId

    total = 0
    for db, table, n in rows:
        tid = TableId(_text(db), _text(table))
        if opts.tables.matches(tid) and not (opts.tables_exclude is not None and opts.tables_exclude.matches(tid)):
            total += int(n or 0)
    return total


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
