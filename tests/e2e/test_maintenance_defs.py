"""The lake maintenance job and its schedule (off by default) load with the services down."""

from __future__ import annotations

import dagster as dg


def test_the_lake_pipeline_has_a_maintenance_job_and_a_stopped_daily_schedule():
    from platform_defs.definitions import defs

    job = defs.resolve_job_def("kafka_to_iceberg_lake_maintenance")
    assert job is not None and "maintenance" in (job.description or "")
    schedules = {s.name: s for s in defs.schedules}
    schedule = schedules["kafka_to_iceberg_lake_maintenance_daily"]
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert schedule.description and "off by default" in schedule.description
    assert "mysql_to_kafka_lake_maintenance" not in {j.name for j in defs.jobs}
