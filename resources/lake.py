"""``LakeCatalogResource``: the lake's catalog, one resource type with an implementation per lake
(as Dagster's example project puts a resource with behaviour behind an ABC): assets, checks,
sensors and ops type-hint this class, the deployment picks :class:`~resources.iceberg.IcebergCatalogResource`
or :class:`~resources.paimon.PaimonCatalogResource`.

Each implementation names the lake sink type it serves (:attr:`LakeCatalogResource.identifier`,
the registry's identifier), fills that sink's catalog keys (the registry's ``lake`` connection,
see :mod:`resources.binding`), builds the sink through the registry and reads a lake table as Arrow
(the lake IO manager, :mod:`resources.lake_io`). Nothing connects until a method is called.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping

import dagster as dg

__all__ = ["LakeCatalogResource"]


class LakeCatalogResource(dg.ConfigurableResource, ABC):
    """A lake's catalog (abstract). Subclasses set :attr:`identifier` and implement
    :meth:`connection_options`, :meth:`catalog` and :meth:`read_table`."""

    #: The lake sink type this catalog serves (``iceberg``, ``paimon``).
    identifier: ClassVar[str]

    @abstractmethod
    def connection_options(self) -> dict[str, str]:
        """The sink's catalog options this resource fills (Flink CDC's keys, ``catalog.properties.*``)."""

    def options_for(self, connector: str) -> dict[str, str]:
        """:meth:`connection_options` for a connector of this lake's type, ``{}`` for any other
        (a pipeline of another lake names its catalog in its YAML)."""
        return self.connection_options() if connector == self.identifier else {}

    def sink_options(self) -> dict[str, str]:
        """Options every sink built by :meth:`sink` gets before the caller's (default: the connection's)."""
        return self.connection_options()

    @abstractmethod
    def catalog(self) -> Any:
        """The lake library's catalog object (pyiceberg ``Catalog``, pypaimon ``Catalog``)."""

    def sink(self, options: Mapping[str, str], pipeline: str) -> Any:
        """A sink of this lake on this catalog, built by the registry, unopened: primary-key tables
        upserted per commit, the pipeline's offsets or source position stored with each snapshot.

        ``options``: Flink CDC's keys (``table.properties.*``, ``commit.max-rows``, ...); the
        catalog's options fill what they leave out.

        Raises:
            OptionValidationError: unknown or invalid options (the supported keys are listed).
        """
        from changelake.connectors.registry import ConnectorContext, find_factory

        return find_factory(self.identifier).create_sink({**self.sink_options(), **options}, ConnectorContext(pipeline))

    @abstractmethod
    def read_table(self, namespace: str, table: str) -> tuple[Any, str]:
        """Every current row of lake table ``namespace.table`` as a ``pyarrow.Table``, and the id of
        the snapshot read (``""`` for a table never written).

        Raises:
            LakeSinkError (or the lake library's error): the table does not exist.
        """
