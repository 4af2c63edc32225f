"""The page-views job (production code the pageviews assets run): PV and UV per region, from a ``kafka`` topic into an ``upsert-kafka`` topic.

As the Flink SQL it re-implements::

    CREATE TABLE pageviews (user_id BIGINT, page_id BIGINT, viewtime TIMESTAMP(3), user_region STRING)
      WITH ('connector' = 'kafka', 'topic' = 'pageviews', 'format' = 'json', ...);
    CREATE TABLE pageviews_per_region (user_region STRING, pv BIGINT, uv BIGINT,
      PRIMARY KEY (user_region) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'key.format' = 'avro', 'value.format' = 'avro', ...);
    INSERT INTO pageviews_per_region
      SELECT user_region, COUNT(*), COUNT(DISTINCT user_id) FROM pageviews GROUP BY user_region;

The aggregation (:class:`~changelake.changelog.aggregate.GroupAggregate`) emits a retract
changelog; the upsert sink drops ``-U`` and writes ``+I``/``+U`` as keyed values (``-D`` as
tombstones). Optionally the full retract changelog also goes to a second topic through the
``kafka`` connector with ``debezium-json`` (the "two topics" pattern); an insert-only format
there is refused before anything is written.

Exactly-once (``delivery_guarantee="exactly-once"``) is consume-transform-produce: each batch is
one Kafka transaction holding the output records (both topics) and the consumed offsets
(``send_offsets_to_transaction``); a restart's ``init_transactions`` (same ``transactional.id``)
fences the killed run and aborts its open transaction.

**State recovery** rebuilds the aggregation by replaying the input topic up to the committed
group offsets without emitting (the input is the source of truth, so no state topic is needed):

* a local snapshot (state + the offsets it covers) is written to ``state_dir`` after the first
  batch, then at most every ``snapshot_interval_s`` seconds, and at the end;
  a restart restores it and replays only from its offsets up to the committed ones; a missing or
  corrupt snapshot, or one ahead of the committed offsets, means a full replay from the earliest
  offset;
* the source is assigned once, at the restored offsets (re-assigning could deliver records
  prefetched for the first assignment);
* fresh records wait until EVERY partition is replayed up to its committed offset, since a
  region's value depends on all partitions;
* offsets are never committed below the committed ones (a partition still being replayed keeps
  its committed offset).

The same recovery is used with at-least-once (offsets committed after the records are
acknowledged); there a crash between the two repeats updates, which an upsert topic absorbs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from changelake.changelog import ChangelogRow, DataType, RowKind, Schema, TypeRoot
from changelake.changelog.aggregate import AggSpec, GroupAggregate, InvalidAggregateError
from changelake.changelog.modes import check_changelog_mode
from changelake.connectors.errors import ConnectorError
from changelake.connectors.metrics import SourceMetrics

__all__ = [
    "PAGEVIEWS_SCHEMA",
    "PER_REGION_SCHEMA",
    "REGIONS",
    "PageviewsStats",
    "decode_pageviews_batch",
    "generate_pageviews",
    "pageviews_aggregate",
    "pageviews_source_options",
    "pageviews_sink_options",
    "retract_sink_options",
    "produce_pageviews",
    "read_pageviews_table",
    "recompute_pv_uv",
    "read_upsert_topic_final_state",
    "run_pageviews_aggregation",
]

PAGEVIEWS_SCHEMA = Schema.of(
    [
        ("user_id", DataType.of("BIGINT")),
        ("page_id", DataType.of("BIGINT")),
        ("viewtime", DataType(TypeRoot.TIMESTAMP, precision=3)),
        ("user_region", DataType.of("STRING")),
    ]
)
PER_REGION_SCHEMA = Schema.of(
    [("user_region", DataType.of("STRING")), ("pv", DataType.of("BIGINT")), ("uv", DataType.of("BIGINT"))]
).with_primary_key(["user_region"])
REGIONS: tuple[str, ...] = ("US", "EU", "APAC", "LATAM", "MEA")

SOURCE_TABLE = "default_catalog.default_database.pageviews"
SINK_TABLE = "default_catalog.default_database.pageviews_per_region"
RETRACT_TABLE = "default_catalog.default_database.pageviews_per_region_changelog"

_SNAPSHOT_FILE = "pageviews_aggregation.snapshot.json"


# -- the query ------------------------------------------------------------------------------------
def pageviews_aggregate() -> GroupAggregate:
    """``SELECT user_region, COUNT(*) AS pv, COUNT(DISTINCT user_id) AS uv ... GROUP BY user_region``."""
    return GroupAggregate(["user_region"], [AggSpec.count_star("pv"), AggSpec.count("uv", "user_id", distinct=True)])


# -- data -----------------------------------------------------------------------------------------
def generate_pageviews(
    n: int,
    seed: int = 0,
    *,
    regions: Sequence[str] = REGIONS,
    users: int | None = None,
    start: dt.datetime = dt.datetime(2024, 1, 1, 8, 0, 0),
) -> list[dict[str, Any]]:
    """``n`` page-view events, deterministic for a ``seed``.

    Each event is ``{"user_id": int, "page_id": int, "viewtime": naive datetime (ms precision),
    "user_region": str}``. There are ``users`` users (default ``max(10, n // 10)``, so users
    repeat); each user lives in one region; viewtime grows by 0-999 ms per event.
    """
    rnd = random.Random(seed)
    users = users or max(10, n // 10)
    home = {u: regions[rnd.randrange(len(regions))] for u in range(1, users + 1)}
    t = start
    out = []
    for _ in range(n):
        u = rnd.randint(1, users)
        t += dt.timedelta(milliseconds=rnd.randrange(1000))
        out.append({"user_id": u, "page_id": rnd.randint(1, 50), "viewtime": t, "user_region": home[u]})
    return out


def pageviews_source_options(bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
    """WITH options of the ``pageviews`` source table (``kafka`` connector, json)."""
    return {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, "format": "json", **extra}


def pageviews_sink_options(
    bootstrap: str,
    topic: str,
    *,
    fmt: str = "avro",
    delivery_guarantee: str = "at-least-once",
    transactional_id_prefix: str | None = None,
    **extra: str,
) -> dict[str, str]:
    """WITH options of ``pageviews_per_region`` (``upsert-kafka``, key and value ``fmt``, as the seed: avro)."""
    opts = {
        "connector": "upsert-kafka",
        "topic": topic,
        "properties.bootstrap.servers": bootstrap,
        "key.format": fmt,
        "value.format": fmt,
        "sink.delivery-guarantee": delivery_guarantee,
        **extra,
    }
    if transactional_id_prefix:
        opts["sink.transactional-id-prefix"] = transactional_id_prefix
    return opts


def retract_sink_options(bootstrap: str, topic: str, fmt: str = "debezium-json", **extra: str) -> dict[str, str]:
    """WITH options of the retract-changelog topic of the "two topics" pattern (``kafka``, ``fmt``)."""
    return {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, "format": fmt, **extra}


def produce_pageviews(bootstrap: str, topic: str, events: Iterable[Mapping[str, Any]], **properties: str) -> int:
    """Write events as json records (no key) through the ``kafka`` connector; returns the count.

    Raises SinkFlushError if a record is not acknowledged.
    """
    from changelake.connectors.kafka_table import create_sink

    opts = pageviews_source_options(bootstrap, topic, **{f"properties.{k}": v for k, v in properties.items()})
    sink = create_sink(opts, PAGEVIEWS_SCHEMA, table_name="pageviews")
    n = 0
    with sink:
        for e in events:
            sink.write(ChangelogRow(RowKind.INSERT, dict(e)))
            n += 1
        sink.flush()
    return n


# -- columnar decoding ---------------------------------------------------------------------------
_ARROW_JSON_SCHEMA = pa.schema(
    [("user_id", pa.int64()), ("page_id", pa.int64()), ("viewtime", pa.string()), ("user_region", pa.string())]
)
_ARROW_JSON_PARSE = pajson.ParseOptions(explicit_schema=_ARROW_JSON_SCHEMA, unexpected_field_behavior="ignore")
_TIMESTAMP_SHAPE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?$"


def decode_pageviews_batch(values: Sequence[bytes | None]) -> pa.Table | None:
    """Record values of the ``pageviews`` topic (json, one object per record, Flink's json format
    with default options) decoded in one pass by Arrow's JSON reader: a table with ``user_id``
    int64 and ``user_region`` string, one row per value, in order.

    Returns None when the batch is not one that the json format would decode to exactly the same
    rows: a null or empty value, a value that is not a single ``{...}`` object on one line, a
    column of another JSON type (``"1"`` for BIGINT), an integer outside BIGINT, invalid UTF-8, a
    ``viewtime`` that is not a valid ``yyyy-MM-dd HH:mm:ss[.f]``. The caller then decodes record
    by record with the source's json format, which accepts or raises its DecodeError (naming the
    topic, partition and offset) exactly as the row path does.
    """
    n = len(values)
    if n == 0 or None in values:
        return None
    joined = b"\n".join(values)  # type: ignore[arg-type]  # None was ruled out above
    # one object per line, nothing between them: every separator sits between "}" and "{"
    if not (
        joined[:1] == b"{" and joined[-1:] == b"}" and joined.count(b"\n") == n - 1
        and joined.count(b"}\n{") == n - 1 and b"\r" not in joined
    ):
        return None
    if not joined.isascii():
        try:
            joined.decode("utf-8")  # the json format refuses invalid UTF-8 anywhere, field names too
        except UnicodeDecodeError:
            return None
    try:
        table = pajson.read_json(
            pa.BufferReader(joined),
            read_options=pajson.ReadOptions(use_threads=False, block_size=len(joined) + 1),
            parse_options=_ARROW_JSON_PARSE,
        )
        if table.num_rows != n:
            return None
        table.validate(full=True)  # UTF-8 of every string
        viewtime = table.column("viewtime")
        if viewtime.null_count < len(viewtime):
            shaped = pc.match_substring_regex(viewtime, _TIMESTAMP_SHAPE)
            if pc.any(pc.invert(shaped)).as_py() or pc.any(pc.starts_with(viewtime, "0000")).as_py():
                return None
            pc.cast(pc.utf8_slice_codeunits(viewtime, 0, 19), pa.timestamp("s"))  # valid dates and times
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError, ValueError):
        return None
    return table.select(["user_id", "user_region"])


def _decode_rows_to_table(source: Any, msgs: Sequence[Any]) -> tuple[pa.Table, list[RowKind]]:
    """Record-by-record decoding through the source's format (exact errors), as a table."""
    rows = [r for m in msgs for r in source.decode_message(m)]
    table = pa.table(
        {
            "user_id": pa.array([r.values.get("user_id") for r in rows], pa.int64()),
            "user_region": pa.array([r.values.get("user_region") for r in rows], pa.string()),
        }
    )
    return table, [r.kind for r in rows]


def _aggregate_messages(agg: GroupAggregate, source: Any, msgs: Sequence[Any]) -> list[ChangelogRow]:
    """Decode a batch of messages (columnar when possible) and aggregate it as one mini-batch."""
    table = decode_pageviews_batch([m.value() for m in msgs])
    if table is not None:
        return agg.process_arrow(table)
    table, kinds = _decode_rows_to_table(source, msgs)
    return agg.process_arrow(table, kinds)


# -- truth ----------------------------------------------------------------------------------------
def read_pageviews_table(bootstrap: str, topic: str, timeout_s: float = 60.0) -> pa.Table:
    """The whole ``pageviews`` topic (earliest to the end offsets at call time) as an Arrow table
    with columns user_id int64, page_id int64, viewtime timestamp[ms], user_region string.

    Raises ConnectorError if the end is not reached within ``timeout_s`` seconds.
    """
    from changelake.connectors.kafka_table import create_source

    opts = pageviews_source_options(
        bootstrap, topic, **{"scan.startup.mode": "earliest-offset", "scan.bounded.mode": "latest-offset"}
    )
    cols: dict[str, list[Any]] = {c: [] for c in PAGEVIEWS_SCHEMA.names}
    deadline = time.monotonic() + timeout_s
    with create_source(opts, PAGEVIEWS_SCHEMA, table_name="pageviews") as src:
        while not src.finished:
            if time.monotonic() > deadline:
                raise ConnectorError(f"topic {topic!r} not read to its end within {timeout_s} s")
            for r in src.poll(0.5, 5000):
                for c in cols:
                    cols[c].append(r.values.get(c))
    return pa.table(
        {
            "user_id": pa.array(cols["user_id"], pa.int64()),
            "page_id": pa.array(cols["page_id"], pa.int64()),
            "viewtime": pa.array(cols["viewtime"], pa.timestamp("ms")),
            "user_region": pa.array(cols["user_region"], pa.string()),
        }
    )


def recompute_pv_uv(events: pa.Table | Iterable[Mapping[str, Any]]) -> dict[str | None, tuple[int, int]]:
    """PV and UV per region recomputed from scratch with DuckDB (SQL GROUP BY over Arrow).

    Args:
        events: an Arrow table (e.g. :func:`read_pageviews_table`) or event dicts.

    Returns:
        ``{user_region: (pv, uv)}``.
    """
    import duckdb

    if not isinstance(events, pa.Table):
        rows = list(events)
        events = pa.table(
            {
                "user_id": pa.array([e.get("user_id") for e in rows], pa.int64()),
                "user_region": pa.array([e.get("user_region") for e in rows], pa.string()),
            }
        )
    con = duckdb.connect()
    try:
        con.register("pageviews", events)
        res = con.execute(
            "SELECT user_region, COUNT(*) AS pv, COUNT(DISTINCT user_id) AS uv FROM pageviews GROUP BY user_region"
        ).fetchall()
    finally:
        con.close()
    return {r[0]: (int(r[1]), int(r[2])) for r in res}


def read_upsert_topic_final_state(
    bootstrap: str,
    topic: str,
    *,
    fmt: str = "avro",
    timeout_s: float = 60.0,
    metrics: SourceMetrics | None = None,
) -> dict[str | None, tuple[int, int]]:
    """The final ``pageviews_per_region`` table, read (read_committed) through the upsert-kafka
    source from the earliest offset to the current end: ``{user_region: (pv, uv)}``.

    ``metrics``, if given, receives the source's metrics (numRecordsIn, numBytesIn, ...).
    Raises ConnectorError if the end is not reached within ``timeout_s`` seconds.
    """
    from changelake.connectors.upsert_kafka.factory import create_source

    opts = pageviews_sink_options(bootstrap, topic, fmt=fmt, **{"scan.bounded.mode": "latest-offset"})
    opts.pop("sink.delivery-guarantee")
    state: dict[str | None, tuple[int, int]] = {}
    deadline = time.monotonic() + timeout_s
    with create_source(opts, PER_REGION_SCHEMA, metrics=metrics) as src:
        while not src.is_bounded_end_reached():
            if time.monotonic() > deadline:
                raise ConnectorError(f"upsert topic {topic!r} not read to its end within {timeout_s} s")
            for r in src.poll(0.5, 5000):
                region = r.values["user_region"]
                if r.kind is RowKind.DELETE:
                    state.pop(region, None)
                elif r.kind is not RowKind.UPDATE_BEFORE:
                    state[region] = (r.values["pv"], r.values["uv"])
    return state


# -- the job --------------------------------------------------------------------------------------
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


def _load_snapshot(state_dir: Path | None, agg: GroupAggregate) -> dict[tuple[str, int], int] | None:
    """Restore ``agg`` from the local snapshot; returns the offsets it covers, or None."""
    if state_dir is None:
        return None
    path = state_dir / _SNAPSHOT_FILE
    if not path.exists():
        return None
    try:
        body = json.loads(path.read_text())
        offsets = {(t, int(p)): int(o) for t, p, o in body["offsets"]}
        agg.restore(body["state"].encode())
    except (ValueError, KeyError, TypeError, InvalidAggregateError):
        agg.store.clear()
        return None
    return offsets


def _save_snapshot(state_dir: Path | None, agg: GroupAggregate, offsets: Mapping[tuple[str, int], int]) -> None:
    """Atomically replace the local snapshot (write a temp file, fsync, rename)."""
    if state_dir is None:
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    body = {"offsets": [[t, p, o] for (t, p), o in sorted(offsets.items())], "state": agg.snapshot().decode()}
    fd, tmp = tempfile.mkstemp(dir=state_dir, prefix=".snapshot-")
    with os.fdopen(fd, "w") as f:
        json.dump(body, f, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, state_dir / _SNAPSHOT_FILE)


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
        snap = _load_snapshot(state_path, agg)
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
                        _aggregate_messages(agg, source, replay)  # rebuilds state; output discarded
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
                    out = _aggregate_messages(agg, source, fresh)
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
                _save_snapshot(state_path, agg, source.positions())
                last_snapshot = now
                dirty = False
            elif got or fresh:
                dirty = True
            if stop:
                if dirty:
                    _save_snapshot(state_path, agg, source.positions())
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


# -- CLI (used by the kill -9 test and by hand) ----------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m changelake.pageviews generate|run ...``; prints JSON stats."""
    ap = argparse.ArgumentParser(prog="python -m changelake.pageviews", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="write N seeded page-view events to a topic")
    g.add_argument("--bootstrap", required=True)
    g.add_argument("--topic", default="pageviews")
    g.add_argument("-n", type=int, default=10000)
    g.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("run", help="aggregate PV/UV per region into an upsert-kafka topic")
    r.add_argument("--bootstrap", required=True)
    r.add_argument("--source-topic", default="pageviews")
    r.add_argument("--sink-topic", default="pageviews_per_region")
    r.add_argument("--format", default="avro", help="key and value format of the upsert topic")
    r.add_argument("--delivery-guarantee", default="at-least-once", choices=["none", "at-least-once", "exactly-once"])
    r.add_argument("--transactional-id-prefix", default=None)
    r.add_argument("--group-id", default=None)
    r.add_argument("--state-dir", default=None)
    r.add_argument("--retract-topic", default=None, help="also write the retract changelog here (debezium-json)")
    r.add_argument("--batch-size", type=int, default=2000)
    r.add_argument("--no-mini-batch", action="store_true")
    r.add_argument("--unbounded", action="store_true", help="do not stop when caught up")
    r.add_argument("--max-duration-s", type=float, default=None)
    args = ap.parse_args(argv)
    if args.cmd == "generate":
        n = produce_pageviews(args.bootstrap, args.topic, generate_pageviews(args.n, args.seed))
        print(json.dumps({"events": n, "topic": args.topic}))
        return 0
    prefix = args.transactional_id_prefix or (f"pageviews-agg-{args.sink_topic}" if args.delivery_guarantee == "exactly-once" else None)
    stats = run_pageviews_aggregation(
        args.bootstrap,
        args.source_topic,
        pageviews_sink_options(args.bootstrap, args.sink_topic, fmt=args.format, transactional_id_prefix=prefix),
        args.delivery_guarantee,
        args.state_dir,
        until_caught_up=not args.unbounded,
        group_id=args.group_id,
        retract_table_options=retract_sink_options(args.bootstrap, args.retract_topic) if args.retract_topic else None,
        batch_size=args.batch_size,
        mini_batch=not args.no_mini_batch,
        max_duration_s=args.max_duration_s,
    )
    print(json.dumps(asdict(stats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

