"""Iceberg maintenance of a Kafka -> Iceberg pipeline's lake (what schedulers call).

:func:`maintain_pipeline_lake` opens the catalog of a pipeline's ``iceberg`` sink and runs
:func:`changelake.connectors.iceberg.maintenance.maintain_catalog` over its tables, leaving the
pipeline checkpoint namespace alone. The ``changelake lake maintain`` command and the Dagster
``<pipeline>_lake_maintenance`` job do the same.
"""

from __future__ import annotations

from typing import Iterable

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.iceberg.maintenance import MaintenanceOptions, MaintenanceResult
from changelake.pipeline.definition import PipelineDefinition

__all__ = ["maintain_pipeline_lake"]


def maintain_pipeline_lake(
    defn: PipelineDefinition,
    options: MaintenanceOptions = MaintenanceOptions(),
    *,
    tables: Iterable[tuple[str, str]] | None = None,
) -> list[MaintenanceResult]:
    """Compact, expire snapshots and delete orphan files in the lake tables of ``defn``'s sink.

    Args:
        defn: a resolved pipeline definition whose sink type is ``iceberg``.
        options: retention and compaction settings (defaults: each table's properties).
        tables: ``(namespace, table)`` identifiers; None means every table outside the
            ``changelake`` checkpoint namespace.

    Returns:
        One result per table (see :class:`MaintenanceResult`).

    Raises:
        OptionValidationError: the sink is not ``iceberg``, or its options are invalid.
        IcebergSinkError: the catalog cannot be loaded.
        MaintenanceError: a table's step failed.
    """
    from changelake.connectors.iceberg import open_catalog, parse_sink_options
    from changelake.connectors.iceberg.maintenance import maintain_catalog
    from changelake.pipeline.runner import CHECKPOINT_NAMESPACE

    if defn.sink_type != "iceberg":
        raise OptionValidationError(
            f"pipeline '{defn.name}': sink type is {defn.sink_type!r}; lake maintenance is for 'iceberg'", option="type"
        )
    catalog = open_catalog(parse_sink_options(defn.options("sink")))
    return maintain_catalog(catalog, options, tables=tables, skip_namespaces=[CHECKPOINT_NAMESPACE])
