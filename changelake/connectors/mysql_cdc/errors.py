"""Errors of the MySQL CDC source (all :class:`~changelake.connectors.errors.SourceError`)."""

from __future__ import annotations

from typing import Iterable

from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.options import ServerIdRange

__all__ = ["BinlogSettingsError", "ServerIdClashError", "BinlogPurgedError"]


class BinlogSettingsError(SourceError):
    """The server's binlog cannot feed CDC. Change the named setting(s) in the server's config
    (e.g. ``[mysqld] log_bin binlog_format=ROW binlog_row_image=FULL binlog_row_metadata=FULL``)
    and restart it; ``problems`` lists ``(variable, actual, required)``."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        self.problems = problems
        lines = "; ".join(f"{var} is {actual!r} but must be {required}" for var, actual, required in problems)
        super().__init__(
            "The MySQL server cannot be used for CDC: " + lines + ". Set "
            + ", ".join(f"{var}={required}" for var, _, required in problems)
            + " in the server configuration (binlog_format, binlog_row_image and binlog_row_metadata can also be"
            " changed with SET GLOBAL; log_bin needs a restart)."
        )


class ServerIdClashError(SourceError):
    """Another replica or CDC reader already uses the server id. Give each pipeline its own
    ``server-id`` (or a range such as ``5400-5408``; the first free id is taken)."""

    def __init__(self, server_id: ServerIdRange, used: Iterable[int]) -> None:
        self.server_id = server_id
        self.used = sorted(set(used))
        what = f"server id {server_id}" if server_id.start == server_id.end else f"every server id of the range {server_id}"
        super().__init__(
            f"The option 'server-id' = {server_id} clashes with another binlog client: {what} is already used by a "
            f"replica or CDC reader connected to this server (ids in use: {self.used}). Two readers with the same "
            "server id disconnect each other; give this pipeline another 'server-id' (or a range)."
        )


class BinlogPurgedError(SourceError):
    """The stored binlog position is no longer on the server (its binlog file was purged).

    Resuming elsewhere would silently lose changes, so the source refuses to start. To recover,
    take a new snapshot: delete the pipeline's stored offsets (or run it under a new pipeline name)
    with ``scan.startup.mode: initial``. Attributes: ``file``, ``pos``, ``available`` (files on the server).
    """

    def __init__(self, file: str, pos: int, available: list[str]) -> None:
        self.file, self.pos, self.available = file, pos, list(available)
        oldest = f"the oldest binlog on the server is '{available[0]}'" if available else "the server lists no binlog files"
        super().__init__(
            f"The stored binlog position {file}:{pos} is no longer on the server: binlog file '{file}' has been "
            f"purged ({oldest}). Continuing would skip changes, so the source stops. To re-snapshot, delete the "
            "pipeline's stored offsets (or use a new pipeline name) and start with 'scan.startup.mode' = 'initial'."
        )
