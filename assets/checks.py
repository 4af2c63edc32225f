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
from assets.metadata import ERROR, NEXT_STEP, SAMPLES
from changelake.changelog import TableId
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.lake_tables import lake_tables
from assets.keys import FRESHNESS_CHECK, KEY_STATE_CHECK, LAKE_CHECKS, UNIQUE_KEYS_CHECK, lake_checks_of
from resources.binding import bind
from resources.lake import LakeCatalogResource
from resources.kafka import KafkaResource
from resources.mysql import MySqlResource

__all__ = ["KEY_STATE_CHECK", "UNIQUE_KEYS_CHECK", "FRESHNESS_CHECK", "LAKE_CHECKS", "CHECKS_FAILED_MARK",
           "build_key_state_checks", "explain_failure", "next_step_text"]

#: first words of the step failure a check definition raises when one of its ERROR checks failed
CHECKS_FAILED_MARK = "lake checks failed on"


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


def _upstream_of(table: TableId) -> Path | None:
    """The file of the MySQL -> Kafka pipeline (in the pipelines folder) whose ``tables`` capture
    ``table``, or None."""
    from assets.lake import _captured_by
    from changelake.pipeline.files import load_pipelines

    pipelines = load_pipelines()
    found = _captured_by([s for _, s in pipelines], table)
    return next((p for p, s in pipelines if s is found), None) if found is not None else None


def next_step_text(check: str, path: Path, result: object = None) -> str:
    """What to do when ``check`` failed on a lake table of the pipeline in file ``path``."""
    import os

    from changelake.checks.key_state import next_step

    try:
        shown = os.path.relpath(path)
        shown = shown if not shown.startswith("..") else str(path)
    except ValueError:  # another drive
        shown = str(path)
    run = f"changelake pipeline run {shown} --until-caught-up"
    if result is None:  # the check could not run (e.g. the lake table does not exist yet)
        return f"Run the pipelines until caught up (Pipeline 1, then `{run}`), then re-check."
    if check == KEY_STATE_CHECK and hasattr(result, "comparison"):
        return next_step(False, result.comparison.duplicate_keys_lake,
                         mysql_table_exists=getattr(result, "mysql_table_exists", True))
    if check == UNIQUE_KEYS_CHECK:
        return next_step(False, duplicate_keys_lake=1)
    if check == FRESHNESS_CHECK:
        return (f"The lake is behind: start the pipeline's continuous job, or run `{run}` (and the MySQL -> Kafka "
                "pipeline upstream of it).")
    return f"Run the pipelines until caught up (Pipeline 1, then `{run}`), then re-check."


def explain_failure(check: str, result: object, path: Path) -> dict[str, object]:
    """Metadata of a failed check: ``samples`` (Markdown table of differing keys, MySQL value vs
    lake value, for the key-state check) and ``next_step``."""
    md: dict[str, object] = {NEXT_STEP: next_step_text(check, path, result)}
    comparison = getattr(result, "comparison", None)
    if comparison is not None:
        table = comparison.samples_markdown()
        if table:
            md[SAMPLES] = dg.MetadataValue.md(table)
    return md


def build_key_state_checks(path: Path, structure: PipelineDefinition) -> list[dg.AssetChecksDefinition]:
    """The checks of every lake table of the pipeline: one definition per table (its three checks,
    subsettable), so a table that was not materialized does not hold back the others' checks."""
    return [_table_checks(path, structure, table) for table in lake_tables(structure)]


def _table_checks(path: Path, structure: PipelineDefinition, table: TableId) -> dg.AssetChecksDefinition:
    asset = lake_asset_key(structure, table)
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
        failed: list[str] = []
        for name in names:
            if dg.AssetCheckKey(asset, name) not in selected:
                continue
            severity = dg.AssetCheckSeverity.WARN if name == FRESHNESS_CHECK else dg.AssetCheckSeverity.ERROR
            result = None
            try:
                if name == KEY_STATE_CHECK:
                    result = verify_lake_table(defn, table, mysql=mysql.connection_params(), recheck_after_s=2.0)
                elif name == UNIQUE_KEYS_CHECK:
                    result = check_unique_keys(defn, table)
                else:
                    upstream = _upstream_of(table)
                    result = check_freshness(
                        defn, table, max_age_s=FRESHNESS_MAX_AGE_S,
                        upstream=bind(upstream, mysql=mysql, kafka=kafka) if upstream is not None else None,
                        mysql=mysql.connection_params() if upstream is not None else None)
                passed, metadata = result.passed, result.metadata()
            except ChangelakeError as exc:  # e.g. the lake table does not exist yet
                passed, metadata = False, {ERROR: f"{type(exc).__name__}: {exc}"}
            if not passed:
                metadata.update(explain_failure(name, result, path))
                if severity == dg.AssetCheckSeverity.ERROR:
                    failed.append(name)
            yield dg.AssetCheckResult(asset_key=asset, check_name=name, passed=passed, severity=severity, metadata=metadata)
        if failed:
            # The results above are recorded; failing the step keeps the run from being listed
            # as a plain Success when an ERROR check failed.
            raise dg.Failure(
                description=f"{CHECKS_FAILED_MARK} {table}: {', '.join(failed)}. {next_step_text(failed[0], path)}",
            )

    return lake_checks
