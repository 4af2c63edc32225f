"""The one runner loop: any source with any sink, through the connector contract.

::

    sink.open(); start = sink.stored_position()
    source = make_source(start); source.open()
    repeat: events = source.poll()      -> stage.apply(events)   (transform, route, key check)
            sink.write(events)          -> sink.commit(source.position)
            idle poll: sink.flush(force=False)  (a buffering sink, e.g. a lake)
    until the stop policy says so; then sink.flush() and close both.

The position is committed with the data it covers, so a restart resumes exactly where the last
durable commit ended. A sink that buffers (:class:`~changelake.connectors.base.BufferedSink`)
reports which commits became durable; ``on_batch`` and :class:`RunStats` count those only.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from changelake.changelog import DataChangeEvent
from changelake.connectors.lake.commit_policy import PendingPolls
from changelake.pipeline.clock import StopClock
from changelake.pipeline.stage import Stage
from changelake.pipeline.stats import RunStats

__all__ = ["BatchCallback", "run_loop"]

#: Called once per durable commit with ``events``, ``records``, ``tables`` (sink table -> change
#: events), ``ops`` (sink table -> {op letter -> count}), ``position``, ``commits`` and ``results``
#: (a lake's per-table write results; ``[]`` for other sinks).
BatchCallback = Callable[[dict[str, Any]], None]

log = logging.getLogger(__name__)


def run_loop(
    pipeline: str,
    sink: Any,
    make_source: Callable[[Mapping[str, Any] | None], Any],
    stage: Stage,
    clock: StopClock,
    *,
    until_caught_up: bool = False,
    batch_size: int = 2000,
    on_batch: BatchCallback | None = None,
    on_durable: Callable[[RunStats], None] | None = None,
) -> RunStats:
    """Run ``make_source(stored position)`` into ``sink`` until ``clock`` says stop.

    Args:
        pipeline: the pipeline name (for the stats).
        sink: an unopened :class:`~changelake.connectors.base.ChangelogSink`.
        make_source: the unopened source, given the sink's stored position (None: first run).
        stage: transform, route and key check (:class:`~changelake.pipeline.stage.Stage`).
        clock: the stop policy.
        until_caught_up: stop once a poll returns nothing and the source is caught up.
        batch_size: records or events per poll.
        on_batch: see :data:`BatchCallback`.
        on_durable: called with the stats after every durable commit (e.g. to record lake tables).

    Returns:
        The run's :class:`RunStats` (``position`` for a positioned source, ``offsets`` for a
        partitioned one).

    Raises:
        whatever the source, stage and sink raise (ChangelakeError subclasses); nothing written
        after the last durable commit is kept, a restart reads it again.
    """
    stats = RunStats(pipeline)
    buffered = bool(getattr(sink, "buffers_commits", False))  # a BufferedSink
    sink.open()
    try:
        stored = sink.stored_position()
        source = make_source(stored)
        partitioned = bool(getattr(source, "partitioned", False))
        reject = getattr(source, "reject", None)
        if partitioned:
            stats.offsets = {k: int(v) for k, v in (stored or {}).items()}
        else:
            stats.position = stored  # a run that finds nothing new still reports where it stands
        source.open()
        pending = PendingPolls()

        def durable(results: list[Any], position: Mapping[str, Any] | None) -> None:
            nonlocal pending
            if partitioned:
                stats.offsets = {k: int(v) for k, v in (sink.stored_position() or {}).items()}
                notify = getattr(source, "notify_committed", None)
                if notify is not None and stats.offsets:
                    notify(stats.offsets)
            if pending.records or pending.events:
                stats.batches += 1
                for table, count in pending.applied.items():
                    stats.tables[table] = stats.tables.get(table, 0) + count
                if on_durable is not None:
                    on_durable(stats)
                if on_batch:
                    on_batch({"events": pending.events, "records": pending.records, "tables": dict(pending.applied),
                              "ops": pending.ops, "position": position, "commits": len(results), "results": results})
                pending = PendingPolls()

        try:
            committed = stored
            while True:
                events = source.poll(max_events=batch_size, timeout_s=0.5)
                out = stage.apply(events, reject) if events else []
                # The position also moves past idle or uncaptured traffic (binlog) and transaction
                # markers (Kafka): commit it even when a poll returned nothing.
                current = source.position
                if out:
                    sink.write(out)
                records = int(getattr(source, "last_records", len(events)))
                pending.note(records, len(events), {}, *_per_table(out))
                stats.events += len(events)
                results: list[Any] | None = None
                if current is not None and (events or current != committed):
                    results = sink.commit(current)
                    committed = current
                    if not partitioned:
                        stats.position = current
                    if not buffered:
                        results = []
                if buffered and not events and results is None:
                    results = sink.flush(force=False)
                if results is not None:
                    durable(results, current)
                reason = clock.stop_reason(until_caught_up, not events, source.caught_up)
                if reason:
                    if buffered:
                        final = sink.flush(force=True)
                        if final is not None:
                            durable(final, committed)
                    stats.stopped_because = reason
                    break
        finally:
            stats.bad_records = int(getattr(source, "bad_records", 0))
            stats.dead_letters = int(getattr(source, "dead_letters", 0))
            stats.inferred_schema_tables = list(getattr(source, "inferred_tables", []))
            source.close()
    finally:
        sink.close()
        stats.metrics = dict(getattr(sink, "metrics", {}))
    stats.elapsed_s = clock.elapsed
    return stats


def _per_table(events: list[DataChangeEvent]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Change events per sink table, and per sink table and op letter."""
    applied: dict[str, int] = {}
    ops: dict[str, dict[str, int]] = {}
    for event in events:
        table = str(event.table)
        applied[table] = applied.get(table, 0) + 1
        by_op = ops.setdefault(table, {})
        by_op[event.op.value] = by_op.get(event.op.value, 0) + 1
    return applied, ops
