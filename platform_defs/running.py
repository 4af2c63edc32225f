"""Running a pipeline inside an op: live asset events, a heartbeat in the instance, a clean stop.

The pipeline runs on a worker thread while the op's thread yields the asset events it reports.
A termination request (SIGINT/SIGTERM, or Dagster's interrupt) sets the pipeline's ``stop``
event: the current batch is committed, the source and sink close, and the op returns the final
stats as its output — no stack trace, nothing lost. While it runs, the op writes a heartbeat
into the run's tags (:mod:`sensors.liveness`), from which the relaunch sensor and ``changelake
pipeline run`` tell a live run from a dead one on any machine; no local lock is taken (one run
per pipeline is the run queue's tag limit).
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
from platform_defs.standby import wait_for_takeover
from sensors.liveness import HEARTBEAT_S, PID_TAG, heartbeat_tags, process_tags

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
    worker_id: str | None = None,
    standby: bool = False,
) -> Iterator[Any]:
    """Run ``defn``; yield its asset materializations as they happen, then the op's ``Output``
    carrying the final stats. ``worker_id``: run as that worker of a parallel pipeline
    (:func:`changelake.pipeline.runner.run_pipeline` with ``worker=True``). ``standby``: first wait,
    beating, while another run of the pipeline lives, then take over
    (:func:`platform_defs.standby.wait_for_takeover`); stopped while waiting, the op outputs
    ``stopped_because = "stopped while standby"`` and reads nothing.

    Raises:
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
                batch_size=batch_size, on_batch=on_batch, worker=worker_id is not None, worker_id=worker_id,
            )
        except BaseException as exc:  # handed to the op's thread
            box["error"] = exc
        finally:
            events.put(_DONE)

    beating = threading.Event()

    def heartbeat() -> None:
        while not beating.wait(HEARTBEAT_S):
            try:
                context.instance.add_run_tags(context.run_id, heartbeat_tags())
            except Exception as exc:  # noqa: BLE001 - a missed beat is not a pipeline failure
                context.log.warning(f"cannot write the run's heartbeat: {exc}")

    first = heartbeat_tags()
    if worker_id is None and PID_TAG not in context.run.tags:
        first.update(process_tags())  # the one op runs in the run worker's process: name it
    context.instance.add_run_tags(context.run_id, first)
    with _stop_on_signals(stop, context.log):
        beat = threading.Thread(target=heartbeat, name=f"heartbeat-{defn.name}", daemon=True)
        beat.start()
        if standby and not wait_for_takeover(context, defn.name, stop):
            beating.set()
            reporter.close()
            yield dg.Output(None, metadata={"stopped_because": "stopped while standby"})
            return
        thread = threading.Thread(target=work, name=f"pipeline-{defn.name}", daemon=True)
        thread.start()
        try:
            while True:
                line = reporter.progress_line()  # at a steady interval, also while idle
                if line:
                    context.log.info(line)
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
            beating.set()
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
