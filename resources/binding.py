"""Pipeline files bound to the resources' connections (no environment round-trip).

Which resource fills a connector's connection keys is the registry's answer, not a list here:
each factory declares the kind of its connection (:attr:`changelake.connectors.registry.Endpoint.connection`:
``mysql``, ``kafka``, ``lake``), and the resource of that kind (:class:`MySqlResource`,
:class:`KafkaResource`, a :class:`~resources.lake.LakeCatalogResource` of the connector's own lake)
says which keys it fills (``options_for``). They fill the keys the YAML leaves to the deployment
(absent or ``${VAR}``), see :func:`changelake.pipeline.bind.bind_pipeline`. The CLI, without
resources, resolves the same ``${VAR}`` from its environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from changelake.connectors.registry import Role, connection_of
from changelake.pipeline.bind import bind_pipeline
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.files import load_structure
from resources.kafka import KafkaResource
from resources.lake import LakeCatalogResource
from resources.mysql import MySqlResource

__all__ = ["ConnectionResource", "connection_options", "bind"]


class ConnectionResource(Protocol):
    """A resource that fills a connector's connection keys."""

    def options_for(self, connector: str) -> dict[str, str]:
        """The connection options it gives a connector of type ``connector`` ({} if none)."""
        ...


def connection_options(
    connector: str, *, mysql: MySqlResource | None = None, kafka: KafkaResource | None = None,
    lake: LakeCatalogResource | None = None, role: Role | None = None,
) -> dict[str, str]:
    """The connection options the resources give a connector of type ``connector`` ({} if none):
    those of the resource whose kind the registry names for it (its ``role`` side; None: the
    side it has, the source first)."""
    given: dict[str, ConnectionResource | None] = {"mysql": mysql, "kafka": kafka, "lake": lake}
    roles: tuple[Role, ...] = (role,) if role is not None else ("source", "sink")
    kind = next((k for k in (connection_of(connector, r) for r in roles) if k is not None), None)
    resource = given.get(kind) if kind is not None else None
    return resource.options_for(connector) if resource is not None else {}


def bind(
    path: Path, *, mysql: MySqlResource | None = None, kafka: KafkaResource | None = None,
    lake: LakeCatalogResource | None = None,
) -> PipelineDefinition:
    """The pipeline of ``path`` with its source's and sink's connections from the resources.

    Raises:
        OptionValidationError: malformed file, or a ``${VAR}`` no resource fills is not set.
    """
    structure = load_structure(path)
    return bind_pipeline(
        path,
        source=connection_options(structure.source_type, mysql=mysql, kafka=kafka, lake=lake, role="source"),
        sink=connection_options(structure.sink_type, mysql=mysql, kafka=kafka, lake=lake, role="sink"),
    )
