"""Pipeline files bound to the resources' connections (no environment round-trip).

Each connector type takes its connection options from one resource: ``mysql`` from
:class:`MySqlResource`, ``kafka``/``upsert-kafka`` from :class:`KafkaResource`, ``iceberg`` from
:class:`IcebergCatalogResource`; they fill the keys the YAML leaves to the deployment (absent or
``${VAR}``), see :func:`changelake.pipeline.bind.bind_pipeline`. The CLI, without resources,
resolves the same ``${VAR}`` from its environment.
"""

from __future__ import annotations

from pathlib import Path

from changelake.pipeline.bind import bind_pipeline
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.files import load_structure
from resources.iceberg import IcebergCatalogResource
from resources.kafka import KafkaResource
from resources.mysql import MySqlResource

__all__ = ["connection_options", "bind"]


def connection_options(
    connector: str, *, mysql: MySqlResource | None = None, kafka: KafkaResource | None = None,
    lake: IcebergCatalogResource | None = None,
) -> dict[str, str]:
    """The connection options the resources give a connector of type ``connector`` ({} if none)."""
    if connector == "mysql" and mysql is not None:
        return mysql.connection_options()
    if connector in ("kafka", "upsert-kafka") and kafka is not None:
        return kafka.connection_options()
    if connector == "iceberg" and lake is not None:
        return lake.connection_options()
    return {}


def bind(
    path: Path, *, mysql: MySqlResource | None = None, kafka: KafkaResource | None = None,
    lake: IcebergCatalogResource | None = None,
) -> PipelineDefinition:
    """The pipeline of ``path`` with its source's and sink's connections from the resources.

    Raises:
        OptionValidationError: malformed file, or a ``${VAR}`` no resource fills is not set.
    """
    structure = load_structure(path)
    return bind_pipeline(
        path,
        source=connection_options(structure.source_type, mysql=mysql, kafka=kafka, lake=lake),
        sink=connection_options(structure.sink_type, mysql=mysql, kafka=kafka, lake=lake),
    )
