"""The page-views job: ``INSERT INTO pageviews_per_region SELECT ...`` run as consume-transform-
produce, with the aggregation's state recovered by replaying the input (see the package docstring)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from changelake.changelog.modes import check_changelog_mode
from changelake.pageviews.decode import aggregate_messages
from changelake.pageviews.query import (
    PAGEVIEWS_SCHEMA, PER_REGION_SCHEMA, RETRACT_TABLE, SINK_TABLE, pageviews_aggregate, pageviews_source_options,
)
from changelake.pageviews.snapshot import load_snapshot, save_snapshot

__all__ = ["PageviewsStats", "run_pageviews_aggregation"]


@dataclass
class PageviewsStats:
    """What one run did.

    Attributes:
        events_read: input records consumed (replayed ones included).
        events_replayed: input records re-applied to rebuild state, without output.
        rows_out: aggregate changelog rows produced, by kind (``+I``, ``-U``, ``+U``, ``-D``).
        records_written: records sent to the upsert topic (``-U`` dropped) and to the retract topic.
        batches: batches with output (= transactions with exactly-once).
        groups: regions in the state at the end.
        restored_snapshot: the run started from a local snapshot (else from empty state).
        elapsed_s: wall time in seconds; ``events_per_s`` = events_read / elapsed_s.
        offsets: the next input offset per partition at the end (``{"topic:partition": offset}``).
        sink_metrics: the upsert-kafka sink's metrics at the end (numRecordsOut, numRecordsOutPerSecond,
            numBytesOut, numBytesOutPerSecond, currentSendTime in ms).
    """

    events_read: int = 0
    events_replayed: int = 0
    rows_out: dict[str, int] = field(default_factory=lambda: {"+I": 0, "-U": 0, "+U": 0, "-D": 0})
    records_written: int = 0
    batches: int = 0
    groups: int = 0
    restored_snapshot: bool = False
    elapsed_s: float = 0.0
    events_per_s: float = 0.0
    offsets: dict[str, int] = field(default_factory=dict)
    sink_metrics: dict[str, float] = field(default_factory=dict)


def run_pageviews_aggregation(
    bootstrap: str,
    source_topic: str,
    sink_table_options: Mapping[str, str],
    delivery_guarantee: str = "at-least-once",
    state_dir: str | Path | None = None,
    until_caught_up: bool = True,
    *,
    group_id: str | None = None,
    retract_table_options: Mapping[str, str] | None = None,
    batch_size: int = 2000,
    poll_timeout_s: float = 0.5,
    mini_batch: bool = True,
    max_duration_s: float | None = None,
    snapshot_interval_s: float = 5.0,
) -> PageviewsStats:
    """Run ``INSERT INTO pageviews_per_region SELECT user_region, COUNT(*), COUNT(DISTINCT user_id)
    FROM pageviews GROUP BY user_region``.

    Args:
        bootstrap: Kafka bootstrap servers (``host:port``) of the source topic.
        source_topic: the ``pageviews`` topic (json events, see :func:`generate_pageviews`).
        sink_table_options: upsert-kafka WITH options of ``pageviews_per_region``
            (:func:`pageviews_sink_options`); its 'sink.delivery-guarantee' is overridden by
            ``delivery_guarantee``.
        delivery_guarantee: ``none``, ``at-least-once`` or ``exactly-once`` (needs
            'sink.transactional-id-prefix' in the sink options).
        state_dir: folder of the local state snapshot (None: always rebuild from the topic).
        until_caught_up: stop at the input end offsets seen at start; False runs until
            ``max_duration_s`` (seconds) passes, or forever.
        group_id: consumer group whose committed offsets mark what the output holds (default
            ``pageviews-agg-<sink topic>``).
        retract_table_options: ``kafka`` WITH options of a second topic receiving the full
            retract changelog (:func:`retract_sink_options`); checked before anything runs.
        batch_size: max input records per batch (one transaction with exactly-once).
        poll_timeout_s: max wait for input per poll, seconds.
        mini_batch: emit one change per region per batch (Flink's mini-batch aggregation,
            decoded and grouped per batch on Arrow columns); False emits -U/+U for every input
            row.
        max_duration_s: with ``until_caught_up`` False, stop after this many seconds.
        snapshot_interval_s: least seconds between two writes of the local state snapshot
            (written after the first batch, then at most this often, and at the end).

    Returns:
        :class:`PageviewsStats`.

    Raises:
        UnsupportedChangelogError: the retract topic's format cannot carry updates (nothing was
            written anywhere).
        OptionValidationError: invalid table options.
        SinkFlushError / ConnectorError / SourceError: Kafka failures.
    """
    from changelake.connectors.kafka_table import create_sink as create_kafka_sink
    from changelake.connectors.kafka_table import create_source
    from changelake.connectors.upsert_kafka.factory import create_sink as create_upsert_sink

    started = time.monotonic()
    sink_opts = dict(sink_table_options)
    sink_opts["sink.delivery-guarantee"] = delivery_guarantee
    eos = delivery_guarantee.lower().replace("_", "-") == "exactly-once"
    group_id = group_id or f"pageviews-agg-{sink_opts.get('topic', 'sink')}"
    src_extra = {"scan.startup.mode": "earliest-offset", "properties.group.id": group_id}
    if until_caught_up:
        src_extra["scan.bounded.mode"] = "latest-offset"
    agg = pageviews_aggregate()
    stats = PageviewsStats()

    # -- plan: build everything and check changelog modes before any I/O -----------------------
    source = create_source(pageviews_source_options(bootstrap, source_topic, **src_extra), PAGEVIEWS_SCHEMA, table_name="pageviews")
    upsert_sink = create_upsert_sink(sink_opts, PER_REGION_SCHEMA)
    upsert_drop = check_changelog_mode(
        agg.changelog_mode, frozenset(upsert_sink.changelog_mode), SINK_TABLE, node_description=agg.describe()
    )
    retract_sink = None
    if retract_table_options is not None:
        retract_sink = create_kafka_sink(retract_table_options, PER_REGION_SCHEMA.with_primary_key([]), table_name=RETRACT_TABLE)
        retract_sink.check_input_mode(agg.changelog_mode, node_description=agg.describe())

    state_path = Path(state_dir) if state_dir is not None else None
    try:
        # the sink first: with exactly-once, init_transactions fences a previous incarnation and
        # aborts its open transaction, so the committed offsets read next are stable
        upsert_sink.open()
        # -- recover: state as of the committed offsets --------------------------------------------
        committed = source.committed()
        snap = load_snapshot(state_path, agg)
        if snap is not None and all(off <= committed.get(tp, 0) for tp, off in snap.items()):
            stats.restored_snapshot = True
        else:
            snap = None
            agg.store.clear()
        source.open(start_offsets=snap)  # earliest where the snapshot has no offset
        replay_until = committed

        if retract_sink is not None:
            if eos:  # one transaction for both topics: share the upsert sink's producer
                retract_sink = create_kafka_sink(
                    retract_table_options or {}, PER_REGION_SCHEMA.with_primary_key([]),
                    table_name=RETRACT_TABLE, producer=upsert_sink.producer,
                )
                retract_sink.check_input_mode(agg.changelog_mode, node_description=agg.describe())
            retract_sink.open()

        # Fresh records wait in `held` until every partition is replayed up to its committed
        # offset: a region's value depends on all partitions, so nothing is emitted from a partial
        # state. With mini-batch the records stay undecoded (Kafka messages) and each batch is
        # decoded and aggregated in one columnar pass (Arrow); without it, row by row.
        held: list[Any] = []
        replayed_all = not replay_until
        last_snapshot = float("-inf")
        dirty = False

        def recovering() -> bool:
            pos = source.positions()
            return any(pos.get(tp, -1) < off for tp, off in replay_until.items())

        while True:
            stop = (until_caught_up and source.finished) or (
                max_duration_s is not None and time.monotonic() - started > max_duration_s
            )
            if mini_batch:
                msgs = [] if stop else source.poll_messages(poll_timeout_s, batch_size)
                stats.events_read += len(msgs)
                if replayed_all:
                    held.extend(msgs)
                else:
                    replay = []
                    for m in msgs:
                        if m.offset() < replay_until.get((m.topic(), m.partition()), 0):
                            replay.append(m)
                        else:
                            held.append(m)
                    if replay:
                        aggregate_messages(agg, source, replay)  # rebuilds state; output discarded
                        stats.events_replayed += len(replay)
                got = bool(msgs)
            else:
                rows = [] if stop else source.poll(poll_timeout_s, batch_size)
                stats.events_read += len(rows)
                for r in rows:
                    tp = (r.metadata["topic"], r.metadata["partition"])
                    if r.metadata["offset"] < replay_until.get(tp, 0):
                        agg.process(r)
                        stats.events_replayed += 1
                    else:
                        held.append(r)
                got = bool(rows)
            if not replayed_all:
                if recovering():
                    if stop:  # never emit from a partial state; the next run replays again
                        break
                    continue
                replayed_all = True
            fresh, held = held, []
            if fresh:
                if mini_batch:
                    out = aggregate_messages(agg, source, fresh)
                else:
                    out = agg.process_all(fresh)
                if eos:
                    upsert_sink.begin_transaction()
                for o in out:
                    stats.rows_out[o.kind.short_string] += 1
                    if o.kind not in upsert_drop:
                        upsert_sink.write(o)
                        stats.records_written += 1
                    if retract_sink is not None:
                        retract_sink.write(o)
                        stats.records_written += 1
                if retract_sink is not None:
                    retract_sink.flush()  # writes a held -U; inside the transaction with exactly-once
                if eos:
                    upsert_sink.commit_transaction(source.offsets_to_commit(replay_until), source.group_metadata())
                else:
                    upsert_sink.flush()
                    source.commit(replay_until)
                stats.batches += 1
            # the snapshot (state + the offsets it covers, never ahead of the committed ones) is
            # an optimisation of recovery: written after the first batch, then at most every
            # snapshot_interval_s, and at the end
            now = time.monotonic()
            if (got or fresh) and (stop or now - last_snapshot >= snapshot_interval_s):
                save_snapshot(state_path, agg, source.positions())
                last_snapshot = now
                dirty = False
            elif got or fresh:
                dirty = True
            if stop:
                if dirty:
                    save_snapshot(state_path, agg, source.positions())
                break
        if not eos:
            upsert_sink.flush()
    finally:
        if retract_sink is not None:
            retract_sink.close()
        upsert_sink.close()
        source.close()
    stats.groups = len(agg.store)
    stats.offsets = {f"{t}:{p}": o for (t, p), o in sorted(source.positions().items())}
    stats.sink_metrics = dict(upsert_sink.metrics.snapshot())
    stats.elapsed_s = time.monotonic() - started
    stats.events_per_s = stats.events_read / stats.elapsed_s if stats.elapsed_s > 0 else 0.0
    return stats
