"""A standby run: waits while the pipeline's active run lives, then takes over (Pipeline 1 HA).

As Debezium's and Flink CDC's high availability: one binlog reader per server, a standby elsewhere
(another machine, its own state folder; shared are only MySQL, Kafka and the Dagster instance).
The standby's op beats like any pipeline op (:mod:`sensors.liveness`) with the run tag
:data:`ROLE_TAG` ``= standby`` and does not start its pipeline while another run of the same
pipeline is alive (queued, starting or started, not judged dead by
:func:`sensors.liveness.worker_gone`: its process gone on this host, or no heartbeat for
``HEARTBEAT_TIMEOUT_S`` from anywhere). When none is left, the dead ones are marked failed in the
instance, the role becomes ``active``, and the pipeline starts: its Kafka sink's
``init_transactions`` (same ``transactional.id``) fences the old reader, whose open transaction is
aborted, and it resumes from the last committed position. An old active that was only paused (a
zombie) and comes back is fenced at its next transaction and fails without writing.

Among several standbys, the oldest live one takes over; the others keep waiting for it.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

import dagster as dg

from assets.keys import PIPELINE_TAG
from sensors.liveness import HEARTBEAT_S, worker_gone

__all__ = ["ROLE_TAG", "wait_for_takeover"]

#: Run tag naming a pipeline run's role: ``standby`` (waiting) or ``active`` (reading).
ROLE_TAG = "changelake/role"

_LIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
         dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def _blocking_run(instance: dg.DagsterInstance, run_id: str, pipeline: str,
                  log: Callable[[str], None]) -> dg.DagsterRun | None:
    """The live run this standby waits for (an active run, or an older standby), or None.
    Dead runs met on the way are marked failed (canceled while canceling), as ``changelake
    pipeline run`` does."""
    me = instance.get_run_record_by_id(run_id)
    my_created = me.create_timestamp if me is not None else None
    blocking = None
    for record in instance.get_run_records(dg.RunsFilter(tags={PIPELINE_TAG: pipeline}, statuses=_LIVE)):
        run = record.dagster_run
        if run.run_id == run_id:
            continue
        why = worker_gone(run, record, pipeline)
        if why is not None:
            message = f"run {run.run_id} of pipeline '{pipeline}' died: {why}"
            if run.status == dg.DagsterRunStatus.CANCELING:
                instance.report_run_canceled(run, message)
            else:
                instance.report_run_failed(run, message)
            log(f"standby: marked {message}")
            continue
        if run.tags.get(ROLE_TAG) == "standby" and my_created is not None and record.create_timestamp > my_created:
            continue  # a younger standby waits for this one
        blocking = blocking or run
    return blocking


def wait_for_takeover(context: Any, pipeline: str, stop: threading.Event, poll_s: float | None = None) -> bool:
    """Wait as a standby of ``pipeline`` until no other run of it lives; then tag this run
    ``active`` and return True. Returns False if ``stop`` was set first (nothing was read).

    ``context``: the op's context (``instance``, ``run_id``, ``log``). Polls the instance every
    ``poll_s`` seconds (default the heartbeat interval). The caller keeps beating meanwhile.
    """
    def say(line: str) -> None:  # the CLI runs with a quiet console log: transitions go to stderr too
        context.log.info(line)
        print(line, file=sys.stderr, flush=True)

    instance: dg.DagsterInstance = context.instance
    poll_s = HEARTBEAT_S if poll_s is None else poll_s
    instance.add_run_tags(context.run_id, {ROLE_TAG: "standby"})
    waiting_for = None
    while not stop.is_set():
        run = _blocking_run(instance, context.run_id, pipeline, say)
        if run is None:
            instance.add_run_tags(context.run_id, {ROLE_TAG: "active"})
            say(f"standby: no live run of pipeline '{pipeline}' is left: taking over (its reader is "
                             "fenced by this run's init_transactions)")
            return True
        if run.run_id != waiting_for:
            waiting_for = run.run_id
            say(f"standby: waiting while run {run.run_id} of pipeline '{pipeline}' "
                             f"({run.tags.get(ROLE_TAG, 'active')}) is alive")
        stop.wait(poll_s)
    return False
