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

__all__ = [
    "ConnectorContext", "Endpoint", "ConnectorFactory", "FACTORY_MODULES", "Progress", "Role", "find_factory",
    "identifiers", "lake_sink_types", "supported_pairs", "connection_of", "maintenance_of", "progress_of",
    "is_partitioned_source", "maintenance_sink_types",
]

O = TypeVar("O")
C = TypeVar("C")
Role = Literal["source", "sink"]
#: What a sink's commits let an orchestrator report: ``topics`` (the topics written, with their
#: end offsets), ``tables`` (per lake table: rows, offsets, snapshot), ``none``.
Progress = Literal["topics", "tables", "none"]

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
        schema_change_behavior: the pipeline's ``schema.change.behavior`` (Flink CDC's
            ``pipeline.schema.change.behavior``), None when unset; lake sinks apply it.
    """

    pipeline: str
    start_position: Mapping[str, Any] | None = None
    schema_change_behavior: str | None = None


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
        connection: the kind of deployment connection that fills the keys the YAML leaves to the
            deployment (``mysql``: host and credentials; ``kafka``: ``properties.bootstrap.servers``
            and client properties; ``lake``: a lake catalog of this identifier); None: the YAML
            gives every key. An orchestrator's resource of that kind says which keys it fills.
        progress: what a sink's durable commits let an orchestrator report (:data:`Progress`).
        maintenance: ``module:function`` maintaining the tables of a sink
            (``maintain(sink.options, maintenance_options, *, tables) -> list[result]``, given
            the typed options of the sink this endpoint builds; see
            :mod:`changelake.connectors.lake.maintenance`); None: the sink needs none.
    """

    required: tuple[str | ConfigOption[Any], ...]
    optional: tuple[str | ConfigOption[Any], ...]
    validate: Callable[[Mapping[str, Any], ConnectorContext], O]
    build: Callable[[O, ConnectorContext], C]
    partitioned: bool = False
    connection: str | None = None
    progress: Progress = "none"
    maintenance: str | None = None

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


def maintenance_sink_types() -> tuple[str, ...]:
    """Identifiers of the sinks that declare table maintenance, sorted."""
    return tuple(i for i in identifiers("sink") if find_factory(i).endpoint("sink").maintenance is not None)


def connection_of(identifier: str, role: Role) -> str | None:
    """The kind of deployment connection filling the ``role`` side of ``identifier``
    (:attr:`Endpoint.connection`); None for an unknown identifier or side, or none declared."""
    if identifier not in FACTORY_MODULES:
        return None
    side = getattr(find_factory(identifier), role)
    return side.connection if side is not None else None


def progress_of(identifier: str) -> Progress:
    """What the sink ``identifier`` reports per durable commit (:attr:`Endpoint.progress`).

    Raises:
        OptionValidationError: unknown identifier, or not a sink.
    """
    return find_factory(identifier).endpoint("sink").progress


def is_partitioned_source(identifier: str) -> bool:
    """True for a source with per-partition offsets (``kafka``): its pipeline's lag is measurable
    in offsets. Raises OptionValidationError for an unknown identifier or a sink-only one."""
    return find_factory(identifier).endpoint("source").partitioned


def maintenance_of(identifier: str) -> Callable[..., Any] | None:
    """The maintenance function of the sink ``identifier`` (:attr:`Endpoint.maintenance`,
    imported on first use), None when it declares none.

    Raises:
        OptionValidationError: unknown identifier, or not a sink.
    """
    target = find_factory(identifier).endpoint("sink").maintenance
    if target is None:
        return None
    module, _, name = target.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function
