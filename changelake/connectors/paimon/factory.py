"""The ``paimon`` sink factory: validates with :func:`parse_sink_options` and builds :class:`PaimonSink`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from changelake.connectors.paimon.options import IDENTIFIER, SUPPORTED_KEYS, PaimonSinkOptions, parse_sink_options
from changelake.connectors.registry import ConnectorContext, ConnectorFactory, Endpoint

if TYPE_CHECKING:
    from changelake.connectors.paimon.writer import PaimonSink

__all__ = ["FACTORY"]


def _validate(raw: Mapping[str, Any], context: ConnectorContext) -> PaimonSinkOptions:
    return parse_sink_options(raw)


def _build(options: PaimonSinkOptions, context: ConnectorContext) -> "PaimonSink":
    from changelake.connectors.paimon.writer import PaimonSink

    return PaimonSink(options)


#: The ``paimon`` sink factory (registered in :mod:`changelake.connectors.registry`).
FACTORY = ConnectorFactory(
    IDENTIFIER,
    sink=Endpoint(required=(), optional=SUPPORTED_KEYS, validate=_validate, build=_build, partitioned=True),
    description="Primary-key lake tables, Kafka offsets or the source position stored with each commit.",
)
