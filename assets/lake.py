"""Lake-table assets: one lake table (Iceberg or Paimon) per topic of each Kafka -> lake pipeline."""


from pathlib import Path

import dagster as dg

from changelake.changelog import TableId
from changelake.connectors.lake import LAKE_SINK_TYPES
from changelake.pipeline.definition import PipelineDefinition, load_pipeline
from changelake.pipeline.discovery import discovered_tables
from platform_defs.pipelines import job_name, lake_asset_key, load_structure, pipeline_files
from resources.connections import IcebergCatalogResource, KafkaResource, MySqlResource, pipeline_env

__all__ = ["LAKE_GROUP", "lake_tables", "build_lake_assets", "lake_pipelines"]

LAKE_GROUP = "lake"


def lake_pipelines() -> list[tuple[Path, PipelineDefinition]]:
    """The (path, structure) of every pipeline whose sink is a lake (Iceberg or Paimon)."""
    out = []
    for path in pipeline_files():
        structure = load_structure(path)
        if structure.sink_type in LAKE_SINK_TYPES:
            out.append((path, structure))
    return out


def lake_tables(structure: PipelineDefinition) -> list[TableId]:
    """Lake tables of a pipeline: one per topic of its ``topic`` list (topics are named ``db.table``),
    plus the tables the pipeline has found at run time (new topics of a ``topic-pattern``, new tables
    in a distributed topic), read from its local discovery file (no network)."""
    topics = [t.strip() for t in structure.source.get("topic", "").split(";") if t.strip()]
    listed = [TableId.parse(t) for t in topics]
    return listed + [t for t in discovered_tables(structure.name) if t not in listed]


def build_lake_assets(path: Path, structure: PipelineDefinition) -> dg.AssetsDefinition:
    """A multi-asset materializing the pipeline's lake tables: one bounded run of the pipeline
    (ingest up to the end offsets seen at its start, commit, stop)."""
    tables = lake_tables(structure)
    specs = [
        dg.AssetSpec(
            key=lake_asset_key(str(t)),
            group_name=LAKE_GROUP,
            description=f"{structure.sink_type.capitalize()} table `{t}`, upserted by primary key from Kafka topic `{t}` "
            f"(pipeline {structure.name}).",
            kinds={structure.sink_type, "kafka"},
            skippable=True,
        )
        for t in tables
    ]

    @dg.multi_asset(name=f"{job_name(structure)}_lake", specs=specs, can_subset=False)
    def lake_assets(
        context: dg.AssetExecutionContext, mysql: MySqlResource, kafka: KafkaResource, lake: IcebergCatalogResource
    ):
        from changelake.pipeline.runner import run_pipeline

        defn = load_pipeline(path, env=pipeline_env(mysql, kafka, lake))
        stats = run_pipeline(defn, until_caught_up=True)
        context.log.info(f"pipeline {defn.name}: {stats.metadata()}")
        for table in tables:
            yield dg.MaterializeResult(
                asset_key=lake_asset_key(str(table)),
                metadata={
                    "rows_applied": dg.MetadataValue.int(int(stats.tables.get(str(table), 0))),
                    "pipeline": defn.name,
                    "kafka_offsets": dg.MetadataValue.json(stats.offsets_json()),
                    "schema_inferred": str(table) in stats.inferred_schema_tables,
                    "bad_records": stats.bad_records,
                    "dead_letters": stats.dead_letters,
                },
            )

    return lake_assets
