"""Is the run driving a pipeline alive? Its heartbeat in the Dagster instance tells, on any machine.

Every pipeline op writes the run tag :data:`HEARTBEAT_TAG` (seconds since the epoch) every
:data:`HEARTBEAT_S` seconds (:mod:`platform_defs.running`); a run that holds no fresh beat for
:data:`HEARTBEAT_TIMEOUT_S` is dead, wherever its worker ran. A run started by ``changelake
pipeline run`` also names its process (:data:`HOST_TAG`, :data:`PID_TAG`, set when the run is
created): on that machine a run whose process is gone is dead at once, so a restart right after a
``kill -9`` — during start-up included, before any beat — is never refused. Used by the relaunch
sensor and by ``changelake pipeline run``; no local lock file is read.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import dagster as dg

__all__ = [
    "HEARTBEAT_S", "HEARTBEAT_TIMEOUT_S", "HEARTBEAT_TAG", "HOST_TAG", "PID_TAG",
    "heartbeat_tags", "process_tags", "worker_gone",
]

#: seconds between two beats of a running pipeline op (``$CHANGELAKE_HEARTBEAT_INTERVAL_S``, as
#: Flink's ``heartbeat.interval``).
HEARTBEAT_S = float(os.environ.get("CHANGELAKE_HEARTBEAT_INTERVAL_S") or 5.0)
#: seconds without a beat after which a started run is dead, a few missed beats
#: (``$CHANGELAKE_HEARTBEAT_TIMEOUT_S``, as Flink's ``heartbeat.timeout``).
HEARTBEAT_TIMEOUT_S = float(os.environ.get("CHANGELAKE_HEARTBEAT_TIMEOUT_S") or 45.0)
HEARTBEAT_TAG = "changelake/heartbeat"
HOST_TAG = "changelake/host"
PID_TAG = "changelake/pid"

_WATCHED = (
    dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING,
)


def heartbeat_tags(now: float | None = None) -> dict[str, str]:
    """The run tags of one beat."""
    return {HEARTBEAT_TAG: f"{time.time() if now is None else now:.0f}"}


def process_tags() -> dict[str, str]:
    """Tags naming this process (host, pid), for a run executed by this process."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def _process_alive(pid: int) -> bool:
    """True while ``pid`` runs on this machine (a zombie, exited but not reaped, is not alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def worker_gone(run: dg.DagsterRun, record: dg.RunRecord, pipeline: str | None = None,
                now: float | None = None) -> str | None:
    """Why ``run`` (not yet finished) is dead, or None while it lives.

    Dead: the process named by its :data:`PID_TAG` on this host is gone (at once), or, started
    and beating from anywhere, its last beat (or its start, before the first) is older than
    :data:`HEARTBEAT_TIMEOUT_S`. A queued run, or one a launcher is still starting without naming
    a process, is not judged (Dagster's run monitoring watches start-up).
    """
    if run.status not in _WATCHED:
        return None
    tags = run.tags
    pid, host = tags.get(PID_TAG), tags.get(HOST_TAG)
    if pid and host == socket.gethostname() and not _process_alive(int(pid)):
        return f"its process (pid {pid} on {host}) is gone"
    if run.status not in (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING):
        return None
    now = time.time() if now is None else now
    beat = float(tags.get(HEARTBEAT_TAG) or 0) or (record.start_time or record.create_timestamp.timestamp())
    if beat and now - beat > HEARTBEAT_TIMEOUT_S:
        what = "heartbeat" if tags.get(HEARTBEAT_TAG) else "heartbeat since it started"
        return f"no {what} for {now - beat:.0f} s (timeout {HEARTBEAT_TIMEOUT_S:.0f} s)"
    return None
