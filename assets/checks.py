"""Asset checks of each lake table, evaluated after every materialization of it and by
``changelake check`` (headless, for CI):

* ``key_state_matches_mysql`` (ERROR): DuckDB compares the lake's rows with MySQL's by a full
  outer join on the primary key (``changelake.pipeline.verify``); a table that differs is compared
  once more after a short pause, so a live workload does not raise a false alarm.
* ``no_duplicate_primary_keys`` (ERROR): every primary key occurs once in the lake table.
* ``lake_is_fresh`` (WARN): the table is not behind its Kafka topic, or its last commit is recent
  enough that the lag is being worked off (``changelake.pipeline.lake_checks``).
"""


import re
from pathlib import Path

import dagster as dg

from assets.keys import job_name, lake_asset_key
from changelake.changelog import TableId
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.lake_tables import lake_tables
from changelake.pipeline.naming import FRESHNESS_CHECK, KEY_STATE_CHECK, LAKE_CHECKS, UNIQUE_KEYS_CHECK, lake_checks_of
from resources.binding import bind
from resources.lake import LakeCatalogResource
from resources.kafka import KafkaResource
from resources.mysql import MySqlResource

__all__ = ["KEY_STATE_CHECK", "UNIQUE_KEYS_CHECK", "FRESHNESS_CHECK", "LAKE_CHECKS", "build_key_state_checks"]


#: how long a lake table may stay behind its topic before its freshness check fails
FRESHNESS_MAX_AGE_S = 300.0


def _descriptions(table: object) -> dict[str, str]:
    return {
        KEY_STATE_CHECK: f"Lake table {table} holds exactly MySQL's rows of {table} (every key, every column).",
        UNIQUE_KEYS_CHECK: f"Every primary key occurs once in lake table {table}.",
        FRESHNESS_CHECK: (
            f"Lake table {table} is not behind its Kafka topic, or absorbed data within the last "
            f"{int(FRESHNESS_MAX_AGE_S)} s (red when the lake falls behind)."
        ),
    }


def build_key_state_checks(path: Path, structure: PipelineDefinition) -> list[dg.AssetChecksDefinition]:
    """The checks of every lake table of the pipeline: one definition per table (its three checks,
    subsettable), so a table that was not materialized does not hold back the others' checks."""
    return [_table_checks(path, structure, table) for table in lake_tables(structure)]


def _table_checks(path: Path, structure: PipelineDefinition, table: TableId) -> dg.AssetChecksDefinition:
    asset = lake_asset_key(str(table))
    names = lake_checks_of(structure)
    specs = [
        dg.AssetCheckSpec(name, asset=asset, description=_descriptions(table)[name], blocking=False)
        for name in names
    ]
    node = re.sub(r"\W", "_", f"{job_name(structure)}_{table}_checks")

    @dg.multi_asset_check(name=node, specs=specs, can_subset=True)
    def lake_checks(
        context: dg.AssetCheckExecutionContext, mysql: MySqlResource, kafka: KafkaResource, lake: LakeCatalogResource
    ):
        from changelake.errors import ChangelakeError
        from changelake.pipeline.lake_checks import check_freshness, check_unique_keys
        from changelake.pipeline.verify import verify_lake_table

        defn = bind(path, mysql=mysql, kafka=kafka, lake=lake)
        selected = context.selected_asset_check_keys
        for name in names:
            if dg.AssetCheckKey(asset, name) not in selected:
                continue
            severity = dg.AssetCheckSeverity.WARN if name == FRESHNESS_CHECK else dg.AssetCheckSeverity.ERROR
            try:
                if name == KEY_STATE_CHECK:
                    result = verify_lake_table(defn, table, mysql=mysql.connection_params(), recheck_after_s=2.0)
                elif name == UNIQUE_KEYS_CHECK:
                    result = check_unique_keys(defn, table)
                else:
                    result = check_freshness(defn, table, max_age_s=FRESHNESS_MAX_AGE_S)
                passed, metadata = result.passed, result.metadata()
            except ChangelakeError as exc:  # e.g. the lake table does not exist yet
                passed, metadata = False, {"error": f"{type(exc).__name__}: {exc}"}
            yield dg.AssetCheckResult(asset_key=asset, check_name=name, passed=passed, severity=severity, metadata=metadata)

    return lake_checks
