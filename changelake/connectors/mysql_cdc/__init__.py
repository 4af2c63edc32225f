"""MySQL CDC source: initial snapshot + binlog, as Flink CDC's MySQL pipeline source (``type: mysql``).

Public entry points: :data:`factory.FACTORY` (registered as ``mysql``) / :class:`source.MySqlSource`, options in
:mod:`options`, positions in :mod:`positions`, errors in :mod:`errors`.
"""

from changelake.connectors.mysql_cdc.errors import BinlogPurgedError, BinlogSettingsError, ServerIdClashError
from changelake.connectors.mysql_cdc.factory import FACTORY, IDENTIFIER, validate_options
from changelake.connectors.mysql_cdc.options import MySqlSourceOptions, ServerIdRange, StartupMode
from changelake.connectors.mysql_cdc.source import MySqlSource

__all__ = [
    "IDENTIFIER",
    "BinlogPurgedError",
    "BinlogSettingsError",
    "MySqlSource",
    "MySqlSourceOptions",
    "ServerIdClashError",
    "ServerIdRange",
    "StartupMode",
    "FACTORY",
    "validate_options",
]
