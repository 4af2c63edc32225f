"""The ``paimon`` sink factory: validates with :func:`parse_sink_options` and builds :class:`PaimonSink`."""

from changelake.connectors.lake.factory import lake_sink_factory
from changelake.connectors.paimon.options import IDENTIFIER, SUPPORTED_KEYS, parse_sink_options

__all__ = ["FACTORY"]

#: The ``paimon`` sink factory (registered in :mod:`changelake.connectors.registry`).
FACTORY = lake_sink_factory(IDENTIFIER, SUPPORTED_KEYS, parse_sink_options, "changelake.connectors.paimon.writer:PaimonSink")
