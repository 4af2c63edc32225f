"""Lake-table assets and the lineage around them: MySQL tables -> Kafka topics -> lake tables.

* ``mysql/<db>/<table>``: each captured MySQL table, an external asset (kind ``mysql``).
* ``kafka/<db>/<table>``: each topic, an external asset; Pipeline 1's op reports a materialization
  per commit (records, offsets, position).
* ``lake/<db>/<table>``: each lake table (Iceberg or Paimon). One asset per table, all of a pipeline's tables in one
  subsettable definition: materializing a selection ingests those tables' topics up to the end
  offsets seen at the start, commits, and reports only the tables that changed. The lag sensor
  launches it; the pipeline's long-running op reports the same assets per commit, with the same
  metadata.
"""


from dataclasses import replace
from pathlib import Path

import dagster as dg

from changelake.changelog import TableId
from changelake.changelog.selectors import Selectors
from changelake.connectors.lake import LAKE_SINK_TYPES
from changelake.pipeline.definition import PipelineDefinition, load_pipeline
from changelake.pipeline.discovery import discovered_tables
from platform_defs.keys import job_name, lake_asset_key, mysql_asset_key, pool_name, topic_asset_key
from platform_defs.pipelines import load_structure, pipeline_files
from resources.connections import IcebergCatalogResource, KafkaResource, MySqlResource, pipeline_env

__all__ = ["LAKE_GROUP", "SOURCES_GROUP", "lake_tables", "build_lake_assets", "lake_pipelines", "build_lineage_specs"]

LAKE_GROUP = "lake"
SOURCES_GROUP = "sources"


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


def _captured_by(structures: list[PipelineDefinition], table: TableId) -> PipelineDefinition | None:
    """The MySQL pipeline whose ``tables`` pattern captures ``table`` (None if none does)."""
    for s in structures:
        pattern = s.source.get("tables", "")
        if s.source_type == "mysql" and pattern:
            try:
                if Selectors.parse(pattern).matches(table):
                    return s
            except Exception:  # a malformed pattern is reported when that pipeline runs
                continue
    return None


def build_lineage_specs(structures: list[PipelineDefinition]) -> list[dg.AssetSpec]:
    """External assets for the topics read by Kafka -> Iceberg pipelines and the MySQL tables
    captured into them (known without touching the network: topics are listed in the YAML)."""
    specs: dict[dg.AssetKey, dg.AssetSpec] = {}
    for s in structures:
        if s.sink_type not in LAKE_SINK_TYPES:
            continue
        for table in lake_tables(s):
            source = _captured_by(structures, table)
            deps = []
            if source is not None:
                mkey = mysql_asset_key(str(table))
                deps.append(mkey)
                specs.setdefault(mkey, dg.AssetSpec(
                    mkey, group_name=SOURCES_GROUP, kinds={"mysql"},
                    description=f"MySQL table `{table}`, captured from the binlog by pipeline {source.name}.",
                ))
            tkey = topic_asset_key(str(table))
            writer = f" by pipeline {source.name}" if source is not None else ""
            specs.setdefault(tkey, dg.AssetSpec(
                tkey, group_name=SOURCES_GROUP, kinds={"kafka"}, deps=deps,
                description=f"Kafka topic `{table}` (Debezium-JSON change events), written{writer}.",
            ))
    return list(specs.values())


def build_lake_assets(path: Path, structure: PipelineDefinition) -> dg.AssetsDefinition:
    """One asset per lake table of the pipeline, materializable one at a time or together."""
    tables = lake_tables(structure)
    specs = [
        dg.AssetSpec(
            key=lake_asset_key(str(t)),
            group_name=LAKE_GROUP,
            description=f"{structure.sink_type.capitalize()} table `{t}`, upserted by primary key from Kafka topic `{t}` "
            f"(pipeline {structure.name}).",
            kinds={structure.sink_type},
            deps=[topic_asset_key(str(t))],
            skippable=True,
            tags={"changelake/pipeline": structure.name},
        )
        for t in tables
    ]

    @dg.multi_asset(
        name=f"{job_name(structure)}_lake",
        specs=specs,
        can_subset=True,
        pool=pool_name(structure),
        description=f"Ingests the selected lake tables of pipeline {structure.name} up to Kafka's end offsets; "
        "tables with nothing new are not materialized.",
    )
    def lake_assets(
        context: dg.AssetExecutionContext, mysql: MySqlResource, kafka: KafkaResource, lake: IcebergCatalogResource
    ):
        from changelake.pipeline.lock import PipelineLock
        from changelake.pipeline.runner import kafka_lag, run_pipeline
        from platform_defs.reporting import LakeReporter, lake_metadata
        from platform_defs.running import state_dir

        selected = [t for t in tables if lake_asset_key(str(t)) in context.selected_asset_keys]
        defn = load_pipeline(path, env=pipeline_env(mysql, kafka, lake))
        defn = replace(defn, source={**defn.source, "topic": ";".join(str(t) for t in selected)})
        reporter = LakeReporter(defn, per_commit=False)
        try:
            with PipelineLock(state_dir(), defn.name, context.run.run_id):
                stats = run_pipeline(defn, until_caught_up=True, on_batch=reporter.progress.add)
                positions = kafka_lag(defn)
        finally:
            reporter.close()
        context.log.info(f"pipeline {defn.name}: {stats.metadata()}")
        for table in selected:
            progress = reporter.progress.get(str(table))
            lag = sum(max(0, end - done) for tp, (done, end) in positions.items() if tp.rpartition("/")[0] == str(table))
            if not progress.changed:
                context.log.info(f"{table}: nothing new on its topic (lag {lag}); not materialized")
                continue
            yield dg.MaterializeResult(asset_key=lake_asset_key(str(table)), metadata=lake_metadata(progress, lag, defn.name))

    return lake_assets
