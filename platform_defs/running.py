"""Running a pipeline inside an op: one run per pipeline, live asset events, a clean stop.

The pipeline runs on a worker thread while the op's thread yields the asset events it reports.
A termination request (SIGINT/SIGTERM, or Dagster's interrupt) sets the pipeline's ``stop``
event: the current batch is committed, the source and sink close, and the op returns the final
stats as its output — no stack trace, nothing lost. The pipeline's lock
(:class:`changelake.pipeline.lock.PipelineLock`) is held for the whole run.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from typing import Any, Iterator

import dagster as dg

from assets.reporting import Reporter
from changelake.pipeline.definition import PipelineDefinition
from changelake.pipeline.lock import PipelineLock
from changelake.services import default_state_dir

__all__ = ["run_supervised"]

_DONE = object()


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event, log: Any) -> Iterator[None]:
    """SIGINT/SIGTERM set ``stop`` instead of raising (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signo: int, _frame: Any) -> None:
        if not stop.is_set():
            log.info(f"stop requested (signal {signal.Signals(signo).name}): committing the current batch, then stopping")
        stop.set()

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_supervised(
    context: dg.OpExecutionContext,
    defn: PipelineDefinition,
    reporter: Reporter,
    *,
    until_caught_up: bool,
    max_duration_s: float | None,
    batch_size: int,
) -> Iterator[Any]:
    """Run ``defn`` under its lock; yield its asset materializations as they happen, then the
    op's ``Output`` carrying the final stats.

    Raises:
        PipelineAlreadyRunningError: another run of the same pipeline holds the lock.
        Whatever the pipeline raised (a real failure, with its own message).
    """
    from changelake.pipeline.runner import run_pipeline

    events: "queue.Queue[Any]" = queue.Queue()
    stop = threading.Event()
    box: dict[str, Any] = {}

    def on_batch(batch: dict) -> None:
        for event in reporter.on_batch(batch):
            events.put(event)

    def work() -> None:
        try:
            box["stats"] = run_pipeline(
                defn, until_caught_up=until_caught_up, max_duration_s=max_duration_s, stop=stop,
                batch_size=batch_size, on_batch=on_batch,
            )
        except BaseException as exc:  # handed to the op's thread
            box["error"] = exc
        finally:
            events.put(_DONE)

    with PipelineLock(default_state_dir(), defn.name, context.run.run_id), _stop_on_signals(stop, context.log):
        thread = threading.Thread(target=work, name=f"pipeline-{defn.name}", daemon=True)
        thread.start()
        try:
            while True:
                try:
                    item = events.get(timeout=0.5)
                except queue.Empty:
                    continue
                except (dg.DagsterExecutionInterruptedError, KeyboardInterrupt):
                    if not stop.is_set():
                        context.log.info("stop requested: committing the current batch, then stopping")
                    stop.set()
                    continue
                if item is _DONE:
                    break
                yield item
        finally:
            if thread.is_alive():  # the op is being torn down early: stop the pipeline cleanly
                stop.set()
            thread.join()
            reporter.close()
    if "error" in box:
        raise box["error"]
    stats = box["stats"]
    if stats.stopped_because == "stopped":
        stats.stopped_because = "stop requested"
    md = reporter.final(stats)
    context.log.info(f"pipeline {defn.name} stopped ({stats.stopped_because}): " + ", ".join(
        f"{k}={md[k]}" for k in ("events", "batches", "position", "offsets", "elapsed_s") if k in md))
    yield dg.Output(None, metadata=md)
