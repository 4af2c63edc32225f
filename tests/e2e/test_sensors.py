"""Sensors, one test per case (build_sensor_context + direct evaluation).

The relaunch sensor brings back a run that died and never one a person stopped."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from sensors.pipelines import RELAUNCH_ATTEMPT_TAG, RELAUNCHED_FROM_TAG, make_relaunch_sensor

UNBOUNDED = {"ops": {"_noop": {"config": {"until_caught_up": False}}}}


@dg.op(config_schema={"until_caught_up": bool})
def _noop() -> None:
    pass


@dg.job(tags={"changelake/pipeline": "streaming"})
def streaming_job() -> None:
    _noop()


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path))


def _run(instance, event: str | None, run_config=UNBOUNDED):
    run = instance.create_run_for_job(streaming_job, run_config=run_config)
    if event:
        instance.run_storage.handle_run_event(
            run.run_id, dg.DagsterEvent(event_type_value=event, job_name=streaming_job.name, message=event)
        )
    return instance.get_run_by_id(run.run_id)


def _tick(instance):
    return make_relaunch_sensor(streaming_job, "_noop").evaluate_tick(dg.build_sensor_context(instance=instance))


def test_no_run_yet_is_not_a_death():
    with dg.instance_for_test() as instance:
        result = _tick(instance)
        assert not result.run_requests and "no run of streaming_job yet" in result.skip_message


def test_skips_while_a_run_is_active():
    from sensors.liveness import heartbeat_tags

    with dg.instance_for_test() as instance:
        run = _run(instance, "PIPELINE_START")
        instance.add_run_tags(run.run_id, heartbeat_tags())  # its op beats
        result = _tick(instance)
        assert not result.run_requests and "is running" in result.skip_message


def test_a_just_started_run_without_a_beat_yet_is_alive():
    with dg.instance_for_test() as instance:
        _run(instance, "PIPELINE_START")
        result = _tick(instance)
        assert not result.run_requests and "is running" in result.skip_message


def test_a_run_terminated_by_a_person_is_not_relaunched():
    with dg.instance_for_test() as instance:
        _run(instance, "PIPELINE_CANCELED")
        result = _tick(instance)
        assert not result.run_requests and "stopped by a person" in result.skip_message


def test_a_run_that_finished_is_not_relaunched():
    with dg.instance_for_test() as instance:
        _run(instance, "PIPELINE_SUCCESS")
        assert not _tick(instance).run_requests


def test_a_failed_unbounded_run_is_relaunched_once_per_failure():
    with dg.instance_for_test() as instance:
        failed = _run(instance, "PIPELINE_FAILURE")
        (request,) = _tick(instance).run_requests
        assert request.run_config == UNBOUNDED
        assert request.tags[RELAUNCHED_FROM_TAG] == failed.run_id and request.tags[RELAUNCH_ATTEMPT_TAG] == "1"
        assert request.run_key == f"relaunch-{failed.run_id}"


def test_a_failed_bounded_run_is_not_relaunched():
    with dg.instance_for_test() as instance:
        _run(instance, "PIPELINE_FAILURE", {"ops": {"_noop": {"config": {"until_caught_up": True}}}})
        assert "bounded" in _tick(instance).skip_message


def test_a_started_run_whose_worker_is_gone_is_marked_failed_and_relaunched():
    import socket

    from sensors.liveness import HOST_TAG, PID_TAG, heartbeat_tags

    with dg.instance_for_test() as instance:
        run = _run(instance, "PIPELINE_START")
        # its op beat a moment ago, then its process was killed (kill -9): dead at once on this host
        instance.add_run_tags(run.run_id, {**heartbeat_tags(), HOST_TAG: socket.gethostname(), PID_TAG: "999999"})
        (request,) = _tick(instance).run_requests
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
        assert request.tags[RELAUNCHED_FROM_TAG] == run.run_id


def test_a_run_on_another_machine_whose_heartbeat_stopped_is_marked_failed_and_relaunched():
    import time

    from sensors.liveness import HEARTBEAT_TIMEOUT_S, HOST_TAG, PID_TAG, heartbeat_tags

    with dg.instance_for_test() as instance:
        run = _run(instance, "PIPELINE_START")
        instance.add_run_tags(run.run_id, {**heartbeat_tags(time.time() - HEARTBEAT_TIMEOUT_S - 5),
                                           HOST_TAG: "another-machine", PID_TAG: "1"})
        (request,) = _tick(instance).run_requests
        failed = instance.get_run_by_id(run.run_id)
        assert failed.status == dg.DagsterRunStatus.FAILURE
        assert request.tags[RELAUNCHED_FROM_TAG] == run.run_id
