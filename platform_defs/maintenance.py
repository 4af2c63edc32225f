"""Lake maintenance jobs: one ``<pipeline>_lake_maintenance`` job and a daily schedule (off by
default) per pipeline file whose sink type declares maintenance (the registry's answer; today
``iceberg``, from Kafka or MySQL). The op runs :func:`changelake.pipeline.maintenance.maintain_pipeline_lake`
(Iceberg: compaction, snapshot expiry that keeps the resume offsets readable, orphan files); it
is safe beside a running pipeline."""

from pathlib import Path

import dagster as dg
from pydantic import Field

from assets.keys import job_name
from changelake.pipeline.files import load_structure, pipeline_files
from changelake.pipeline.maintenance import has_maintenance
from resources.binding import bind
from resources.lake import LakeCatalogResource
from resources.kafka import KafkaResource
from resources.mysql import MySqlResource

__all__ = ["MaintenanceConfig", "build_maintenance_job", "defs"]


class MaintenanceConfig(dg.Config):
    """Run config of a lake maintenance op (None: the table's properties decide)."""

    max_snapshot_age_ms: int | None = Field(default=None, description="Expire snapshots older than this (ms).")
    min_snapshots_to_keep: int | None = Field(default=None, description="Newest snapshots never expired.")
    orphan_older_than_ms: int = Field(default=3 * 24 * 3600 * 1000, description="Keep unreferenced files younger than this (ms).")
    min_input_files: int = Field(default=5, description="Compact only with at least this many small files.")


def build_maintenance_job(path: Path) -> dg.JobDefinition:
    """The maintenance job of the lake pipeline file ``path`` (its sink declares maintenance)."""
    structure = load_structure(path)
    name = f"{job_name(structure)}_lake_maintenance"

    @dg.op(name=f"maintain_{job_name(structure)}_lake", tags={"kind": structure.sink_type},
           description=f"Compacts, expires snapshots and removes orphan files of the lake of '{structure.name}'.")
    def maintain_op(context: dg.OpExecutionContext, config: MaintenanceConfig, mysql: MySqlResource,
                    kafka: KafkaResource, lake: LakeCatalogResource) -> dg.Output[None]:
        from changelake.connectors.lake.maintenance import MaintenanceOptions
        from changelake.pipeline.maintenance import maintain_pipeline_lake

        defn = bind(path, mysql=mysql, kafka=kafka, lake=lake)
        results = maintain_pipeline_lake(defn, MaintenanceOptions(
            max_snapshot_age_ms=config.max_snapshot_age_ms, min_snapshots_to_keep=config.min_snapshots_to_keep,
            orphan_older_than_ms=config.orphan_older_than_ms, min_input_files=config.min_input_files))
        for r in results:
            context.log.info(f"{r.table}: {r}")
        return dg.Output(None, metadata={
            "tables": len(results),
            "snapshots_expired": sum(r.snapshots_expired for r in results),
            "files_compacted": sum(r.files_compacted for r in results),
            "orphan_files_deleted": sum(r.orphan_files_deleted for r in results),
        })

    @dg.job(name=name, description=f"{structure.sink_type.capitalize()} maintenance of the lake tables of pipeline "
                                   f"'{structure.name}'.",
            tags={"changelake/lake-maintenance": structure.name})  # not the pipeline's tag: never queued behind it
    def maintenance_job() -> None:
        maintain_op()

    return maintenance_job


def defs() -> dg.Definitions:
    jobs, schedules = [], []
    for path in pipeline_files():
        if not has_maintenance(load_structure(path)):
            continue
        job = build_maintenance_job(path)
        jobs.append(job)
        schedules.append(dg.ScheduleDefinition(
            name=f"{job.name}_daily", job=job, cron_schedule="0 3 * * *",
            default_status=dg.DefaultScheduleStatus.STOPPED,
            description="Daily lake maintenance (compaction, snapshot expiry, orphan files); off by default.",
        ))
    return dg.Definitions(jobs=jobs, schedules=schedules)
