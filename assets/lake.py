"""Lake-table assets and the lineage around them: MySQL tables -> Kafka topics -> lake tables, or
MySQL tables -> lake tables for a pipeline that runs ``mysql`` straight into the lake.

* ``mysql/<db>/<table>``: each captured MySQL table, an external asset (kind ``mysql``).
* ``kafka/<db>/<table>``: each topic, an external asset; Pipeline 1's op reports a materialization
  per commit (records, offsets, position).
* ``lake/<pipeline>/<db>/<table>``: each lake table (Iceberg or Paimon) of one pipeline (two
  pipelines never share a lake asset). One asset per table, all of a pipeline's tables in one definition. From Kafka it is subsettable: materializing a selection
  ingests those tables' topics up to the end offsets seen at the start, commits, and reports only
  the tables that changed. From MySQL it is not: the binlog position is one for all tables, so a
  materialization runs the whole pipeline until caught up. The lag sensor launches the Kafka kind;
  the pipeline's long-running op reports the same assets per commit, with the same metadata.
"""


from dataclasses import replace
from pathlib import Path

import dagster as dg

from assets.metadata import LAKE_KIND, LAKE_TABLE
from assets.keys import job_name, lake_asset_key, mysql_asset_key, pool_name, topic_asset_key
from changelake.changelog import TableId
from changelake.connectors.registry import is_partitioned_source
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.lake_tables import captures, from_mysql, is_lake, lake_tables, mysql_table_of
from resources.binding import bind
from resources.lake import LakeCatalogResource
from resources.kafka import KafkaResource
from resources.mysql import MySqlResource

__all__ = ["LAKE_GROUP", "SOURCES_GROUP", "lake_tables", "build_lake_assets", "build_lineage_specs"]

LAKE_GROUP = "lake"
SOURCES_GROUP = "sources"


def _captured_by(structures: list[PipelineDefinition], table: TableId) -> PipelineDefinition | None:
    """The MySQL -> Kafka pipeline whose ``tables`` pattern captures ``table`` (None if none does)."""
    for s in structures:
        if not is_lake(s) and not is_partitioned_source(s.source_type) and captures(s, table):
            return s
    return None


def _mysql_spec(table: TableId, pipeline: str) -> dg.AssetSpec:
    return dg.AssetSpec(
        mysql_asset_key(str(table)), group_name=SOURCES_GROUP, kinds={"mysql"},
        description=f"MySQL table `{table}`, captured from the binlog by pipeline {pipeline}.",
    )


def build_lineage_specs(structures: list[PipelineDefinition]) -> list[dg.AssetSpec]:
    """External assets upstream of the lake tables (known without touching the network): the
    topics read by Kafka -> lake pipelines and the MySQL tables captured into them, and the MySQL
    tables of MySQL -> lake pipelines."""
    specs: dict[dg.AssetKey, dg.AssetSpec] = {}
    for s in structures:
        if not is_lake(s):
            continue
        for table in lake_tables(s):
            if from_mysql(s):
                source_table = mysql_table_of(s, table)
                if source_table is not None:
                    specs.setdefault(mysql_asset_key(str(source_table)), _mysql_spec(source_table, s.name))
                continue
            source = _captured_by(structures, table)
            deps = []
            if source is not None:
                deps.append(mysql_asset_key(str(table)))
                specs.setdefault(deps[0], _mysql_spec(table, source.name))
            tkey = topic_asset_key(str(table))
            writer = f" by pipeline {source.name}" if source is not None else ""
            specs.setdefault(tkey, dg.AssetSpec(
                tkey, group_name=SOURCES_GROUP, kinds={"kafka"}, deps=deps,
                description=f"Kafka topic `{table}` (Debezium-JSON change events), written{writer}.",
            ))
    return list(specs.values())


def _spec(structure: PipelineDefinition, table: TableId) -> dg.AssetSpec:
    if from_mysql(structure):
        source = mysql_table_of(structure, table)
        deps = [mysql_asset_key(str(source))] if source is not None else []
        origin = f"from the binlog of MySQL table `{source or table}`"
    else:
        deps, origin = [topic_asset_key(str(table))], f"from Kafka topic `{table}`"
    return dg.AssetSpec(
        key=lake_asset_key(structure, table),
        group_name=LAKE_GROUP,
        description=f"{structure.sink_type.capitalize()} table `{table}`, upserted by primary key {origin} "
        f"(pipeline {structure.name}).",
        kinds={structure.sink_type},
        deps=deps,
        skippable=True,
        tags={"changelake/pipeline": structure.name},
        metadata={LAKE_KIND: structure.sink_type, LAKE_TABLE: str(table)},
    )


def build_lake_assets(path: Path, structure: PipelineDefinition) -> dg.AssetsDefinition:
    """One asset per lake table of the pipeline; from Kafka materializable one at a time or
    together, from MySQL all together (one binlog position)."""
    tables = lake_tables(structure)
    mysql_source = from_mysql(structure)

    @dg.multi_asset(
        name=f"{job_name(structure)}_lake",
        specs=[_spec(structure, t) for t in tables],
        can_subset=not mysql_source,
        pool=pool_name(structure),
        description=(
            f"Runs pipeline {structure.name} (MySQL -> {structure.sink_type}) until caught up with the binlog"
            if mysql_source else
            f"Ingests the selected lake tables of pipeline {structure.name} up to Kafka's end offsets"
        ) + "; tables with nothing new are not materialized.",
    )
    def lake_assets(
        context: dg.AssetExecutionContext, mysql: MySqlResource, kafka: KafkaResource, lake: LakeCatalogResource
    ):
        from assets.reporting import LakeReporter, lake_metadata
        from changelake.pipeline.progress import lag_by_topic
        from changelake.pipeline.lock import PipelineLock
        from changelake.pipeline.lake_checkpoint import kafka_lag
        from changelake.pipeline.runner import run_pipeline
        from changelake.state_dir import default_state_dir

        selected = [t for t in tables if lake_asset_key(structure, t) in context.selected_asset_keys]
        defn = bind(path, mysql=mysql, kafka=kafka, lake=lake)
        if not mysql_source:
            defn = replace(defn, source={**defn.source, "topic": ";".join(str(t) for t in selected)})
        reporter = LakeReporter(defn, per_commit=False)
        try:
            with PipelineLock(default_state_dir(), defn.name, context.run.run_id):
                def on_batch(batch: dict) -> None:
                    reporter.add(batch)
                    line = reporter.progress_line()
                    if line:
                        context.log.info(line)

                stats = run_pipeline(defn, until_caught_up=True, on_batch=on_batch)
                positions = {} if mysql_source else kafka_lag(defn)
        finally:
            reporter.close()
        context.log.info(f"pipeline {defn.name}: {stats.metadata()}")
        for table in selected:
            progress = reporter.progress.get(str(table))
            lag = None if mysql_source else lag_by_topic(positions).get(str(table), 0)
            if not progress.changed:
                context.log.info(f"{table}: nothing new (lag {lag}); not materialized")
                continue
            yield dg.MaterializeResult(asset_key=lake_asset_key(structure, table), metadata=lake_metadata(progress, lag, defn.name))

    return lake_assets
