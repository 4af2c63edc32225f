"""What a source and a sink are: the connector contract, as Flink CDC's ``DataSource``/``DataSink``.

Three shapes exist today, each one a :class:`typing.Protocol` the existing connectors already
satisfy (checked by ``tests/unit/connectors/test_registry.py``):

- :class:`ChangelogSource` -- a source with one resume position (``mysql``:
  :class:`~changelake.connectors.mysql_cdc.source.MySqlSource`). It polls batches of
  :class:`~changelake.changelog.event.DataChangeEvent`; ``position`` is a JSON-serialisable dict,
  the point *after* the last event returned.
- :class:`ChangelogSink` -- a sink that stores the source position with the data it commits
  (``kafka``: :class:`~changelake.connectors.kafka.sink.KafkaPipelineSink`, ``upsert-kafka``:
  :class:`~changelake.connectors.upsert_kafka.ingestion.UpsertKafkaIngestionSink`, and the lake
  sinks behind :class:`~changelake.connectors.lake.changelog_sink.LakePositionSink`). ``commit``
  makes everything written so far durable together with the position; ``stored_position`` is
  where a restart resumes (exactly-once: no loss, no duplicate).
- :class:`LakeSink` -- a table sink fed by a partitioned log (``iceberg``, ``paimon``): rows are
  added per table with the Kafka offsets they came from, and each table commit stores those
  offsets (see :mod:`changelake.connectors.lake.offsets`).

The ``kafka`` source (:class:`~changelake.connectors.kafka.source.KafkaPipelineSource`) is
partitioned: it polls records with their topic-partition offsets rather than events with one
position, so the runner pairs it with a :class:`LakeSink` only, seen through the same two contracts
(:class:`~changelake.connectors.kafka.source.PartitionedSource` and
:class:`~changelake.connectors.lake.changelog_sink.LakeOffsetsSink`, whose position is the next
offset per ``topic/partition``); one runner loop (:mod:`changelake.pipeline.loop`) runs every pair.
The sink-side adapters live together in :mod:`changelake.connectors.lake.changelog_sink`; the
source side, ``PartitionedSource``, is the ``kafka`` source's own view of itself, next to the
source it adapts (:mod:`changelake.connectors.kafka.source`).

Optional abilities, the runner's whole contract beyond the two shapes (as Flink's ``Supports...``
interfaces: declared by the connector, checked with ``isinstance``, never probed by name):

=====================================  =====================================================
ability                                 what the runner does with it
=====================================  =====================================================
:class:`BufferedSink`                   flushes when the source is idle and at stop; reports a
                                        batch once durable
:class:`ReportsMetrics` (sink)          copies ``metrics`` into the run's stats
:class:`PartitionedChangelogSource`     offsets positions; tells the source what the sink
                                        committed; counts ``last_records`` per poll
:class:`RejectsRecords` (source)        hands a record the stage found bad back to the source
:class:`ReportsBadRecords` (source)     copies ``bad_records``, ``dead_letters`` and
                                        ``inferred_tables`` into the run's stats
:class:`EmitsSideRecords` (source)      after each poll, hands its transaction metadata and
                                        heartbeat records to a :class:`WritesSideRecords`
                                        sink, before that batch's commit
:class:`CommitsInBackground` (sink)     the loop starts each commit with ``start_commit``
                                        and goes on reading; the sink finishes it before
                                        it writes again (and in ``close``)
:class:`EmitsChangeBatches` (source)    with a :class:`WritesChangeBatches` sink: polls
                                        :class:`~changelake.changelog.change_batch.ChangeBatch`
                                        items (Arrow) beside events; the stage routes and
                                        transforms them whole, or takes their per-record
                                        ``fallback``
:class:`GuaranteesKeys` (source)        a poll whose events the source vouches for
                                        (``last_poll_keyed``) skips a stage that has no
                                        transform, route or append-only reading
=====================================  =====================================================

Every source and sink declares ``changelog_mode``: the row kinds it produces or accepts (Flink's
``ChangelogMode``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol, Sequence, runtime_checkable

from changelake.changelog.change_batch import ChangeBatch
from changelake.changelog.event import DataChangeEvent
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.side_records import SideRecord

__all__ = [
    "ChangelogSource", "ChangelogSink", "BufferedSink", "LakeSink", "ReportsMetrics", "PartitionedChangelogSource",
    "RejectsRecords", "ReportsBadRecords", "EmitsSideRecords", "WritesSideRecords", "CommitsInBackground",
    "EmitsChangeBatches", "WritesChangeBatches", "CountsAbsorbedChanges", "GuaranteesKeys",
]


@runtime_checkable
class ChangelogSource(Protocol):
    """A source of change events with one resume position (Flink CDC's ``DataSource``).

    Lifecycle: construct (config only, no I/O) -> ``open()`` -> ``poll()`` ... -> ``close()``
    (idempotent). A restart builds the source again with the position a sink stored.
    """

    changelog_mode: frozenset[RowKind]

    def open(self) -> None:
        """Connect and find the start point. Raises SourceError (and subclasses)."""

    def poll(self, max_events: int = ..., timeout_s: float = ...) -> list[DataChangeEvent]:
        """Up to ``max_events`` change events, waiting at most ``timeout_s`` seconds; may be empty."""

    @property
    def position(self) -> dict[str, Any] | None:
        """The position after the last event returned (JSON-serialisable), None before any."""

    def caught_up(self) -> bool:
        """True once everything that existed when the source last looked has been returned."""

    def close(self) -> None:
        """Release connections; idempotent."""


@runtime_checkable
class ChangelogSink(Protocol):
    """A sink that commits data together with the source position (Flink CDC's ``DataSink``).

    Lifecycle: construct (config only) -> ``open()`` -> ``stored_position()`` -> ``write()`` /
    ``commit()`` ... -> ``close()`` (idempotent; uncommitted writes are discarded or flushed as
    the sink documents).
    """

    changelog_mode: frozenset[RowKind]

    def open(self) -> None:
        """Connect (and, for transactional sinks, fence earlier instances)."""

    def write(self, events: Sequence[DataChangeEvent]) -> None:
        """Hand over routed and transformed events; durable only after :meth:`commit`."""

    def commit(self, position: Mapping[str, Any]) -> object:
        """Make the writes so far durable with ``position``, atomically where the sink can (a
        :class:`BufferedSink` may only buffer them and say so in its return value)."""

    def stored_position(self) -> dict[str, Any] | None:
        """The last committed source position, None on the first run."""

    def close(self) -> None:
        """Release clients; idempotent."""


@runtime_checkable
class LakeSink(Protocol):
    """A table sink whose commits store the log offsets they absorbed (``iceberg``, ``paimon``).

    ``offsets`` map ``"topic/partition"`` to the next offset to consume; a replayed item whose
    ``metadata`` offset is below a table's committed offset is skipped, so a restart after a crash
    between two tables' commits applies nothing twice.
    """

    options: Any
    #: True when a commit checks the table's offsets inside the commit, so several workers (a
    #: consumer group, possibly on several machines) may write one table.
    multi_writer: bool
    #: writes redone because another writer committed the table first (commit conflicts)
    commit_redos: int

    def open(self) -> None:
        """Open the catalog."""

    def add(self, table_id: TableId, rows: Iterable[Any], schema: Schema, offsets: Mapping[str, int]) -> None:
        """Buffer rows (ChangelogRow or TruncateMarker) of one table; no I/O."""

    def should_flush(self) -> bool:
        """True once the buffer holds ``commit.max-rows`` rows."""

    def flush(self) -> list[Any]:
        """One commit per buffered table (offsets in its snapshot); returns one result per table."""

    def close(self) -> None:
        """Release the catalog; idempotent."""

    @property
    def buffered_rows(self) -> int:
        """Rows waiting for :meth:`flush`."""

    def read_pipeline_property(self, key: str) -> str | None:
        """A pipeline property (e.g. a checkpoint) kept in the lake, None when absent."""

    def write_pipeline_property(self, key: str, value: str) -> None:
        """Store a pipeline property in the lake."""

    def read_checkpoint(self, pipeline: str) -> dict[str, int]:
        """The offsets checkpoint of a partitioned-source pipeline, ``{}`` on the first run."""

    def write_checkpoint(self, pipeline: str, offsets: Mapping[str, int]) -> None:
        """Store the offsets checkpoint of ``pipeline`` (after every table of a batch committed)."""

    # -- what checks and reports read of a lake (no buffering involved) --------------------------
    def table_name(self, table_id: TableId) -> str:
        """The lake identifier of a source table as text (``namespace.table``, ``database.table``)."""

    def primary_key(self, table_id: TableId) -> list[str]:
        """The primary-key columns the lake table declares. Raises the lake's sink error when absent."""

    def last_commit_ms(self, table_id: TableId) -> int | None:
        """Commit time (ms since the epoch) of the table's latest snapshot; None if never written."""

    def read_table(self, table_id: TableId, columns: Sequence[str] | None = None) -> Any:
        """Every current row of the lake table as a ``pyarrow.Table`` (a full scan). Raises the
        lake's sink error when the table or a column does not exist."""

    def write_checkpoint_entries(self, pipeline: str, offsets: Mapping[str, int], writer: str = ...) -> None:
        """Store ``writer``'s checkpoint entry per partition (a parallel worker's, no read-modify-write)."""


@runtime_checkable
class BufferedSink(Protocol):
    """A :class:`ChangelogSink` whose :meth:`commit` may only buffer (the lake sinks behind
    :class:`~changelake.connectors.lake.changelog_sink.LakeChangelogSink`). The runner asks it to
    :meth:`flush` when the source is idle and when the run stops, and reports a batch (``on_batch``)
    only once it is durable.
    """

    #: True: :meth:`commit` may only buffer (the runner checks this flag, not the methods).
    buffers_commits: bool

    def commit(self, position: Mapping[str, Any]) -> list[Any] | None:
        """As :meth:`ChangelogSink.commit`; returns the per-table commit results when the data
        became durable now, None when it is still buffered."""

    def flush(self, force: bool = True) -> list[Any] | None:
        """Make what :meth:`commit` covered durable now (``force``) or if due while the source is
        idle; returns the per-table results when it did, else None."""


@runtime_checkable
class CountsAbsorbedChanges(Protocol):
    """A per-table commit result of a :class:`BufferedSink` that says how many change events its
    table absorbed (the lake sinks' ``WriteResult``): rows re-read after a handover, or committed
    first by another worker, are not counted again."""

    #: the sink table the rows came for (``db.table``); empty when the result does not say
    sink_table: str
    #: change events this commit absorbed (an update's ``-U``/``+U`` pair counts once)
    rows_applied: int


@runtime_checkable
class ReportsMetrics(Protocol):
    """A sink (or source) with counters for the run's stats, e.g. ``{"records": 10, "commits": 2}``."""

    metrics: Mapping[str, Any]


@runtime_checkable
class PartitionedChangelogSource(Protocol):
    """A :class:`ChangelogSource` whose ``position`` is the next offset per ``topic/partition``
    (``{"orders/0": 42}``; :class:`~changelake.connectors.kafka.source.PartitionedSource`).
    It feeds a partitioned sink (a lake) only."""

    #: Marks the offsets position (always True).
    partitioned: bool
    #: Log records returned by the last poll (rejected and empty ones included); a record may
    #: hold no change event, or several.
    last_records: int

    def notify_committed(self, position: Mapping[str, int]) -> None:
        """The sink holds ``position`` durably (e.g. commit it to the consumer group, for lag)."""


@runtime_checkable
class RejectsRecords(Protocol):
    """A source that can take back the record a change event came from when the pipeline's stage
    refuses it (a bad row): skip it (``<format>.ignore-parse-errors``), copy it to the dead-letter
    topic, or raise naming topic, partition, offset and table."""

    def reject(self, event: DataChangeEvent, error: BaseException, table: str) -> None:
        """Skip or dead-letter the record of ``event``, or raise RecordError."""


@runtime_checkable
class GuaranteesKeys(Protocol):
    """A source that says, after each poll, whether the pipeline stage's key check and schema
    completion (:mod:`changelake.pipeline.stage`) have anything to do on the events it returned
    (the ``mysql`` source). A stage without transform, route or append-only reading then has no
    work for them (:meth:`~changelake.pipeline.stage.Stage.passes_through`), and the loop hands
    them to the sink as they are.

    ``last_poll_keyed`` True guarantees, for every event the last poll returned: a change event
    (``c``, ``r``, ``u``, ``d``) carries its schema, and its key row(s) (``after``; ``before`` of a
    ``d``; both of a ``u``) hold every primary-key column of that schema, non-NULL; a TRUNCATE /
    DROP TABLE (``t``, no rows) carries its table's schema, or none when no earlier event of that
    table from this source carried one (the schema the stage would give it: the last one it saw of
    the table). False promises nothing: the stage takes those events as from any source.
    """

    #: after each poll: True when the guarantee above holds for every event it returned
    last_poll_keyed: bool


@runtime_checkable
class ReportsBadRecords(Protocol):
    """A source that counts what it skipped, and the tables whose records carried no schema."""

    #: source tables whose types were inferred from values, in first-seen order
    inferred_tables: list[str]

    @property
    def bad_records(self) -> int:
        """Records skipped with ``<format>.ignore-parse-errors``."""

    @property
    def dead_letters(self) -> int:
        """Of those, records copied to ``dead-letter.topic``."""


@runtime_checkable
class EmitsSideRecords(Protocol):
    """A source that emits Debezium's transaction metadata (``provide.transaction.metadata``) or
    heartbeat records (``heartbeat.interval.ms``) beside its change events."""

    def take_side_records(self) -> list[SideRecord]:
        """The records produced by the polls since the last call, in order (then forgotten); they
        belong to the position :attr:`ChangelogSource.position` has now."""


@runtime_checkable
class WritesSideRecords(Protocol):
    """A sink that writes side records (the Kafka pipeline sink: to the transaction and heartbeat
    topics, in the open Kafka transaction under exactly-once)."""

    def write_side_records(self, records: Sequence[SideRecord]) -> None:
        """Write ``records``; durable with the next :meth:`ChangelogSink.commit`."""


@runtime_checkable
class CommitsInBackground(Protocol):
    """A sink whose commit can run while the loop reads and encodes the next batch (the Kafka
    pipeline sink under exactly-once: ``commit_transaction`` waits for the broker). The loop calls
    :meth:`start_commit` instead of :meth:`ChangelogSink.commit`; the sink finishes that commit
    before it produces anything else, in ``stored_position`` and in ``close``, and raises its
    failure there, so a failed commit fails the run before a later batch is written. The loop
    reports a batch (``on_batch``) after :meth:`finish_commit`."""

    def start_commit(self, position: Mapping[str, Any]) -> None:
        """Start making everything written so far durable with ``position``."""

    def finish_commit(self) -> bool:
        """Wait for the started commit (True if there was one); raises its failure."""


@runtime_checkable
class EmitsChangeBatches(Protocol):
    """A source that can decode groups of records in one columnar call (the ``kafka`` source,
    Pipeline 1's schema header, ``debezium-json``) and hand them over as
    :class:`~changelake.changelog.change_batch.ChangeBatch` items instead of events."""

    #: False when the wrapped source cannot (then the runner polls events).
    change_batches: bool

    def poll_batches(self, max_events: int = ..., timeout_s: float = ...) -> list[ChangeBatch | list[DataChangeEvent]]:
        """As :meth:`ChangelogSource.poll`: up to ``max_events`` records, as batches (Arrow) and
        lists of events, in order per partition. A batch's ``fallback()`` gives its records as
        events (decoded one by one), for the per-record path."""


@runtime_checkable
class WritesChangeBatches(Protocol):
    """A sink that takes :class:`~changelake.changelog.change_batch.ChangeBatch` items as they
    are (the lake sinks behind :class:`~changelake.connectors.lake.changelog_sink.LakeOffsetsSink`),
    buffered in order with its events."""

    def write_change_batches(self, batches: Sequence[ChangeBatch]) -> None:
        """As :meth:`ChangelogSink.write` for batches; durable only after the commit."""
