"""The ``iceberg`` sink factory: validates with :func:`parse_sink_options` and builds :class:`IcebergSink`."""

from changelake.connectors.iceberg.options import IDENTIFIER, SUPPORTED_KEYS, parse_sink_options
from changelake.connectors.lake.factory import lake_sink_factory

__all__ = ["FACTORY"]

#: The ``iceberg`` sink factory (registered in :mod:`changelake.connectors.registry`).
FACTORY = lake_sink_factory(IDENTIFIER, SUPPORTED_KEYS, parse_sink_options, "changelake.connectors.iceberg.writer:IcebergSink",
                            maintenance="changelake.connectors.iceberg.maintenance:maintain_lake")
