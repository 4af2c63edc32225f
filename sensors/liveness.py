"""Is the run driving a pipeline alive? The pipeline's lock tells (used by the relaunch sensor
and by ``changelake pipeline run``, so a crash never blocks the next run)."""

from __future__ import annotations

import time

import dagster as dg

from changelake.pipeline.lock import probe_lock
from changelake.services import default_state_dir

__all__ = ["LOCK_GRACE_S", "worker_gone"]

#: seconds a started run may take to reach its op and take the pipeline lock.
LOCK_GRACE_S = 120.0


def worker_gone(run: dg.DagsterRun, record: dg.RunRecord, pipeline: str) -> str | None:
    """Why ``run`` (STARTED or CANCELING) is dead, or None: the pipeline's lock is not held
    although this run took it (or it should have long ago). Run monitoring cannot see a killed
    worker under the default run launcher; the lock can, on the machine that runs the pipelines."""
    if run.status not in (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING):
        return None
    held, holder = probe_lock(default_state_dir(), pipeline)
    if held:
        return None
    if holder is not None and holder.run_id == run.run_id:
        return f"its run worker (pid {holder.pid} on {holder.host}) is gone: the pipeline lock is no longer held"
    started = record.start_time or record.create_timestamp.timestamp()
    if started and time.time() - started > LOCK_GRACE_S:
        return f"it never took the pipeline lock in {int(LOCK_GRACE_S)} s"
    return None
