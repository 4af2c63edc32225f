"""DuckDB asset checks: each lake table's key state equals the MySQL table's.

A full outer join on the primary key compares every column (see
``changelake.checks.key_state``). A table that differs is compared once more after a short pause,
so a live workload that the pipelines have not caught up with yet does not raise a false alarm.
"""


from pathlib import Path

import dagster as dg

from assets.lake import lake_tables
from changelake.pipeline.definition import PipelineDefinition, load_pipeline
from platform_defs.pipelines import job_name, lake_asset_key
from resources.connections import IcebergCatalogResource, KafkaResource, MySqlResource, pipeline_env

__all__ = ["KEY_STATE_CHECK", "build_key_state_checks"]

KEY_STATE_CHECK = "key_state_matches_mysql"


def build_key_state_checks(path: Path, structure: PipelineDefinition) -> dg.AssetChecksDefinition:
    """One check per lake table of the pipeline, all evaluated by one op."""
    tables = lake_tables(structure)
    specs = [
        dg.AssetCheckSpec(
            KEY_STATE_CHECK,
            asset=lake_asset_key(str(t)),
            description=f"Lake table {t} holds exactly MySQL's rows of {t} (every key, every column).",
            blocking=False,
        )
        for t in tables
    ]

    @dg.multi_asset_check(name=f"{job_name(structure)}_key_state_checks", specs=specs, can_subset=True)
    def key_state_checks(
        context: dg.AssetCheckExecutionContext, mysql: MySqlResource, kafka: KafkaResource, lake: IcebergCatalogResource
    ):
        from changelake.pipeline.verify import verify_lake_table

        defn = load_pipeline(path, env=pipeline_env(mysql, kafka, lake))
        selected = context.selected_asset_check_keys
        for table in tables:
            key = dg.AssetCheckKey(lake_asset_key(str(table)), KEY_STATE_CHECK)
            if key not in selected:
                continue
            result = verify_lake_table(defn, table, recheck_after_s=2.0)
            yield dg.AssetCheckResult(
                asset_key=key.asset_key,
                check_name=KEY_STATE_CHECK,
                passed=result.passed,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata=result.metadata(),
            )

    return key_state_checks
