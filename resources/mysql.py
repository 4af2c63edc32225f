"""``MySqlResource``: a MySQL/MariaDB server -- the binlog capture (Flink CDC's ``mysql`` source)
and plain connections (the truth of the key-state checks)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import dagster as dg
from pydantic import Field

if TYPE_CHECKING:
    from changelake.connectors.mysql_cdc.source import MySqlSource

__all__ = ["MySqlResource"]


class MySqlResource(dg.ConfigurableResource):
    """A MySQL/MariaDB server. Nothing connects until a method is called.

    Example (an asset capturing two tables, snapshot then binlog, until caught up)::

        with mysql.cdc_source(tables="shop.orders,shop.customers") as source:
            events = source.poll(max_events=1000, timeout_s=1.0)
    """

    host: str = Field(description="MySQL host name or address (Flink CDC's 'hostname').")
    port: int = Field(default=3306, description="MySQL TCP port.")
    user: str = Field(description="User with SELECT, REPLICATION SLAVE and REPLICATION CLIENT privileges.")
    password: str = Field(description="Password; pass dg.EnvVar('MYSQL_PASSWORD'), never a literal.")

    def connection_options(self) -> dict[str, str]:
        """The ``mysql`` source's connection options, Flink CDC's keys: hostname, port, username, password."""
        return {"hostname": self.host, "port": str(self.port), "username": self.user, "password": self.password}

    def options_for(self, connector: str) -> dict[str, str]:
        """:meth:`connection_options` (the registry names this resource's kind for ``connector``)."""
        return self.connection_options()

    def connection_params(self) -> dict[str, Any]:
        """PyMySQL ``connect`` keyword arguments (host, port, user, password)."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password}

    @contextlib.contextmanager
    def connect(self, database: str | None = None) -> Iterator[Any]:
        """A PyMySQL connection (utf8mb4, autocommit, session time zone UTC), closed on exit."""
        import pymysql

        conn = pymysql.connect(
            **self.connection_params(), database=database,
            charset="utf8mb4", autocommit=True, init_command="SET time_zone='+00:00'",
        )
        try:
            yield conn
        finally:
            conn.close()

    def cdc_source(
        self,
        tables: str,
        startup: str = "initial",
        options: Mapping[str, str] | None = None,
        *,
        pipeline: str = "dagster",
        start_position: Mapping[str, Any] | None = None,
    ) -> "MySqlSource":
        """The binlog capture of ``tables``, built by the registered ``mysql`` factory, unopened.

        Args:
            tables: Flink CDC's ``tables`` (``db.table`` regular expressions, comma-separated).
            startup: ``scan.startup.mode``: initial (snapshot, then binlog), snapshot, latest-offset,
                earliest-offset, specific-offset, timestamp.
            options: any other ``mysql`` source option, Flink CDC's keys (``server-id``,
                ``scan.incremental.snapshot.chunk.size``, ``scan.startup.specific-offset.file``, ...).
            pipeline: the name the source runs under (the registry's ``ConnectorContext``).
            start_position: a position stored by a sink (resume after it), None to start per ``startup``.

        Returns:
            A :class:`~changelake.connectors.mysql_cdc.source.MySqlSource` (a ChangelogSource: open,
            poll, position, caught_up, close; also a context manager).

        Raises:
            OptionValidationError: an unknown or invalid option, named as Flink CDC names it.
        """
        from changelake.connectors.registry import ConnectorContext, find_factory

        raw = {**self.connection_options(), "tables": tables, "scan.startup.mode": startup, **dict(options or {})}
        return find_factory("mysql").create_source(raw, ConnectorContext(pipeline, start_position=start_position))
