"""One in-process asset materialization per pipeline on this machine: an exclusive lock.

Only the lake assets' materialization (``assets/lake.py``) still takes it, to keep two of them on
one machine apart. Nothing on the scale-out path uses it, and dead runs are not found through it:
Dagster's run queue keeps launches apart (pools and run-tag limits), and a run's heartbeat in the
instance tells a live run from a dead one on any machine (:mod:`sensors.liveness`).

The lock file ``<state>/locks/<pipeline>.lock`` records who holds it (JSON: ``run_id``, ``pid``,
``host``, ``since``), so a refused second run names the running one.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from changelake.errors import ChangelakeError

__all__ = [
    "PipelineAlreadyRunningError",
    "PipelineLock",
    "LockHolder",
    "lock_path",
    "probe_lock",
]


class PipelineAlreadyRunningError(ChangelakeError):
    """A second run of a pipeline was refused because another run holds its lock.

    Stop the running one first (terminate its Dagster run, or Ctrl-C the ``changelake`` command),
    or wait for it to finish. ``holder`` describes the running one.
    """

    def __init__(self, message: str, *, pipeline: str, holder: "LockHolder | None") -> None:
        super().__init__(message)
        self.pipeline = pipeline
        self.holder = holder


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or last held) a pipeline's lock."""

    run_id: str
    pid: int
    host: str
    since: float

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        return f"run {self.run_id} (pid {self.pid} on {self.host}, since {started})"


def lock_path(state_dir: Path, pipeline: str) -> Path:
    """``<state_dir>/locks/<pipeline>.lock`` (the pipeline name made file-safe)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in pipeline)
    return Path(state_dir) / "locks" / f"{safe}.lock"


def _read_holder(path: Path) -> LockHolder | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text() or "{}")
        return LockHolder(str(data["run_id"]), int(data["pid"]), str(data["host"]), float(data["since"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def probe_lock(state_dir: Path, pipeline: str) -> tuple[bool, LockHolder | None]:
    """(held, last holder): whether a live process holds the lock now, and who wrote it last."""
    path = lock_path(state_dir, pipeline)
    if not path.exists():
        return False, None
    holder = _read_holder(path)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True, holder
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    return False, holder


class PipelineLock:
    """Context manager holding ``<state>/locks/<pipeline>.lock`` exclusively.

    Args:
        state_dir: the changelake state folder (``$CHANGELAKE_STATE_DIR``).
        pipeline: the pipeline name.
        run_id: the holder's run id (a Dagster run id), written into the file.
        wait_s: how long to retry before refusing (covers a watcher's brief probe).

    Raises:
        PipelineAlreadyRunningError: on enter, when another process holds the lock.
    """

    def __init__(self, state_dir: Path, pipeline: str, run_id: str, wait_s: float = 3.0) -> None:
        self.path = lock_path(state_dir, pipeline)
        self.pipeline = pipeline
        self.run_id = run_id
        self.wait_s = wait_s
        self._file: Any = None

    def __enter__(self) -> "PipelineLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+")
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    f.close()
                    holder = _read_holder(self.path)
                    who = holder.describe() if holder else "another process"
                    raise PipelineAlreadyRunningError(
                        f"pipeline '{self.pipeline}' is already running: {who}; stop it first or wait for it "
                        "to finish (one run per pipeline)",
                        pipeline=self.pipeline,
                        holder=holder,
                    ) from None
                time.sleep(0.2)
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"run_id": self.run_id, "pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
        f.flush()
        self._file = f
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None
