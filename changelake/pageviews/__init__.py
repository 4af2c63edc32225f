"""The page-views job (production code the pageviews assets run): PV and UV per region, from a
``kafka`` topic into an ``upsert-kafka`` topic.

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

**Why it has its own loop, not** :func:`changelake.pipeline.loop.run_loop`. The one loop runs Flink
CDC *pipelines*; this is a Flink SQL *job*, and the loop's contract does not carry it unchanged:

* the loop moves :class:`~changelake.changelog.DataChangeEvent` (a table's change with its schema,
  one update = before + after) through a :class:`~changelake.pipeline.stage.Stage` built from a
  pipeline definition (transform, route, key check); this job moves a
  :class:`~changelake.changelog.ChangelogRow` stream (one RowKind per row) through a stateful
  :class:`~changelake.changelog.aggregate.GroupAggregate`. On the loop, the aggregate's ``-U`` and
  ``+U`` would be merged into one update event and split again in the sink, and the retract topic
  must see them as the two rows the aggregate emitted;
* the loop's position belongs to the sink (``sink.stored_position()`` before the source exists,
  ``sink.commit(position)`` alone); here it is the consumer group's committed offsets, read from
  the source's consumer, and committed inside the sink's producer transaction together with the
  consumer's group metadata (``send_offsets_to_transaction``), so the sink would need the source;
* before anything is emitted the state is rebuilt by replaying the input up to the committed
  offsets *without output*, holding fresh records until every partition is replayed (a
  region's value depends on all of them), and a stop during that replay ends the run with nothing
  written; the loop has no such phase (whatever its source polls goes to the sink);
* with mini-batch the undecoded Kafka messages of a batch are decoded in one columnar pass and
  aggregated straight from Arrow (:mod:`changelake.pageviews.decode`), before any per-row event
  exists for a stage to see.

Adapters for all four would hold this package's logic unchanged and leave the loop only its
poll/write/commit cycle, while the kill -9 tests' exactly-once depends on the exact order kept
here (fence, read committed offsets, restore, replay, then one transaction per batch).

Modules: :mod:`~changelake.pageviews.query` (schemas, WITH options, the aggregate),
:mod:`~changelake.pageviews.data` (seeded events), :mod:`~changelake.pageviews.decode` (columnar
decoding), :mod:`~changelake.pageviews.snapshot` (local state snapshot),
:mod:`~changelake.pageviews.job` (the run), :mod:`~changelake.pageviews.truth` (DuckDB
recomputation and reading the output back); ``python -m changelake.pageviews`` is its CLI.
"""

from changelake.pageviews.data import generate_pageviews, produce_pageviews
from changelake.pageviews.decode import decode_pageviews_batch
from changelake.pageviews.job import PageviewsStats, run_pageviews_aggregation
from changelake.pageviews.query import (
    PAGEVIEWS_SCHEMA,
    PER_REGION_SCHEMA,
    REGIONS,
    pageviews_aggregate,
    pageviews_sink_options,
    pageviews_source_options,
    retract_sink_options,
)
from changelake.pageviews.truth import read_pageviews_table, read_upsert_topic_final_state, recompute_pv_uv

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
