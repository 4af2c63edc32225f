"""Connector factories keyed by Flink CDC's identifier (``type:`` of a pipeline's source/sink).

As Flink's ``FactoryDiscovery``/``FactoryHelper``: each connector package declares ONE
:class:`ConnectorFactory` (module attribute ``FACTORY``) with its required and optional option keys,
the package's own validation (raw YAML strings -> typed options; unknown keys refused with the
supported list) and a builder (typed options -> connector, no I/O). This module holds one line per
package in :data:`FACTORY_MODULES`, imported on first use so that a pipeline reading MySQL never
imports pyiceberg. A new connector is one package plus one line here.

Example::

    factory = find_factory("mysql")
    source = factory.create_source(defn.options("source"), ConnectorContext("orders", start_position=pos))
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Literal, Mapping, TypeVar

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import ConfigOption

__all__ = ["ConnectorContext", "Endpoint", "ConnectorFactory", "FACTORY_MODULES", "find_factory", "identifiers", "lake_sink_types", "supported_pairs"]

O = TypeVar("O")
C = TypeVar("C")
Role = Literal["source", "sink"]

#: identifier -> module declaring ``FACTORY`` (one line per connector package).
FACTORY_MODULES: dict[str, str] = {
    "mysql": "changelake.connectors.mysql_cdc.factory",
    "kafka": "changelake.connectors.kafka.factory",
    "upsert-kafka": "changelake.connectors.upsert_kafka.factory",
    "iceberg": "changelake.connectors.iceberg.factory",
    "paimon": "changelake.connectors.paimon.factory",
}


@dataclass(frozen=True)
class ConnectorContext:
    """What a pipeline tells a factory besides the options (Flink's ``Factory.Context``).

    Attributes:
        pipeline: the pipeline name (names transactional ids, offsets records, consumer groups).
        start_position: a source position stored by the sink (``mysql``), None for the first run.
    """

    pipeline: str
    start_position: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Endpoint(Generic[O, C]):
    """One side (source or sink) of a connector: its option keys, validation and builder.

    Attributes:
        required: option keys that must be present (declared as :class:`ConfigOption` or keys;
            stored as keys, sorted).
        optional: the other supported keys, likewise; a trailing ``*`` marks a prefix
            (``properties.*``).
        validate: raw options -> typed options; the package's own checks. Raises
            OptionValidationError ("Unsupported options found for '<identifier>'" lists the
            unsupported and the supported keys).
        build: typed options -> the connector, unopened (no I/O).
        partitioned: a source that polls records with per-partition offsets (``kafka``) instead of
            change events with one position (:class:`~changelake.connectors.base.ChangelogSource`),
            or a sink that stores per-partition offsets with each commit
            (:class:`~changelake.connectors.base.LakeSink`). A partitioned source needs a
            partitioned sink; a positioned source feeds any sink.
    """

    required: tuple[str | ConfigOption[Any], ...]
    optional: tuple[str | ConfigOption[Any], ...]
    validate: Callable[[Mapping[str, Any], ConnectorContext], O]
    build: Callable[[O, ConnectorContext], C]
    partitioned: bool = False

    def __post_init__(self) -> None:
        for name in ("required", "optional"):
            keys = [o.key if isinstance(o, ConfigOption) else str(o) for o in getattr(self, name)]
            object.__setattr__(self, name, tuple(sorted(dict.fromkeys(keys), key=lambda k: (k.endswith("*"), k))))

    def create(self, raw: Mapping[str, Any], context: ConnectorContext) -> C:
        """Validate ``raw``, then build. Raises OptionValidationError."""
        return self.build(self.validate(raw, context), context)


@dataclass(frozen=True)
class ConnectorFactory:
    """A connector package's factory: its identifier and its source and/or sink side."""

    identifier: str
    source: Endpoint[Any, Any] | None = None
    sink: Endpoint[Any, Any] | None = None
    description: str = field(default="", compare=False)

    def endpoint(self, role: Role) -> Endpoint[Any, Any]:
        """The ``source`` or ``sink`` side. Raises OptionValidationError if the connector has none."""
        side = self.source if role == "source" else self.sink
        if side is None:
            can = [r for r in ("source", "sink") if getattr(self, r) is not None]
            raise OptionValidationError(
                f"connector '{self.identifier}' cannot be used as a {role}; it is a {' and a '.join(can)} only. "
                f"{role.capitalize()} connectors: {', '.join(identifiers(role))}",
                option="type",
            )
        return side

    def create_source(self, raw: Mapping[str, Any], context: ConnectorContext) -> Any:
        """Validate and build the source (unopened). Raises OptionValidationError."""
        return self.endpoint("source").create(raw, context)

    def create_sink(self, raw: Mapping[str, Any], context: ConnectorContext) -> Any:
        """Validate and build the sink (unopened). Raises OptionValidationError."""
        return self.endpoint("sink").create(raw, context)


def find_factory(identifier: str) -> ConnectorFactory:
    """The factory registered under ``identifier``.

    Raises:
        OptionValidationError: unknown identifier; the message lists the registered ones.
    """
    module = FACTORY_MODULES.get(identifier)
    if module is None:
        raise OptionValidationError(
            f"Could not find any factory for identifier '{identifier}'. "
            f"Registered identifiers: {', '.join(sorted(FACTORY_MODULES))}",
            option="type",
        )
    factory = importlib.import_module(module).FACTORY
    if not isinstance(factory, ConnectorFactory) or factory.identifier != identifier:
        raise TypeError(f"{module}.FACTORY is not the ConnectorFactory of '{identifier}'")
    return factory


def supported_pairs() -> list[tuple[str, str]]:
    """Every (source, sink) identifier pair a pipeline can run, sorted."""
    sinks = [(i, find_factory(i).endpoint("sink")) for i in identifiers("sink")]
    return [
        (source, sink)
        for source in identifiers("source")
        for sink, endpoint in sinks
        if endpoint.partitioned or not find_factory(source).endpoint("source").partitioned
    ]


def identifiers(role: Role | None = None) -> list[str]:
    """Registered identifiers, sorted; with ``role`` only those having that side."""
    if role is None:
        return sorted(FACTORY_MODULES)
    return [i for i in sorted(FACTORY_MODULES) if getattr(find_factory(i), role) is not None]


def lake_sink_types() -> tuple[str, ...]:
    """Identifiers of the lake sinks (a partitioned sink side: one that stores per-partition
    offsets with its commits, :class:`~changelake.connectors.base.LakeSink`), sorted."""
    return tuple(i for i in identifiers("sink") if find_factory(i).endpoint("sink").partitioned)
