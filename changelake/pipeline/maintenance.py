"""Table maintenance of a pipeline's lake (what schedulers call), for any sink that declares it.

:func:`maintain_pipeline_lake` asks the registry for the maintenance of the pipeline's sink type
(:func:`changelake.connectors.registry.maintenance_of`; ``iceberg``: compaction, snapshot expiry
that keeps the resume offsets readable, orphan files, the checkpoint namespace left alone) and
runs it on the sink's validated options. The ``changelake lake maintain`` command and the Dagster
``<pipeline>_lake_maintenance`` job do the same.
"""

from __future__ import annotations

from typing import Iterable

from changelake.connectors.base import LakeSink
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.lake.maintenance import MaintenanceOptions, MaintenanceResult
from changelake.connectors.registry import ConnectorContext, find_factory, maintenance_of, maintenance_sink_types
from changelake.pipeline.definition import PipelineDefinition

__all__ = ["maintain_pipeline_lake", "has_maintenance", "maintenance_refusal"]


def has_maintenance(defn: PipelineDefinition) -> bool:
    """True when the pipeline's sink type declares table maintenance (``iceberg``)."""
    return defn.sink_type in maintenance_sink_types()


def maintenance_refusal(defn: PipelineDefinition, what: str = "maintenance") -> str:
    """Why a pipeline without maintenance is refused: names its sink type and those that have it
    (``sink type is 'paimon'; maintenance is for 'iceberg'``)."""
    have = ", ".join(f"'{t}'" for t in maintenance_sink_types()) or "no sink type"
    return f"sink type is {defn.sink_type!r}; {what} is for {have}"


def maintain_pipeline_lake(
    defn: PipelineDefinition,
    options: MaintenanceOptions = MaintenanceOptions(),
    *,
    tables: Iterable[tuple[str, str]] | None = None,
) -> list[MaintenanceResult]:
    """Compact, expire snapshots and delete orphan files in the lake tables of ``defn``'s sink.

    Args:
        defn: a resolved pipeline definition whose sink type declares maintenance (``iceberg``).
        options: retention and compaction settings (defaults: each table's properties).
        tables: ``(namespace, table)`` identifiers; None means every table outside the
            lake's pipeline-checkpoint namespace.

    Returns:
        One result per table (see :class:`MaintenanceResult`).

    Raises:
        OptionValidationError: the sink declares no maintenance, or its options are invalid.
        LakeSinkError: the catalog cannot be loaded.
        MaintenanceError: a table's step failed.
    """
    maintain = maintenance_of(defn.sink_type)
    if maintain is None:
        raise OptionValidationError(f"pipeline '{defn.name}': {maintenance_refusal(defn, 'lake maintenance')}",
                                    option="type")
    # the sink as the registry builds it (unopened, no I/O): its typed options are what the lake's
    # maintenance opens the catalog with
    sink: LakeSink = find_factory(defn.sink_type).create_sink(defn.options("sink"), ConnectorContext(defn.name))
    results: list[MaintenanceResult] = maintain(sink.options, options, tables=tables)
    return results
