"""Pipeline 2 scaled out on Kafka's consumer groups: ``pipeline.parallelism`` N worker processes.

Each worker is :func:`changelake.pipeline.runner.run_pipeline` with ``worker=True``: it
subscribes to the topics in the group ``changelake-<pipeline>``, so Kafka's group coordinator
spreads the partitions over the workers and moves them when one joins, leaves or dies (after
``session.timeout.ms``, 10 s by default here). No coordination of our own:

* a table is fed by the partitions of its topic; Pipeline 1 keys records by primary key, so one
  key's changes stay in one partition and are committed in order by whichever worker owns it;
* a worker that receives a partition starts it at the lake checkpoint read at that moment; the
  table's own snapshot offsets (written in the same commit as the rows) skip whatever a previous
  owner committed after that checkpoint, so a handover after ``kill -9`` repeats and loses nothing;
* two workers committing one table at once (a topic with several partitions, or a handover)
  meet Iceberg's optimistic concurrency: the loser re-reads the table and redoes its write
  (:meth:`IcebergSink.write`), filtered against the winner's offsets;
* the shared checkpoint is merged per partition (max), so it can lag but never run ahead of the lake.

The parent process supervises: it forwards ``on_batch`` calls, replaces a worker that died of a
signal while the run goes on (it rejoins the group), stops every worker on ``stop`` (SIGTERM:
a clean stop after the current commit) and raises :class:`WorkerError` if a worker failed.
Each worker reports on a pipe of its own: a worker killed in the middle of a report can break
only its own pipe (a queue shared by the workers has one write lock, which a ``kill -9`` of its
holder would leave taken for all of them).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from changelake.errors import ChangelakeError
from changelake.pipeline.definition import PipelineDefinition

if TYPE_CHECKING:
    from changelake.pipeline.runner import RunStats

__all__ = ["WorkerError", "parallelism", "run_workers", "start_worker"]

log = logging.getLogger(__name__)


class WorkerError(ChangelakeError):
    """A Pipeline 2 worker process failed; the message carries its error (type and text).

    Attributes:
        worker: the worker's index.
    """

    def __init__(self, message: str, worker: int) -> None:
        super().__init__(message)
        self.worker = worker


def parallelism(defn: PipelineDefinition) -> int:
    """``pipeline.parallelism`` (default 1)."""
    return int(defn.pipeline.get("parallelism", 1) or 1)


def _worker_main(defn: PipelineDefinition, index: int, kwargs: dict[str, Any], out: Any) -> None:
    from changelake.pipeline.runner import run_pipeline

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stats = run_pipeline(
            defn, stop=stop, worker=True, on_batch=lambda b: out.send(("batch", index, b)), **kwargs
        )
    except BaseException as exc:  # reported to the parent, which raises WorkerError
        out.send(("error", index, f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None
    out.send(("done", index, stats))


def start_worker(defn: PipelineDefinition, index: int, **kwargs: Any) -> tuple[Any, Any]:
    """Start worker ``index`` (a spawned process); returns (the process, the read end of its report pipe).

    The worker sends ``(kind, index, payload)`` tuples: ``batch`` (an ``on_batch`` dict), ``error``
    (its error text) or ``done`` (its RunStats); the pipe ends (EOF) when the worker exits.
    """
    context = mp.get_context("spawn")
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(
        target=_worker_main, args=(defn, index, kwargs, writer), name=f"changelake-{defn.name}-worker-{index}", daemon=True
    )
    process.start()
    writer.close()  # the worker holds the only write end: its exit is this pipe's EOF
    log.info("pipeline %s: worker %d started (pid %s)", defn.name, index, process.pid)
    return process, reader


def run_workers(
    defn: PipelineDefinition,
    *,
    until_caught_up: bool = False,
    max_duration_s: float | None = None,
    stop: threading.Event | None = None,
    batch_size: int = 5000,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
    on_start: Callable[[list[Any]], None] | None = None,
) -> "RunStats":
    """Run ``parallelism(defn)`` workers until each stops (caught up, max duration) or ``stop`` is set.

    Args:
        on_batch: called in this process for every worker commit, with the worker's batch dict
            plus ``worker`` (its index) and ``pid``.
        on_start: called with the worker processes once started (e.g. to watch their pids).

    Returns:
        A :class:`~changelake.pipeline.runner.RunStats` summed over the workers (offsets: max).

    Raises:
        WorkerError: a worker raised (the others are stopped first).
    """
    from changelake.pipeline.runner import RunStats

    n = parallelism(defn)
    kwargs = {"until_caught_up": until_caught_up, "max_duration_s": max_duration_s, "batch_size": batch_size}
    workers: dict[int, Any] = {}
    pipes: dict[int, Any] = {}
    for i in range(n):
        workers[i], pipes[i] = start_worker(defn, i, **kwargs)
    if on_start:
        on_start(list(workers.values()))
    stats = RunStats(defn.name)
    started = time.monotonic()
    done: set[int] = set()
    error: WorkerError | None = None
    stopping = False

    def stop_all() -> None:
        for p in workers.values():
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    while len(done) < n:
        if stop is not None and stop.is_set() and not stopping:
            stopping = True
            stop_all()
        by_pipe = {id(pipe): index for index, pipe in pipes.items()}
        ready: list[Any] = mp_connection.wait(list(pipes.values()), timeout=0.5)
        for pipe in ready:
            index = by_pipe[id(pipe)]
            try:
                report: tuple[str, int, Any] = pipe.recv()
                kind, _, payload = report
            except Exception as exc:  # noqa: BLE001 - EOF, or a report cut short by a kill
                # EOF: the worker exited and everything it sent has been read. A worker killed
                # mid-send leaves a truncated report: ignored, its work is in the lake or redone.
                if not isinstance(exc, EOFError):
                    log.warning("pipeline %s: worker %d's last report is unreadable (%s)", defn.name, index, exc)
                pipe.close()
                del pipes[index]
                process = workers[index]
                process.join(timeout=10)
                if index in done:
                    continue
                if process.exitcode is not None and process.exitcode < 0 and not stopping and not until_caught_up:
                    log.warning("pipeline %s: worker %d died (signal %d); starting a replacement",
                                defn.name, index, -process.exitcode)
                    workers[index], pipes[index] = start_worker(defn, index, **kwargs)
                else:
                    done.add(index)
                continue
            if kind == "batch":
                stats.batches += 1
                if on_batch:
                    on_batch({**payload, "worker": index, "pid": workers[index].pid})
            elif kind == "error":
                error = error or WorkerError(f"pipeline {defn.name!r} worker {index}: {payload}", index)
                done.add(index)
                if not stopping:
                    stopping = True
                    stop_all()
            elif kind == "done":
                done.add(index)
                stats.events += payload.events
                for table, count in payload.tables.items():
                    stats.tables[table] = stats.tables.get(table, 0) + count
                for tp, offset in payload.offsets.items():
                    stats.offsets[tp] = max(stats.offsets.get(tp, 0), offset)
                stats.bad_records += payload.bad_records
                stats.dead_letters += payload.dead_letters
                stats.stopped_because = stats.stopped_because or payload.stopped_because
    for p in workers.values():
        p.join(timeout=30)
    if error is not None:
        raise error
    stats.elapsed_s = time.monotonic() - started
    return stats
