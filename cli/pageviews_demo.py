"""``changelake demo``'s step 5 (it runs a Dagster job, so it lives with the commands, not in
``changelake.demo``): materialize the page-views assets (generator -> PV/UV per region) and run the check."""

from __future__ import annotations

__all__ = ["run_pageviews_demo"]


def run_pageviews_demo(bootstrap: str, events: int = 5000) -> bool:
    """Produce ``events`` page views, aggregate them into the upsert-kafka table exactly-once, and
    compare with DuckDB's recomputation. Prints the table; returns whether the check passed."""
    import dagster as dg

    from assets import metadata as M
    from cli.pipeline import QUIET_LOG_LEVEL
    from platform_defs.definitions import defs

    job = defs.resolve_job_def("pageviews_per_region_job")
    result = job.execute_in_process(
        instance=dg.DagsterInstance.get(),
        raise_on_error=False,
        run_config={
            "ops": {"pageviews": {"config": {"events": events}}},
            "loggers": {"console": {"config": {"log_level": QUIET_LOG_LEVEL}}},
        },
    )
    for mat in result.asset_materializations_for_node("pageviews_per_region"):
        md = {k: v.value for k, v in mat.metadata.items()}
        sink = M.SINK_METRIC_PREFIX
        print(
            f"aggregated {md.get(M.EVENTS_READ)} events in {md.get(M.TRANSACTIONS)} transaction(s); "
            f"changelog {md.get(M.CHANGELOG_ROWS_OUT)}; upsert records written {md.get(M.RECORDS_WRITTEN)}; "
            f"sink numRecordsOut={md.get(sink + 'numRecordsOut')} numBytesOut={md.get(sink + 'numBytesOut')}"
        )
    evaluations = result.get_asset_check_evaluations()
    for evaluation in evaluations:
        md = {k: v.value for k, v in evaluation.metadata.items()}
        print(f"{'region':10s} {'pv':>8s} {'uv':>8s}")
        for region, (pv, uv) in md.get(M.PV_UV, {}).items():
            print(f"{region:10s} {pv:8d} {uv:8d}")
        print(f"check pv_uv_match_duckdb_recomputation: {'PASS' if evaluation.passed else 'FAIL'} "
              f"(differing regions: {md.get(M.DIFFERING_REGIONS)})")
    if not result.success:
        from cli._dagster import failure_messages

        for line in failure_messages(result) or ["the page-views run failed"]:
            print(f"error: {line}")
        return False
    return bool(evaluations) and all(e.passed for e in evaluations)
