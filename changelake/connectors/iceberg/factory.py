"""The ``iceberg`` sink factory: validates with :func:`parse_sink_options` and builds :class:`IcebergSink`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from changelake.connectors.iceberg.options import IDENTIFIER, SUPPORTED_KEYS, IcebergSinkOptions, parse_sink_options
from changelake.connectors.registry import ConnectorContext, ConnectorFactory, Endpoint

if TYPE_CHECKING:
    from changelake.connectors.iceberg.writer import IcebergSink

__all__ = ["FACTORY"]


def _validate(raw: Mapping[str, Any], context: ConnectorContext) -> IcebergSinkOptions:
    return parse_sink_options(raw)


def _build(options: IcebergSinkOptions, context: ConnectorContext) -> "IcebergSink":
    from changelake.connectors.iceberg.writer import IcebergSink

    return IcebergSink(options)


#: The ``iceberg`` sink factory (registered in :mod:`changelake.connectors.registry`).
FACTORY = ConnectorFactory(
    IDENTIFIER,
    sink=Endpoint(required=(), optional=SUPPORTED_KEYS, validate=_validate, build=_build, partitioned=True),
    description="Primary-key lake tables, Kafka offsets or the source position stored with each commit.",
)
