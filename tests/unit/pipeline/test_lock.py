"""One run per pipeline on a machine: the lock refuses a second holder and names the first."""

import multiprocessing
import os
import signal

import pytest

from changelake.pipeline.lock import PipelineAlreadyRunningError, PipelineLock, probe_lock


def _hold(state_dir, ready, release):
    with PipelineLock(state_dir, "p", "run-1"):
        ready.set()
        release.wait(30)


def test_a_second_run_is_refused_naming_the_first(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(tmp_path, ready, release))
    holder.start()
    try:
        assert ready.wait(10)
        assert probe_lock(tmp_path, "p")[0]
        with pytest.raises(PipelineAlreadyRunningError, match=r"pipeline 'p' is already running: run run-1 \(pid \d+"):
            with PipelineLock(tmp_path, "p", "run-2", wait_s=0.3):
                pass
    finally:
        release.set()
        holder.join(10)
    with PipelineLock(tmp_path, "p", "run-2"):  # free again once the first ended
        pass


def test_a_killed_holder_releases_the_lock_and_is_still_named(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(tmp_path, ready, release))
    holder.start()
    assert ready.wait(10)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    held, last = probe_lock(tmp_path, "p")
    assert not held and last.run_id == "run-1" and last.pid == holder.pid
