"""The registry factory of a lake sink, in one call: :func:`lake_sink_factory`.

A lake sink is a :class:`~changelake.connectors.base.LakeSink` (``partitioned``: its commits store
per-partition offsets; a positioned source reaches it through
:class:`~changelake.connectors.lake.changelog_sink.LakePositionSink`). Its package's ``factory.py``
is then three lines::

    FACTORY = lake_sink_factory(IDENTIFIER, SUPPORTED_KEYS, parse_sink_options,
                                "changelake.connectors.paimon.writer:PaimonSink")
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

from changelake.connectors.lake.schema_change import EXCLUDE_KEY, INCLUDE_KEY, SchemaChangePolicy
from changelake.connectors.registry import ConnectorContext, ConnectorFactory, Endpoint

__all__ = ["lake_sink_factory"]

_DESCRIPTION = "Primary-key lake tables, Kafka offsets or the source position stored with each commit."


def lake_sink_factory(
    identifier: str, supported_keys: tuple[str, ...], parse: Callable[[Mapping[str, Any]], Any], sink_class: str,
    *, maintenance: str | None = None,
) -> ConnectorFactory:
    """The sink factory of a lake: validate with ``parse`` (raw options -> typed options, raises
    OptionValidationError), build ``sink_class`` (``module:Class``, imported on first build so
    that validating options never imports the table format's library).

    Every lake answers the registry's questions alike: a ``lake`` connection (a lake catalog of
    ``identifier`` fills its catalog keys), progress per lake table; ``maintenance`` names its
    table maintenance (``module:function``, see :mod:`changelake.connectors.lake.maintenance`),
    None when it has none."""
    module, _, name = sink_class.partition(":")

    def build(options: Any, context: ConnectorContext) -> Any:
        typed, policy = options
        sink = getattr(importlib.import_module(module), name)(typed)
        sink.schema_change_policy = policy
        return sink

    def validate(raw: Mapping[str, Any], context: ConnectorContext) -> Any:
        # Flink CDC's sink options include/exclude.schema.changes and the pipeline's
        # schema.change.behavior (lake/schema_change.py); the rest is the table format's
        policy = SchemaChangePolicy.of(context.schema_change_behavior, raw.get(INCLUDE_KEY), raw.get(EXCLUDE_KEY))
        return parse({k: v for k, v in raw.items() if k not in (INCLUDE_KEY, EXCLUDE_KEY)}), policy

    return ConnectorFactory(
        identifier,
        sink=Endpoint(required=(), optional=supported_keys, validate=validate, build=build, partitioned=True,
                      connection="lake", progress="tables", maintenance=maintenance),
        description=_DESCRIPTION,
    )
