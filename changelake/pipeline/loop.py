"""The one runner loop: any source with any sink, through the connector contract.

::

    sink.open(); start = sink.stored_position()
    source = make_source(start); source.open()
    repeat: events = source.poll()      -> stage.apply(events)   (transform, route, key check;
                                           skipped when it has no work: see below)
            sink.write(events)          -> sink.commit(source.position)
            idle poll: sink.flush(force=False)  (a buffering sink, e.g. a lake)
    until the stop policy says so; then sink.flush() and close both.

The position is committed with the data it covers, so a restart resumes exactly where the last
durable commit ended. A sink that commits in the background
(:class:`~changelake.connectors.base.CommitsInBackground`: the Kafka sink's exactly-once
transaction) is asked to ``start_commit``; the loop polls and stages the next batch meanwhile, and
the sink finishes the commit (or raises its failure) before it writes that batch, and the loop
reports the batch (``on_batch``) once its commit is done. A sink that buffers (:class:`~changelake.connectors.base.BufferedSink`)
reports which commits became durable; ``on_batch`` and :class:`RunStats` count those only.

What the loop uses of a source and a sink beyond :class:`~changelake.connectors.base.ChangelogSource`
and :class:`~changelake.connectors.base.ChangelogSink` is the optional abilities declared in
:mod:`changelake.connectors.base` (buffering, metrics, partitioned position, rejecting a record,
bad-record counts, keys the stage need not check), each checked once with ``isinstance``.

A stage without transform, route or append-only reading has no work for the events of a poll
that a :class:`~changelake.connectors.base.GuaranteesKeys` source vouches for
(``last_poll_keyed``; :meth:`~changelake.pipeline.stage.Stage.passes_through`, asked once): the
loop writes those events as they are, exactly what the stage would have returned.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from changelake.changelog.tally import PendingPolls, tally_ops
from changelake.changelog.change_batch import ChangeBatch
from changelake.connectors.base import (
    BufferedSink,
    CountsAbsorbedChanges,
    EmitsChangeBatches,
    WritesChangeBatches,
    ChangelogSink,
    CommitsInBackground,
    ChangelogSource,
    EmitsSideRecords,
    GuaranteesKeys,
    PartitionedChangelogSource,
    RejectsRecords,
    ReportsBadRecords,
    ReportsMetrics,
    WritesSideRecords,
)
from changelake.pipeline.clock import StopClock
from changelake.collector import young_generation
from changelake.pipeline.stage import Stage
from changelake.pipeline.stats import RunStats

__all__ = ["BatchCallback", "run_loop", "absorbed_per_table"]

#: Called once per durable commit with ``events``, ``records``, ``tables`` (sink table -> change
#: events), ``ops`` (sink table -> {op letter -> count}), ``position``, ``commits`` and ``results``
#: (a lake's per-table write results; ``[]`` for other sinks).
BatchCallback = Callable[[dict[str, Any]], None]

log = logging.getLogger(__name__)

#: How long one poll waits for records (seconds).
_POLL_WAIT_S = 0.5


def absorbed_per_table(results: list[Any]) -> dict[str, int] | None:
    """Changes each sink table absorbed in one durable commit of a buffering sink, from its
    per-table results (:class:`~changelake.connectors.base.CountsAbsorbedChanges`: ``sink_table``,
    ``rows_applied``: rows past the table's stored offsets), or
    None when the results do not say (then the polled events are counted). Rows re-read after a
    consumer-group handover, or committed first by another worker, are not counted again: the
    workers of a parallel run add up to the distinct changes absorbed."""
    absorbed: dict[str, int] = {}
    for result in results:
        if not isinstance(result, CountsAbsorbedChanges) or not result.sink_table:
            return None
        absorbed[result.sink_table] = absorbed.get(result.sink_table, 0) + int(result.rows_applied)
    return {t: n for t, n in absorbed.items() if n}


def _poll_columnar(
    lane: EmitsChangeBatches, batch_sink: WritesChangeBatches, sink: ChangelogSink, stage: Stage,
    reject: Any, batch_size: int, timeout_s: float = 0.5,
) -> tuple[int, dict[str, int], dict[str, dict[str, int]]]:
    """One poll of the columnar lane: each batch routed and transformed whole and written as it
    is, or (when the stage needs per-record work) its records' events through :meth:`Stage.apply`;
    event lists as in the per-record loop, all in poll order. Returns (change events polled,
    events per sink table, per sink table and op letter)."""
    polled = 0
    applied: dict[str, int] = {}
    ops: dict[str, dict[str, int]] = {}

    def count(table: str, by_op: Mapping[str, int]) -> None:
        applied[table] = applied.get(table, 0) + sum(by_op.values())
        mine = ops.setdefault(table, {})
        for op, n in by_op.items():
            mine[op] = mine.get(op, 0) + n

    for item in lane.poll_batches(max_events=batch_size, timeout_s=timeout_s):
        if isinstance(item, ChangeBatch):
            polled += item.records
            staged = stage.apply_batch(item)
            if staged is not None:
                written = [b for b in staged if b.num_rows]
                if written:
                    batch_sink.write_change_batches(written)
                for b in written:
                    count(str(b.table), b.ops)
                continue
            events = item.fallback()
        else:
            events = item
            polled += len(events)
        out = stage.apply(events, reject) if events else []
        if out:
            sink.write(out)
        table_counts, table_ops = tally_ops(out)
        for table, by_op in table_ops.items():
            count(table, by_op)
    return polled, applied, ops


def run_loop(
    pipeline: str,
    sink: ChangelogSink,
    make_source: Callable[[Mapping[str, Any] | None], ChangelogSource],
    stage: Stage,
    clock: StopClock,
    *,
    until_caught_up: bool = False,
    batch_size: int = 2000,
    on_batch: BatchCallback | None = None,
    on_durable: Callable[[RunStats], None] | None = None,
    columnar: bool = True,
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
        columnar: take the columnar lane where the source and the sink offer it
            (:class:`~changelake.connectors.base.EmitsChangeBatches` into
            :class:`~changelake.connectors.base.WritesChangeBatches`; ``pipeline.columnar.enabled``).

    Returns:
        The run's :class:`RunStats` (``position`` for a positioned source, ``offsets`` for a
        partitioned one).

    Raises:
        whatever the source, stage and sink raise (ChangelakeError subclasses); nothing written
        after the last durable commit is kept, a restart reads it again.

    The run goes with the collector's young-generation threshold raised
    (:func:`~changelake.collector.young_generation`: per-record allocations would
    otherwise trigger full collections of the whole heap every ~30k records).
    """
    with young_generation():
        return _run_loop(pipeline, sink, make_source, stage, clock, until_caught_up=until_caught_up,
                         batch_size=batch_size, on_batch=on_batch, on_durable=on_durable, columnar=columnar)


def _run_loop(
    pipeline: str,
    sink: ChangelogSink,
    make_source: Callable[[Mapping[str, Any] | None], ChangelogSource],
    stage: Stage,
    clock: StopClock,
    *,
    until_caught_up: bool,
    batch_size: int,
    on_batch: BatchCallback | None,
    on_durable: Callable[[RunStats], None] | None,
    columnar: bool,
) -> RunStats:
    stats = RunStats(pipeline)
    buffering = sink if isinstance(sink, BufferedSink) and sink.buffers_commits else None
    # the Kafka sink's transaction commit overlaps with polling and encoding the next batch
    background = sink if buffering is None and isinstance(sink, CommitsInBackground) else None
    sink.open()
    try:
        stored = sink.stored_position()
        source = make_source(stored)
        stage.check_source(source.changelog_mode)
        offsets_source = source if isinstance(source, PartitionedChangelogSource) else None
        partitioned = offsets_source is not None
        reject = source.reject if isinstance(source, RejectsRecords) else None
        side_source = source if isinstance(source, EmitsSideRecords) else None
        side_sink = sink if isinstance(sink, WritesSideRecords) else None
        # a stage without work for the events of a poll the source vouches for (last_poll_keyed)
        keyed = source if isinstance(source, GuaranteesKeys) and stage.passes_through(source) else None
        # the columnar lane: a source that polls ChangeBatch items into a sink that takes them
        lane = (source if columnar and isinstance(source, EmitsChangeBatches) and source.change_batches
                else None)
        batch_sink = sink if isinstance(sink, WritesChangeBatches) else None
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
                if offsets_source is not None and stats.offsets:
                    offsets_source.notify_committed(stats.offsets)
            if pending.records or pending.events:
                stats.batches += 1
                applied = absorbed_per_table(results) if buffering is not None else None
                applied = pending.applied if applied is None else applied
                for table, count in applied.items():
                    stats.tables[table] = stats.tables.get(table, 0) + count
                if on_durable is not None:
                    on_durable(stats)
                if on_batch:
                    on_batch({"events": pending.events, "records": pending.records, "tables": dict(applied),
                              "ops": pending.ops, "position": position, "commits": len(results), "results": results})
                pending = PendingPolls()

        try:
            committed = stored
            started: Mapping[str, Any] | None = None  # position of the commit running in the background
            poll_timeout = _POLL_WAIT_S
            while True:
                if lane is not None and batch_sink is not None:
                    polled, applied, ops = _poll_columnar(lane, batch_sink, sink, stage, reject, batch_size,
                                                          poll_timeout)
                    # The position also moves past transaction markers (Kafka): commit it even
                    # when a poll returned nothing.
                    current = source.position
                else:
                    events = source.poll(max_events=batch_size, timeout_s=poll_timeout)
                    if keyed is not None and keyed.last_poll_keyed:
                        out = events  # Stage.passes_through: what stage.apply would return
                    else:
                        out = stage.apply(events, reject) if events else []
                    # The position also moves past idle or uncaptured traffic (binlog) and transaction
                    # markers (Kafka): commit it even when a poll returned nothing.
                    current = source.position
                    if out:
                        sink.write(out)
                    polled = len(events)
                    applied, ops = tally_ops(out)
                side = side_source.take_side_records() if side_source is not None else []
                if side and side_sink is not None:  # transaction metadata / heartbeats, same commit
                    side_sink.write_side_records(side)
                if started is not None and background is not None:
                    background.finish_commit()  # done already if this batch was written
                    durable([], started)  # the previous batch, before this one is counted
                    started = None
                records = offsets_source.last_records if offsets_source is not None else polled
                if until_caught_up and offsets_source is not None:
                    # A run that stops once caught up: once every partition reached its end, the
                    # next poll (the one that finds nothing and ends the run) takes what is
                    # already fetched instead of waiting ``_POLL_WAIT_S`` for a full poll
                    # (``consume`` waits for ``batch_size`` records or the timeout) of records
                    # written after the end was looked up, which the run would not read anyway.
                    poll_timeout = 0.0 if source.caught_up() else _POLL_WAIT_S
                pending.note(records, polled, {}, applied, ops)
                stats.events += polled
                results: list[Any] | None = None
                if current is not None and (polled or side or current != committed):
                    if buffering is not None:
                        results = buffering.commit(current)
                    elif background is not None:
                        # finished by the next write (which encodes first), or below; reported then
                        background.start_commit(current)
                        started = current
                    else:
                        sink.commit(current)
                        results = []
                    committed = current
                    if not partitioned:
                        stats.position = current
                if buffering is not None and not polled and results is None:
                    results = buffering.flush(force=False)
                if results is not None:
                    durable(results, current)
                reason = clock.stop_reason(until_caught_up, not polled, source.caught_up)
                if reason:
                    if started is not None and background is not None:
                        background.finish_commit()
                        durable([], started)
                    if buffering is not None:
                        final = buffering.flush(force=True)
                        if final is not None:
                            durable(final, committed)
                    stats.stopped_because = reason
                    break
        finally:
            if isinstance(source, ReportsBadRecords):
                stats.bad_records = int(source.bad_records)
                stats.dead_letters = int(source.dead_letters)
                stats.inferred_schema_tables = list(source.inferred_tables)
            source.close()
    finally:
        sink.close()
        stats.metrics = dict(sink.metrics) if isinstance(sink, ReportsMetrics) else {}
    stats.elapsed_s = clock.elapsed
    return stats

