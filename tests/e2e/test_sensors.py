"""Sensors, one test per case (build_sensor_context + direct evaluation)."""

from __future__ import annotations

import dagster as dg

from sensors.pipelines import make_relaunch_sensor


@dg.op
def _noop() -> None:
    pass


@dg.job
def streaming_job() -> None:
    _noop()


def test_relaunch_requests_an_unbounded_run_when_none_is_active():
    sensor = make_relaunch_sensor(streaming_job, "_noop")
    with dg.instance_for_test() as instance:
        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance))
        assert len(result.run_requests) == 1
        assert result.run_requests[0].run_config == {"ops": {"_noop": {"config": {"until_caught_up": False}}}}


def test_relaunch_skips_while_a_run_is_active():
    sensor = make_relaunch_sensor(streaming_job, "_noop")
    with dg.instance_for_test() as instance:
        from dagster._core.storage.dagster_run import DagsterRunStatus

        run = instance.create_run_for_job(streaming_job, run_config={})
        instance.run_storage.handle_run_event(
            run.run_id,
            dg.DagsterEvent(event_type_value="PIPELINE_START", job_name=streaming_job.name, message="started"),
        )
        assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.STARTED
        result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance))
        assert not result.run_requests
        assert "is running" in result.skip_message
