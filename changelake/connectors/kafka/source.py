"""The Kafka pipeline source (Pipeline 2's input): Kafka records -> change events.

Reads topics written by :class:`~changelake.connectors.kafka.sink.KafkaPipelineSink` (or by Flink
CDC / Debezium / Canal), decodes each record value with the value format and attaches the table:

- without ``<format>.distributed-tables`` the topic is the table (``TableId.parse(topic)``, so a
  ``db.table`` topic is table ``table`` of database ``db``);
- with it, each record names its table (debezium ``source.db``/``source.table``, canal
  ``database``/``table``; for ``json`` the key's ``TableId``).

For ``json`` topics (upsert topics) a record is an insert of its value, and a tombstone (null
value) with a key is a delete of the key's columns (``TableId`` removed).

Types: a record whose headers name a schema (``changelake.schema.id`` / ``changelake.schema.topic``,
written by Pipeline 1, see :mod:`.schemas`) is decoded with that exact schema, so DECIMAL, DATETIME,
BINARY... keep their MySQL types although the payload is Flink's default JSON; otherwise the
format's own schema is used (a debezium-json ``schema`` wrapper), else the events carry no schema
and the caller infers one from the values.

The runner sees this source through :class:`PartitionedSource` (below): change events with their
record's position, the position as the next offset per ``topic/partition``.

The caller (the lake sink) owns the offsets: :meth:`KafkaPipelineSource.open` assigns the
partitions and seeks to the offsets given, falling back to ``scan.startup.mode``; consumer-group
offsets are committed only on request (:meth:`commit_advisory`) so that lag can be watched. The end
offsets are snapshotted at open (and :meth:`refresh`) for "until caught up" reads.

Consumers use ``isolation.level=read_committed`` unless ``properties.isolation.level`` says
otherwise, so aborted transactions of an exactly-once Pipeline 1 are never read. End offsets are
then last stable offsets: an open transaction is not waited for, and the commit markers of a
transaction committed a moment ago may not have reached the partition yet (call :meth:`refresh`
to take a new snapshot).

Example::

    src = KafkaPipelineSource({"properties.bootstrap.servers": bs, "topic": "inventory",
                               "debezium-json.distributed-tables": "true"}, group_id="lake")
    src.open(start_offsets=None)
    while not src.caught_up():
        for rec in src.poll(max_records=500, timeout_s=1.0):
            handle(rec.events, next_offset=rec.offset + 1)
    src.close()
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from changelake.changelog.change_batch import ChangeBatch
from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.rowkind import RETRACT, UPSERT, RowKind
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.transform import infer_schema
from changelake.connectors.base import EmitsChangeBatches, PartitionedChangelogSource, RejectsRecords, ReportsBadRecords
from changelake.connectors.errors import KafkaUnavailableError, RecordError, SourceError
from changelake.connectors.kafka.dead_letter import DeadLetterQueue
from changelake.connectors.kafka.side_topics import side_record_kind
from changelake.connectors.kafka.schemas import SchemaResolver, schema_header
from changelake.connectors.kafka.truncate_scope import schema_change_of, scope_of
from changelake.connectors.kafka.sink_options import ValueFormat
from changelake.connectors.kafka.source_options import BoundedMode, KafkaSourceOptions, StartupMode
from changelake.connectors.kafka_common import (
    consumer_error,
    partition_end_offsets,
    partition_lag,
    partition_watermarks,
    reader_config,
    require_broker,
    unavailable_error,
    with_logger,
)
from changelake.connectors.lake.offsets import split_topic_partition, topic_partition
from changelake.formats import create_format
from changelake.formats.debezium_json import decode_columns
from changelake.formats.errors import DecodeError

__all__ = ["SourceRecord", "RecordGroup", "KafkaPipelineSource", "TopicPartitionKey", "MIN_GROUP", "PartitionedSource",
           "note_inferred"]

log = logging.getLogger(__name__)

#: librdkafka's text of KIP-848's UNRELEASED_INSTANCE_ID, inside the fatal error it raises when a
#: static member joins while the member the broker has for its ``group.instance.id`` (a killed or
#: paused worker this one replaces) has not yet timed out.
_UNRELEASED_INSTANCE_ID = KafkaError(KafkaError.UNRELEASED_INSTANCE_ID).str()
#: how long a static member keeps rejoining while its ``group.instance.id`` is unreleased, seconds:
#: past Kafka's default ``group.consumer.session.timeout.ms`` (45 s), then it fails.
UNRELEASED_INSTANCE_WAIT_S = 120.0
#: how often a group member that waits for other members' partitions says which, seconds
WAITING_LOG_S = 30.0
#: Commit errors that only mean "the group is rebalancing" (the advisory commit is then skipped).
_REBALANCE_CODES = frozenset({KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS})

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class SourceRecord:
    """One Kafka record and the change events decoded from it.

    Attributes:
        topic, partition, offset: where the record is; the next offset to resume from is ``offset + 1``.
        events: decoded events (a canal-json record may hold several; a skipped record none). Each
            event's ``position`` is ``{"topic", "partition", "offset": offset + 1}``.
        key: raw key bytes or None.
        timestamp: record timestamp in ms since the epoch (None if the broker has none).
        headers: record headers as (name, bytes) pairs.
        value: raw value bytes or None (kept so a bad record can be copied to the dead-letter topic).
    """

    topic: str
    partition: int
    offset: int
    events: list[DataChangeEvent]
    key: bytes | None
    timestamp: int | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    value: bytes | None = None


#: Fewer consecutive records than this of one schema are decoded one by one (a columnar call
#: costs more than it saves on a handful).
MIN_GROUP = 8


@dataclass(frozen=True)
class RecordGroup:
    """Consecutive records of one partition and one schema header, decoded in Arrow
    (:meth:`KafkaPipelineSource.poll_groups`).

    Attributes:
        topic, partition: where the records are.
        offsets: each record's offset, in order.
        table: the records' table (the topic's, or with ``distributed-tables`` the one their
            ``source`` names).
        schema: the schema the headers name.
        changes: the changelog rows (:class:`~changelake.formats.debezium_json.ColumnarChanges`;
            ``changes.message`` indexes ``offsets``).
    """

    topic: str
    partition: int
    offsets: list[int]
    table: TableId
    schema: Schema
    changes: Any
    messages: list[Any] = field(repr=False, compare=False)
    source: "KafkaPipelineSource" = field(repr=False, compare=False)

    def records(self) -> list[SourceRecord]:
        """The same records decoded one by one, as :meth:`KafkaPipelineSource.poll` gives them."""
        return [self.source._decode(msg) for msg in self.messages]


class KafkaPipelineSource:
    """Assign-and-seek Kafka reader that decodes change events (see the module docstring).

    Args:
        options: raw source options (validated here) or :class:`KafkaSourceOptions`.
        group_id: consumer group used for advisory offset commits (lag watching) and for
            ``group-offsets`` startup.
        timeout_s: how long one metadata or offset request waits for the broker, seconds (30).

    Raises:
        OptionValidationError: invalid options.

    Attributes:
        parse_errors: number of bad records skipped with ``<format>.ignore-parse-errors`` (corrupt
            ones here, unappliable ones reported through :meth:`reject`).
        dead_letter: the :class:`DeadLetterQueue` of ``dead-letter.topic``, or None.
    """

    def __init__(self, options: Mapping[str, Any] | KafkaSourceOptions, group_id: str, *,
                 timeout_s: float = 30.0) -> None:
        self.options = options if isinstance(options, KafkaSourceOptions) else KafkaSourceOptions.from_options(options)
        #: the row kinds this topic's records carry: a ``json`` topic is an upsert topic (a record
        #: is its key's row, a tombstone its delete: +I, +U, -D, no before image); the changelog
        #: formats (debezium-json, canal-json) carry all four, as Flink's formats declare.
        self.changelog_mode: frozenset[RowKind] = (UPSERT if self.options.value_format is ValueFormat.JSON
                                                   else RETRACT)
        self.group_id = group_id
        self._consumer: Consumer | None = None
        self._format: Any = None
        self._typed_formats: dict[str, Any] = {}
        self._resolver: SchemaResolver | None = None
        self._assigned: list[TopicPartitionKey] = []
        self._end: dict[TopicPartitionKey, int] = {}
        self._pos: dict[TopicPartitionKey, int] = {}
        self._paused: set[TopicPartitionKey] = set()
        self._group_assigned = True  # False from open_group() until the group assigns partitions
        self._in_group = False
        #: a bounded group run: (low, end) of every partition of the subscription at open_group
        self._run_ends: dict[TopicPartitionKey, tuple[int, int]] = {}
        self._stored: Callable[[list[TopicPartitionKey]], Mapping[TopicPartitionKey, int]] | None = None
        #: how to join the group again (consumer configuration, subscription, callbacks)
        self._join: Callable[[], Consumer] | None = None
        #: while our static group.instance.id is unreleased: when to join again, and since when
        self._rejoin_at: float | None = None
        self._unreleased_since: float | None = None
        self._waiting_logged = -WAITING_LOG_S  # when caught_up last named the partitions it waits for
        self.parse_errors = 0
        self._timeout_s = timeout_s
        self.dead_letter: DeadLetterQueue | None = None
        if self.options.dead_letter_topic:
            self.dead_letter = DeadLetterQueue(self.options.properties, self.options.dead_letter_topic, timeout_s)

    # -- lifecycle -------------------------------------------------------------------------------
    def open(self, start_offsets: Mapping[TopicPartitionKey, int] | None = None) -> None:
        """Connect, assign every partition of the topics and seek.

        Args:
            start_offsets: ``{(topic, partition): next offset}`` owned by the caller; partitions not
                in it start as ``scan.startup.mode`` says.

        Raises:
            KafkaUnavailableError: no broker answered within ``timeout_s`` (names ``bootstrap.servers``).
            SourceError: no topic matches, a topic does not exist, or a Kafka request failed.
        """
        if self._consumer is not None:
            return
        opts = self.options
        conf: dict[str, Any] = reader_config(opts.properties)
        conf.setdefault("group.id", self.group_id)
        conf.setdefault("isolation.level", "read_committed")
        conf.setdefault("auto.offset.reset", "earliest")
        conf["enable.auto.commit"] = False
        conf["enable.auto.offset.store"] = False
        conf["enable.partition.eof"] = True
        self._consumer = Consumer(with_logger(conf))
        fmt_name = opts.value_format.value
        self._format = create_format(fmt_name, None, dict(opts.format_options))
        self._resolver = SchemaResolver(opts.properties, timeout_s=self._timeout_s)
        try:
            require_broker(self._consumer, conf, self._timeout_s)  # unreachable: reported within ~10 s
            self._assign(dict(start_offsets or {}))
        except KafkaException as exc:
            self.close()
            unavailable = unavailable_error(exc, conf, self._timeout_s)
            if unavailable is not None:
                raise unavailable from exc
            raise SourceError(f"cannot open Kafka source on {self._topic_text()}: {exc}") from exc
        except (SourceError, KafkaUnavailableError):
            self.close()
            raise

    def open_group(self, start_offsets: Callable[[list[TopicPartitionKey]], Mapping[TopicPartitionKey, int]]) -> None:
        """Connect and join the consumer group ``group_id`` (``subscribe``): Kafka's group
        coordinator spreads the partitions over the members and moves them when a member joins,
        leaves or dies (the broker's ``group.consumer.session.timeout.ms``,
        ``max.poll.interval.ms``). Kafka's consumer rebalance protocol (KIP-848, ``group.protocol:
        consumer``, Kafka 4.x brokers) unless the properties set ``group.protocol: classic`` or one
        of the classic client-side options (``session.timeout.ms``, ``heartbeat.interval.ms``,
        ``partition.assignment.strategy``; classic then defaults to 10 s / 1 s /
        ``cooperative-sticky``). Used by parallel Pipeline 2 workers
        (:mod:`changelake.pipeline.scale_out`).

        Args:
            start_offsets: called in the rebalance callback with the newly assigned partitions;
                returns ``{(topic, partition): next offset}`` (read fresh from the caller's store,
                e.g. the lake checkpoint). Partitions it leaves out start at the earliest offset.

        Until the first assignment :meth:`caught_up` is False; revoked partitions are forgotten
        (records already polled from them stay the caller's to commit or drop).

        Raises:
            KafkaUnavailableError, SourceError: as :meth:`open`.
        """
        if self._consumer is not None:
            return
        opts = self.options
        conf: dict[str, Any] = reader_config(opts.properties)
        conf.setdefault("group.id", self.group_id)
        conf.setdefault("isolation.level", "read_committed")
        conf.setdefault("auto.offset.reset", "earliest")
        # Kafka's consumer rebalance protocol (KIP-848) by default: the broker computes the assignment
        # and moves only the partitions that change owner (the others keep running). Under
        # the classic protocol with client-side cooperative-sticky, two static members joining at
        # once could leave partitions assigned to no one (seen with librdkafka 2.16), and the workers
        # never catch up. The classic protocol stays available: ``properties.group.protocol:
        # classic``, or any of its client-side options (librdkafka refuses those under ``consumer``).
        # A stable ``group.instance.id`` (static membership, set per worker by the runner) lets a
        # restarted worker take its partitions back without a rebalance.
        classic_only = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")
        conf.setdefault("group.protocol", "classic" if any(k in conf for k in classic_only) else "consumer")
        if str(conf["group.protocol"]).lower() == "classic":
            conf.setdefault("session.timeout.ms", 10000)
            conf.setdefault("heartbeat.interval.ms", 1000)
            # Sticky round-robin over all partitions of all topics, incrementally (the range assignor
            # would give partition 0 of every topic to one member; the eager ones stop every member).
            conf.setdefault("partition.assignment.strategy", "cooperative-sticky")
        conf["enable.auto.commit"] = False
        conf["enable.auto.offset.store"] = False
        conf["enable.partition.eof"] = True
        self._format = create_format(opts.value_format.value, None, dict(opts.format_options))
        self._resolver = SchemaResolver(opts.properties, timeout_s=self._timeout_s)
        self._group_assigned = False
        self._in_group = True

        def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            # Incremental: ``partitions`` are the ones added to this member's assignment.
            tps = [(str(p.topic), int(p.partition)) for p in partitions]
            offsets = start_offsets(tps) if tps else {}
            assignment = []
            for tp, (low, high) in partition_watermarks(consumer, tps, self._timeout_s).items():
                off = max(low, min(int(offsets.get(tp, low)), high))
                self._pos[tp], self._end[tp] = off, high
                assignment.append(TopicPartition(tp[0], tp[1], off))
            consumer.incremental_assign(assignment)
            self._assigned = [tp for tp in self._assigned if tp not in tps] + tps
            self._paused.difference_update(tps)
            self._group_assigned = True
            self._unreleased_since = None
            log.info("group %s: assigned %s", self.group_id, {f"{t}/{p}": self._pos[(t, p)] for t, p in tps})

        def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            revoked = [(str(p.topic), int(p.partition)) for p in partitions]
            for tp in revoked:
                self._pos.pop(tp, None)
                self._end.pop(tp, None)
                self._paused.discard(tp)
            self._assigned = [tp for tp in self._assigned if tp not in revoked]
            if revoked:
                consumer.incremental_unassign(partitions)
            log.info("group %s: revoked %s", self.group_id, [f"{t}/{p}" for t, p in revoked])

        topics: list[str] = (
            ["^" + opts.topic_pattern.pattern] if opts.topic_pattern is not None else list(opts.topics)
        )

        def join() -> Consumer:
            consumer = Consumer(with_logger(conf))
            consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
            return consumer

        self._join = join
        self._rejoin_at = self._unreleased_since = None
        try:
            self._consumer = join()
            # Whatever stops the run at caught_up (``scan.bounded.mode: latest-offset``, or the
            # runner's ``until_caught_up``, which reads unbounded): it stops only once the whole
            # subscription is absorbed (see caught_up).
            self._stored = start_offsets
            self._run_ends = self._subscription_ends()
        except KafkaException as exc:
            self.close()
            raise SourceError(f"cannot subscribe to {self._topic_text()}: {exc}") from exc
        except SourceError:
            self.close()
            raise

    def close(self) -> None:
        """Close the consumer (idempotent). Group offsets are not committed here."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
        if self.dead_letter is not None:
            self.dead_letter.close()

    def __enter__(self) -> "KafkaPipelineSource":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require(self) -> Consumer:
        if self._consumer is None:
            raise SourceError("the Kafka pipeline source is not open; call open() first")
        return self._consumer

    def _topic_text(self) -> str:
        if self.options.topic_pattern is not None:
            return f"topic-pattern {self.options.topic_pattern.pattern!r}"
        return f"topic(s) {list(self.options.topics)}"

    def _resolve_topics(self) -> dict[str, list[int]]:
        consumer = self._require()
        meta = consumer.list_topics(timeout=self._timeout_s)
        if self.options.topic_pattern is not None:
            names = sorted(t for t in meta.topics if self.options.topic_pattern.fullmatch(t))
        else:
            names = list(self.options.topics)
        out: dict[str, list[int]] = {}
        for name in names:
            tmeta = meta.topics.get(name)
            if tmeta is None or tmeta.error is not None or not tmeta.partitions:
                raise SourceError(f"topic {name!r} does not exist or has no partitions")
            out[name] = sorted(tmeta.partitions)
        if not out:
            raise SourceError(f"no topic matches {self._topic_text()}")
        return out

    def _assign(self, start_offsets: dict[TopicPartitionKey, int]) -> None:
        consumer = self._require()
        opts = self.options
        topics = self._resolve_topics()
        tps = [(t, p) for t, parts in topics.items() for p in parts]
        watermarks = partition_watermarks(consumer, tps, self._timeout_s)
        committed: dict[TopicPartitionKey, int] = {}
        if opts.startup_mode is StartupMode.GROUP_OFFSETS:
            for c in consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=self._timeout_s):
                if c.offset >= 0:
                    committed[(c.topic, c.partition)] = c.offset
        by_time: dict[TopicPartitionKey, int] = {}
        if opts.startup_mode is StartupMode.TIMESTAMP:
            query = [TopicPartition(t, p, int(opts.startup_timestamp_ms or 0)) for t, p in tps]
            for r in consumer.offsets_for_times(query, timeout=self._timeout_s):
                by_time[(r.topic, r.partition)] = r.offset
        assignment = []
        for tp in tps:
            low, high = watermarks[tp]
            if tp in start_offsets:
                off = start_offsets[tp]
            elif opts.startup_mode is StartupMode.LATEST_OFFSET:
                off = high
            elif opts.startup_mode is StartupMode.GROUP_OFFSETS:
                off = committed.get(tp, low if conf_reset(opts.properties) == "earliest" else high)
            elif opts.startup_mode is StartupMode.SPECIFIC_OFFSETS:
                off = opts.specific_offsets.get(tp, low)
            elif opts.startup_mode is StartupMode.TIMESTAMP:
                off = by_time.get(tp, high)
                off = high if off < 0 else off
            else:
                off = low
            off = max(low, min(off, high)) if off >= 0 else low
            self._pos[tp] = off
            self._end[tp] = high
            assignment.append(TopicPartition(tp[0], tp[1], off))
        consumer.assign(assignment)
        self._assigned = tps
        self._paused.clear()

    def refresh(self) -> None:
        """Take a new snapshot of the end offsets, resume partitions paused at the old end, and
        assign partitions and (``topic-pattern``) topics created since open; new partitions start at
        their earliest offset, as Flink's partition discovery does.

        Raises:
            SourceError: Kafka cannot be reached or a topic disappeared.
        """
        consumer = self._require()
        try:
            # In a consumer group (open_group) the coordinator assigns new topics and partitions.
            topics = {} if self._in_group else self._resolve_topics()
            new = [(t, p) for t, parts in topics.items() for p in parts if (t, p) not in self._end]
            if new:
                added = []
                for tp, (low, _high) in partition_watermarks(consumer, new, self._timeout_s).items():
                    self._pos[tp] = low
                    added.append(TopicPartition(tp[0], tp[1], low))
                consumer.incremental_assign(added)
                self._assigned.extend(new)
                log.info("assigned new partitions %s", new)
            self._end.update(partition_end_offsets(consumer, self._assigned, self._timeout_s))
        except KafkaException as exc:
            raise SourceError(f"cannot refresh Kafka source on {self._topic_text()}: {exc}") from exc
        if self._paused:
            consumer.resume([TopicPartition(t, p) for t, p in self._paused])
            self._paused.clear()

    # -- reading ---------------------------------------------------------------------------------
    def assignment(self) -> list[TopicPartitionKey]:
        """The assigned (topic, partition) pairs."""
        return list(self._assigned)

    def end_offsets(self) -> dict[TopicPartitionKey, int]:
        """End offsets snapshotted at open/refresh (next offset after the last record)."""
        return dict(self._end)

    def positions(self) -> dict[TopicPartitionKey, int]:
        """Next offset to read per partition."""
        return dict(self._pos)

    def _subscription_ends(self) -> dict[TopicPartitionKey, tuple[int, int]]:
        """(low, high) watermarks of every partition of the subscribed topics (or of the topics
        ``topic-pattern`` matches), now: where a bounded group run ends."""
        consumer = self._require()
        tps = [(topic, int(partition)) for topic, partitions in self._resolve_topics().items() for partition in partitions]
        return partition_watermarks(consumer, tps, self._timeout_s)

    def caught_up(self) -> bool:
        """True when every assigned partition has reached the end offset snapshotted at open/refresh
        (in a group, :meth:`open_group`: at assignment; never before the first assignment).

        In a group (:meth:`open_group`; a ``scan.bounded.mode: latest-offset`` run, or a run stopped
        at ``caught_up`` by its caller, e.g. ``run_pipeline(until_caught_up=True)`` of a parallel
        worker) a member is caught up only when the whole subscription is: every partition not assigned to this member
        now must also have reached, in the caller's store (``start_offsets`` of
        :meth:`open_group`, read fresh), the end it had when this member joined. Otherwise a
        member whose first assignment is empty, or whose partitions a rebalance moved away, would
        stop while those partitions are still unread by anyone.
        """
        if not self._group_assigned:
            return False
        if not all(self._pos.get(tp, 0) >= end for tp, end in self._end.items()):
            return False
        others = [tp for tp in self._run_ends if tp not in self._end]
        if not others or self._stored is None:
            return True
        stored = self._stored(others)
        waiting: dict[TopicPartitionKey, tuple[int, int]] = {}  # (stored offset, end) of each one short
        for tp in others:
            low, end = self._run_ends[tp]
            at = max(int(stored.get(tp, low)), low)
            if at < end:
                waiting[tp] = (at, end)
        if waiting and time.monotonic() >= self._waiting_logged + WAITING_LOG_S:
            self._waiting_logged = time.monotonic()
            log.info("group %s: own partitions read; waiting for %d partition(s) of other members to reach the "
                     "store: %s", self.group_id, len(waiting),
                     ", ".join(f"{t}/{p} at {at} of {end}" for (t, p), (at, end) in sorted(waiting.items())))
        return not waiting

    def poll(self, max_records: int = 500, timeout_s: float = 1.0) -> list[SourceRecord]:
        """Up to ``max_records`` decoded records, waiting at most ``timeout_s`` seconds.

        With ``scan.bounded.mode: latest-offset`` records at or beyond the end offsets are not
        returned (the partition is paused there).

        Raises:
            DecodeError: a corrupt record (with topic, partition and offset), unless
                ``<format>.ignore-parse-errors`` (then it is counted in ``parse_errors`` and skipped).
            SourceError: a consumer error (e.g. the topic was deleted).
        """
        return [self._decode(msg) for msg in self._consume(max_records, timeout_s)]

    def poll_groups(self, max_records: int = 500, timeout_s: float = 1.0) -> list["SourceRecord | RecordGroup"]:
        """As :meth:`poll`, but the records that can be decoded in one columnar call come as
        :class:`RecordGroup` items: consecutive records of one partition (in offset order) whose
        headers name one schema (Pipeline 1's ``changelake.schema.id``), of the ``debezium-json``
        format, decoded with :func:`~changelake.formats.debezium_json.decode_columns`. Every other
        record, and every record of a group that columnar decode refuses (a corrupt one, a
        truncate, a value that does not parse), is decoded one by one exactly as :meth:`poll`
        does: a bad one is raised or skipped and dead-lettered naming topic, partition, offset.

        The items come partition by partition, each partition's in offset order.

        One pass over the consumed records does what :meth:`_consume` does (errors, end of
        partition, the bounded end) and the grouping: per record only ``error()``, ``topic()``,
        ``partition()``, ``offset()``, ``headers()`` (compared with the previous record's list,
        the schema header read only when they differ) and ``value()``; a poll that is one run
        (one partition, one schema, no error) is taken in one list pass per accessor (:meth:`_one_run`).

        Raises:
            DecodeError, SourceError: as :meth:`poll`.
        """
        if self.options.value_format is not ValueFormat.DEBEZIUM_JSON:
            return [self._decode(msg) for msg in self._consume(max_records, timeout_s)]
        bounded = self.options.bounded_mode is BoundedMode.LATEST_OFFSET
        if bounded and self.caught_up():
            return []
        if self._rejoin_at is not None and not self._rejoin_group(timeout_s):
            return []
        consumer = self._require()
        msgs = consumer.consume(num_messages=max_records, timeout=timeout_s)
        single = self._one_run(msgs, bounded)
        if single is not None:
            return single
        # per partition (first-seen order): its runs, each [schema key, records, values, offsets]
        parts: dict[TopicPartitionKey, list[list[Any]]] = {}
        last: dict[TopicPartitionKey, int] = {}  # the last offset taken per partition
        runs: list[list[Any]] = []
        run: list[Any] = [None, [], [], []]
        seen_topic: Any = None
        seen_partition: Any = None
        tp: TopicPartitionKey = ("", 0)
        end = 0
        seen_headers: Any = None  # the last headers read, and their key: a run repeats them
        seen_key: str | None = None
        for msg in msgs:
            err = msg.error()
            topic, partition = msg.topic(), msg.partition()
            if partition != seen_partition or topic != seen_topic:  # a new run of one partition
                if seen_topic is not None and run[1]:
                    runs.append(run)
                seen_topic, seen_partition = topic, partition
                tp = (str(topic), int(partition or 0))
                end = self._end.get(tp, 0) if bounded else 0
                runs = parts.setdefault(tp, [])
                # back to a partition seen earlier in this poll: its last run goes on
                run = runs.pop() if runs else [None, [], [], []]
            offset: int = msg.offset() or 0  # (None only for a message that is no record)
            if err is not None or (bounded and offset >= end):
                if self._not_a_record(consumer, msg, err, tp, offset):
                    continue
                break
            last[tp] = offset
            headers = msg.headers()
            value = msg.value()
            if not headers or not value:
                key = None
            elif headers == seen_headers:
                key = seen_key
            else:
                key = seen_key = self._headers_key(headers)
                seen_headers = headers
            if key != run[0] and run[1]:
                runs.append(run)
                run = [key, [], [], []]
            run[0] = key
            run[1].append(msg)
            run[2].append(value)
            run[3].append(offset)
        if seen_topic is not None and run[1]:
            runs.append(run)
        for at, offset in last.items():  # (an end-of-partition event may have moved it past a marker)
            self._pos[at] = max(self._pos.get(at, 0), offset + 1)
        out: list[SourceRecord | RecordGroup] = []
        for at, part_runs in parts.items():
            for key, records, values, offsets in part_runs:
                out.extend(self._group_or_records(at, key, records, values, offsets))
        return out

    def _one_run(self, msgs: list[Any], bounded: bool) -> list["SourceRecord | RecordGroup"] | None:
        """:meth:`poll_groups`'s items when the consumed records are one run (the common poll):
        no error or end-of-partition event, one partition, every record below the bounded end,
        with a value and the same headers (one schema). The same items as the general pass
        would give, with each per-record accessor called once per record in one list pass
        instead of the general pass's per-record branches; None when the records are not one run
        (then the general pass sorts them out)."""
        n = len(msgs)
        if n < MIN_GROUP:
            return None
        if any(m.error() is not None for m in msgs):  # (a KafkaError cannot be compared with None)
            return None
        partitions = [m.partition() for m in msgs]
        topics = [m.topic() for m in msgs]
        if partitions.count(partitions[0]) != n or topics.count(topics[0]) != n:
            return None
        tp: TopicPartitionKey = (str(topics[0]), int(partitions[0] or 0))
        offsets: list[int] = [m.offset() or 0 for m in msgs]
        if bounded and offsets[-1] >= self._end.get(tp, 0):  # (offsets ascend within a partition)
            return None
        values = [m.value() for m in msgs]
        if not all(values):
            return None
        headers = [m.headers() for m in msgs]
        first = headers[0]
        if not first or headers.count(first) != n:
            return None
        self._pos[tp] = max(self._pos.get(tp, 0), offsets[-1] + 1)
        return self._group_or_records(tp, self._headers_key(first), msgs, values, offsets)

    @staticmethod
    def _headers_key(headers: Any) -> str | None:
        """The schema fingerprint a record with a value and these headers can be grouped by, None
        when it must be decoded alone (no schema header, a side record)."""
        if side_record_kind(headers) is not None:
            return None
        ref = schema_header(headers)
        return None if ref is None else f"{ref[0]}\x00{ref[1]}"

    def _group_or_records(self, tp: TopicPartitionKey, key: str | None, msgs: list[Any], values: list[bytes],
                          offsets: list[int]) -> list["SourceRecord | RecordGroup"]:
        """The records ``msgs`` of partition ``tp`` (their ``values`` and ``offsets``, in order),
        whose headers all give the schema ``key``: one :class:`RecordGroup`, or, where columnar
        decode refuses, records decoded one by one (see :meth:`poll_groups`)."""
        if key is None or len(msgs) < MIN_GROUP:
            return [self._decode(msg) for msg in msgs]
        headers = list(msgs[0].headers() or [])
        try:
            fmt, schema = self._format_for(headers)
        except SourceError:
            fmt = schema = None  # the schema cannot be found: each record says so
        changes = decode_columns(fmt, values) if schema is not None else None
        if changes is None or schema is None:
            if schema is None or len(msgs) < 2 * MIN_GROUP:
                return [self._decode(msg) for msg in msgs]
            # something in the group needs the per-record decoder (a corrupt record, a truncate):
            # halve it, so only the few records around that one are decoded one by one
            half = len(msgs) // 2
            return (self._group_or_records(tp, key, msgs[:half], values[:half], offsets[:half])
                    + self._group_or_records(tp, key, msgs[half:], values[half:], offsets[half:]))
        if self.options.distributed_tables:
            db, name = changes.table
            table = TableId(db, name)
        else:
            table = TableId.parse(tp[0])
        return [RecordGroup(tp[0], tp[1], offsets, table, schema, changes, msgs, self)]

    def _consume(self, max_records: int, timeout_s: float) -> list[Any]:
        """The next records (not yet decoded), moving the positions past them."""
        bounded = self.options.bounded_mode is BoundedMode.LATEST_OFFSET
        if bounded and self.caught_up():
            return []
        if self._rejoin_at is not None and not self._rejoin_group(timeout_s):
            return []
        consumer = self._require()
        out: list[Any] = []
        msgs = consumer.consume(num_messages=max_records, timeout=timeout_s)
        # records come in runs of one partition: its key and end offset are looked up once a run
        seen: tuple[Any, Any] | None = None
        tp: TopicPartitionKey = ("", 0)
        end = 0
        for msg in msgs:
            err = msg.error()
            at = (msg.topic(), msg.partition())
            if at != seen:
                seen = at
                tp = (str(at[0]), int(at[1] or 0))
                end = self._end.get(tp, 0) if bounded else 0
            offset = int(msg.offset() or 0)
            if err is not None or (bounded and offset >= end):
                if self._not_a_record(consumer, msg, err, tp, offset):
                    continue
                break
            self._pos[tp] = offset + 1
            out.append(msg)
        return out

    def _not_a_record(self, consumer: Consumer, msg: Any, err: KafkaError | None, tp: TopicPartitionKey,
                      offset: int) -> bool:
        """A consumed message that is not a record to return (``err``, or at or past the bounded
        end of ``tp``), as :meth:`_consume` and :meth:`poll_groups` take it: True to go on with
        the poll (an end-of-partition event moves the position to ``offset``; a record past the
        end pauses its partition), False to end it (KIP-848's UNRELEASED_INSTANCE_ID: the group is
        joined again, :meth:`_rejoin_if_unreleased`).

        Raises:
            SourceError: any other consumer error (names topic, partition and offset, or for an
                error of the consumer itself its topics: :func:`~changelake.connectors.kafka_common.consumer_error`).
        """
        if err is None:
            if tp not in self._paused:
                consumer.pause([TopicPartition(*tp)])
                self._paused.add(tp)
            return True
        if err.code() == KafkaError._PARTITION_EOF:
            self._pos[tp] = max(self._pos.get(tp, 0), offset)
            return True
        if self._rejoin_if_unreleased(err):
            return False
        raise consumer_error(err, msg.topic(), tp[1], offset, self._topic_text())

    def _rejoin_if_unreleased(self, err: KafkaError) -> bool:
        """True when ``err`` is KIP-848's UNRELEASED_INSTANCE_ID: the broker still has a member for
        our static ``group.instance.id`` (the killed or paused worker this one replaces; it is
        expired after the broker's ``group.consumer.session.timeout.ms``). Then the group's state is
        forgotten and the group joined again in a second (:meth:`_rejoin_group`), for up to
        :data:`UNRELEASED_INSTANCE_WAIT_S` (the classic protocol's static member would fence the
        old one instead).

        Raises:
            SourceError: still refused after :data:`UNRELEASED_INSTANCE_WAIT_S` (two live workers
                with one id?), naming the group and the id.
        """
        if not self._in_group or err.code() != KafkaError._FATAL or _UNRELEASED_INSTANCE_ID not in err.str():
            return False
        now = time.monotonic()
        since = self._unreleased_since = now if self._unreleased_since is None else self._unreleased_since
        instance = self.options.properties.get("group.instance.id")
        if now - since > UNRELEASED_INSTANCE_WAIT_S:
            raise SourceError(f"consumer group {self.group_id!r}: group.instance.id {instance!r} is still used by "
                              f"another member after {UNRELEASED_INSTANCE_WAIT_S:.0f} s (two workers with one id?): "
                              f"{err.str()}")
        log.log(logging.WARNING if since == now else logging.DEBUG,
                "group %s: group.instance.id %r is still held by a member the broker has not expired yet "
                "(the worker this one replaces?); joining again every second", self.group_id, instance)
        self._pos.clear()
        self._end.clear()
        self._assigned = []
        self._paused.clear()
        self._group_assigned = False
        self._rejoin_at = now + 1.0
        return True

    def _rejoin_group(self, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``) for :attr:`_rejoin_at`, then replace the failed consumer by
        a new member of the group; True once joined again.

        Raises:
            SourceError: the new member could not subscribe (names the group and the topics).
        """
        assert self._rejoin_at is not None and self._join is not None
        wait = self._rejoin_at - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, timeout_s))
            if wait > timeout_s:
                return False
        failed, self._consumer = self._consumer, None
        if failed is not None:
            try:
                failed.close()
            except KafkaException:
                pass  # the failed member's close has nothing left to tell the group
        try:
            self._consumer = self._join()
        except KafkaException as exc:
            raise SourceError(f"cannot join consumer group {self.group_id!r} again on {self._topic_text()}: {exc}") from exc
        self._rejoin_at = None
        return True

    def _decode(self, msg: Any) -> SourceRecord:
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        ts_type, ts = msg.timestamp()
        key, value = msg.key(), msg.value()
        headers = list(msg.headers() or [])
        try:
            # Debezium's transaction metadata / heartbeat records (changelake's side topics, should
            # a topic-pattern select them) hold no change event
            events = [] if side_record_kind(headers) is not None else self._events(topic, key, value, headers)
        except DecodeError as exc:
            exc.at(topic=topic, partition=partition, offset=offset)
            if not self.options.ignore_parse_errors:
                raise
            events = []
            self._skip(topic, partition, offset, key, value, headers, exc, None)
        pos = {"topic": topic, "partition": partition, "offset": offset + 1}
        events = [DataChangeEvent(e.table, e.op, e.before, e.after, e.schema, e.ts_ms, pos) if e.op is not Op.TRUNCATE
                  else self._truncate(e, pos, headers) for e in events]
        return SourceRecord(topic, partition, offset, events, key, ts if ts_type != 0 else None, headers, value)

    @staticmethod
    def _truncate(event: DataChangeEvent, pos: dict[str, Any], headers: list[tuple[str, bytes]]) -> DataChangeEvent:
        """A truncate with its position, the share of the table it covers and whether it stands
        for a DROP TABLE (:mod:`.truncate_scope`)."""
        scope = scope_of(headers, str(event.table), event.schema, int(pos["partition"]))
        return replace(event, position=pos if scope is None else {**pos, "truncate.scope": scope},
                       schema_change=schema_change_of(headers) or event.schema_change)

    def reject(self, record: SourceRecord, error: BaseException, table: str | None = None) -> None:
        """Skip a record whose change cannot be applied (the caller found it bad after decoding).

        With ``<format>.ignore-parse-errors`` it is counted in ``parse_errors`` and copied to
        ``dead-letter.topic`` if set; otherwise ``error`` is re-raised as a :class:`RecordError`
        naming topic, partition, offset and table (chained).

        Raises:
            RecordError: ``<format>.ignore-parse-errors`` is off.
            SinkFlushError, TopicCreationError: the dead-letter copy failed.
        """
        if not self.options.ignore_parse_errors:
            raise RecordError(str(error), topic=record.topic, partition=record.partition, offset=record.offset,
                              table=table) from error
        self._skip(record.topic, record.partition, record.offset, record.key, record.value, record.headers,
                   error, table)

    def _skip(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
              headers: list[tuple[str, bytes]], error: BaseException, table: str | None) -> None:
        self.parse_errors += 1
        if self.dead_letter is not None:
            self.dead_letter.send(topic=topic, partition=partition, offset=offset, key=key, value=value,
                                  headers=headers, error=error, table=table)
        else:
            log.warning("skipping bad record (no dead-letter.topic): %s", error)

    def flush_dead_letters(self) -> None:
        """Wait until the dead-letter copies are acknowledged (call before committing offsets past
        them). Raises SinkFlushError."""
        if self.dead_letter is not None:
            self.dead_letter.flush()

    @property
    def dead_letters(self) -> int:
        """Records copied to ``dead-letter.topic`` so far."""
        return self.dead_letter.sent if self.dead_letter is not None else 0

    def _format_for(self, headers: list[tuple[str, bytes]]) -> tuple[Any, Schema | None]:
        """The value format to decode a record with, and the schema its headers name (or None)."""
        ref = schema_header(headers)
        if ref is None or self._resolver is None:
            return self._format, None
        schema_topic, fingerprint = ref
        _, schema = self._resolver.resolve(schema_topic, fingerprint)
        fmt = self._typed_formats.get(fingerprint)
        if fmt is None:
            fmt = create_format(self.options.value_format.value, schema, dict(self.options.format_options))
            if len(self._typed_formats) > 10_000:
                self._typed_formats.clear()
            self._typed_formats[fingerprint] = fmt
        return fmt, schema

    def _events(self, topic: str, key: bytes | None, value: bytes | None,
                headers: list[tuple[str, bytes]] | None = None) -> list[DataChangeEvent]:
        opts = self.options
        topic_table = TableId.parse(topic)
        try:
            fmt, schema = self._format_for(headers or [])
        except SourceError as exc:  # the schema the record names cannot be found: it cannot be typed
            raise DecodeError(str(exc), format=opts.value_format.value, field="headers") from exc
        if opts.value_format is ValueFormat.JSON:
            key_obj = self._key_object(key) if key else None
            table = topic_table
            if opts.distributed_tables and key_obj and isinstance(key_obj.get("TableId"), str):
                table = TableId.parse(key_obj["TableId"])
            if value is None:
                if not key_obj:
                    return []
                before = {k: v for k, v in key_obj.items() if k != "TableId"}
                return [DataChangeEvent(table, Op.DELETE, before, None, schema)]
            rows = fmt.decode(value)
            return [DataChangeEvent(table, Op.CREATE, None, dict(r.values), schema) for r in rows]
        if value is None:
            return []  # tombstone in a changelog topic: nothing to apply (as Flink's debezium-json)
        events = fmt.decode_events(value)
        if not opts.distributed_tables:
            events = [e if e.table == topic_table else replace(e, table=topic_table) for e in events]
        return list(events)

    def _key_object(self, key: bytes) -> dict[str, Any] | None:
        try:
            obj = json.loads(key.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise DecodeError(f"key is not JSON: {exc}", format="json", field="key", excerpt=key) from exc
        return obj if isinstance(obj, dict) else None

    # -- offsets ---------------------------------------------------------------------------------
    def commit_advisory(self, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Commit ``{(topic, partition): next offset}`` to the consumer group (only for lag watching;
        the caller's own store is the source of truth).

        A commit refused because the group is rebalancing (a worker joined, left or died:
        ``ILLEGAL_GENERATION``, ``UNKNOWN_MEMBER_ID``, ``REBALANCE_IN_PROGRESS``) is skipped with a
        warning: the next commit after the rebalance carries the offsets. Raises SourceError on any
        other failure."""
        consumer = self._require()
        if not offsets:
            return
        try:
            consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
            if code in _REBALANCE_CODES:
                log.warning("group %r is rebalancing; advisory offset commit skipped: %s", self.group_id, exc)
                return
            raise SourceError(f"cannot commit group offsets for group {self.group_id!r}: {exc}") from exc

    def lag(self) -> dict[TopicPartitionKey, int]:
        """Records behind the current end per partition: live high watermark minus next offset."""
        consumer = self._require()
        try:
            return partition_lag(self._pos, partition_end_offsets(consumer, self._assigned, self._timeout_s))
        except KafkaException as exc:
            raise SourceError(f"cannot read end offsets of {self._topic_text()}: {exc}") from exc


def conf_reset(properties: Mapping[str, str]) -> str:
    """``auto.offset.reset`` for group-offsets without a committed offset (earliest by default)."""
    value = properties.get("auto.offset.reset", "earliest").lower()
    return "earliest" if value in ("earliest", "smallest", "beginning") else "latest"


# -- PartitionedSource: this source through the runner's one-position contract ---------------------
# A partitioned source (``kafka``) seen through the one-position source contract.
#
# :class:`KafkaPipelineSource` polls records with per-partition offsets; :class:`PartitionedSource` gives the runner what every source gives: ``poll`` returns
# change events (each with its record's ``{"topic", "partition", "offset"}`` position), ``position``
# is the next offset per ``topic/partition`` (``{"orders/0": 42}``; it also steps over transaction
# markers), ``caught_up``, ``close``. On top: ``reject`` (a record the stage found bad),
# ``notify_committed`` (advisory group-offset commit once the lake holds a position, for lag
# watching), partition discovery every ``scan.topic-partition-discovery.interval`` in unbounded
# runs, and the schema-less bookkeeping (``schema.inference.strategy``).


class PartitionedSource(PartitionedChangelogSource, RejectsRecords, ReportsBadRecords, EmitsChangeBatches):
    """Adapts a ``KafkaPipelineSource`` to the runner's source contract, with the optional
    abilities it declares (:mod:`changelake.connectors.base`).

    Args:
        source: an unopened ``KafkaPipelineSource`` (from the registry's ``kafka`` factory).
        start: the stored checkpoint, ``{"topic/partition": next offset}``; partitions not in it
            start as ``scan.startup.mode`` says.
        group_start: for a parallel worker: join the consumer group and start each assigned
            partition at the checkpoint this returns at assignment (then ``start`` is ignored);
            the position then covers the currently assigned partitions only, each from where
            its assignment started (a partition handed away and back starts afresh).
        discover: re-list topics and partitions every ``scan.topic-partition-discovery.interval``
            (unbounded runs; a bounded run stops at the ends seen at open).
    """

    #: The position is a map of per-partition offsets (see the module docstring).
    partitioned = True

    def __init__(self, source: Any, *, start: Mapping[str, int] | None = None,
                 group_start: Callable[[], Mapping[str, int]] | None = None, discover: bool = False) -> None:
        self.source = source
        #: the wrapped source's row kinds (:attr:`KafkaPipelineSource.changelog_mode`)
        self.changelog_mode: frozenset[RowKind] = frozenset(source.changelog_mode)
        self._start = dict(start or {})
        self._group_start = group_start
        self._position: dict[str, int] = {} if group_start else dict(self._start)
        self._records: dict[int, Any] = {}  # id(position object) -> record, for reject()
        self._static: dict[TableId, Schema] = {}
        self._discovery_s = source.options.discovery_interval.total_seconds() if discover else 0.0
        self._last_discovery = time.monotonic()
        #: source tables whose records carry no schema (types inferred), in first-seen order
        self.inferred_tables: list[str] = []
        #: Kafka records returned by the last poll (rejected and empty ones included)
        self.last_records = 0
        #: the source decodes groups of records in Arrow (:meth:`poll_batches`)
        self.change_batches = callable(getattr(source, "poll_groups", None))

    def open(self) -> None:
        """Assign and seek (or join the group). Raises KafkaUnavailableError, SourceError."""
        if self._group_start is not None:
            group_start = self._group_start

            def start_assigned(tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
                for topic, partition in tps:  # polled before a revoke: not this assignment's
                    self._position.pop(topic_partition(topic, partition), None)
                return {split_topic_partition(k): v for k, v in group_start().items()}

            self.source.open_group(start_assigned)
        else:
            self.source.open(start_offsets={split_topic_partition(k): v for k, v in self._start.items()} or None)

    def poll(self, max_events: int = 5000, timeout_s: float = 0.5) -> list[DataChangeEvent]:
        """The change events of up to ``max_events`` records. Raises DecodeError, SourceError."""
        if self._discovery_s > 0 and time.monotonic() - self._last_discovery >= self._discovery_s:
            self.source.refresh()
            self._last_discovery = time.monotonic()
        records = self.source.poll(max_records=max_events, timeout_s=timeout_s)
        self.last_records = len(records)
        self._records.clear()
        static = self.source.options.inference_strategy.value == "static"
        events: list[DataChangeEvent] = []
        for record in records:
            tp = topic_partition(record.topic, record.partition)
            self._position[tp] = max(self._position.get(tp, 0), record.offset + 1)
            if record.events:
                self._records[id(record.events[0].position)] = record
                events.extend(note_inferred(list(record.events), self.inferred_tables, self._static, static))
        return events

    def poll_batches(self, max_events: int = 5000, timeout_s: float = 0.5) -> list[ChangeBatch | list[DataChangeEvent]]:
        """As :meth:`poll`, with the records the source decodes in Arrow as :class:`ChangeBatch`
        items (:meth:`~changelake.connectors.kafka.source.KafkaPipelineSource.poll_groups`), in
        order per partition; the other records' events come as lists. A batch's ``fallback``
        gives its records' events decoded one by one (registered for :meth:`reject`).
        Raises DecodeError, SourceError."""
        if self._discovery_s > 0 and time.monotonic() - self._last_discovery >= self._discovery_s:
            self.source.refresh()
            self._last_discovery = time.monotonic()
        items = self.source.poll_groups(max_records=max_events, timeout_s=timeout_s)
        self._records.clear()
        static = self.source.options.inference_strategy.value == "static"
        out: list[ChangeBatch | list[DataChangeEvent]] = []
        records = 0
        for item in items:
            if hasattr(item, "changes"):  # a RecordGroup
                tp = topic_partition(item.topic, item.partition)
                self._position[tp] = max(self._position.get(tp, 0), item.offsets[-1] + 1)
                records += len(item.offsets)
                out.append(self._batch(item, static))
                continue
            records += 1
            tp = topic_partition(item.topic, item.partition)
            self._position[tp] = max(self._position.get(tp, 0), item.offset + 1)
            if item.events:
                self._records[id(item.events[0].position)] = item
                events = note_inferred(list(item.events), self.inferred_tables, self._static, static)
                if out and isinstance(out[-1], list):
                    out[-1].extend(events)
                else:
                    out.append(events)
        self.last_records = records
        return out

    def _batch(self, group: Any, static: bool) -> ChangeBatch:
        import pyarrow as pa

        def fallback() -> list[DataChangeEvent]:
            events: list[DataChangeEvent] = []
            for record in group.records():
                if record.events:
                    self._records[id(record.events[0].position)] = record
                    events.extend(note_inferred(list(record.events), self.inferred_tables, self._static, static))
            return events

        changes = group.changes
        offsets = pa.array(group.offsets, pa.int64())
        if len(changes.message) != len(offsets):  # an update's two rows share its record's offset
            offsets = offsets.take(changes.message)
        return ChangeBatch(group.table, group.schema, changes.rows, changes.kinds, offsets, group.topic,
                           group.partition, len(group.offsets), group.offsets[-1], fallback, dict(changes.ops))

    @property
    def position(self) -> dict[str, int]:
        """Next offset per ``topic/partition`` after everything returned (dead-letter copies of
        rejected records are acknowledged first, so no position moves past an unsent copy)."""
        self.source.flush_dead_letters()
        assigned = self.source.positions()
        for (topic, partition), pos in assigned.items():
            tp = topic_partition(topic, partition)
            self._position[tp] = max(self._position.get(tp, 0), pos)
        if self._group_start is not None:  # a worker: only what the group assigns it now
            return {tp: off for tp, off in self._position.items() if split_topic_partition(tp) in assigned}
        return dict(self._position)

    def caught_up(self) -> bool:
        """Every assigned partition reached the end offset seen at open/refresh."""
        return bool(self.source.caught_up())

    def reject(self, event: DataChangeEvent, error: BaseException, table: str) -> None:
        """Skip the record ``event`` came from (``<format>.ignore-parse-errors``, dead-letter copy),
        or raise RecordError naming topic, partition, offset and table."""
        self.source.reject(self._records[id(event.position)], error, table)

    def notify_committed(self, position: Mapping[str, int]) -> None:
        """The lake holds ``position``: commit it to the consumer group (advisory, for lag)."""
        self.source.commit_advisory({split_topic_partition(k): v for k, v in position.items()})

    @property
    def bad_records(self) -> int:
        """Records skipped with ``<format>.ignore-parse-errors``."""
        return int(self.source.parse_errors)

    @property
    def dead_letters(self) -> int:
        """Records copied to ``dead-letter.topic``."""
        return int(self.source.dead_letters)

    def close(self) -> None:
        """Close the consumer (and the dead-letter producer); idempotent."""
        self.source.close()


def note_inferred(
    events: list[DataChangeEvent], inferred: list[str], static_schemas: dict[TableId, Schema], static: bool
) -> list[DataChangeEvent]:
    """Record (once per table, in the log and ``inferred``) that a table's events carry no schema,
    so its types are inferred from JSON values; with ``schema.inference.strategy: static`` give
    them the schema inferred from the table's first row."""
    out = []
    for event in events:
        if event.schema is None and event.op is not Op.TRUNCATE:
            name = str(event.table)
            if name not in inferred:
                inferred.append(name)
                log.warning(
                    "table %s: records carry no schema (no 'changelake.schema.id' header, no schema wrapper); "
                    "column types are inferred from JSON values (DECIMAL may become double, DATETIME string)",
                    name,
                )
            if static:
                row = event.after if event.after is not None else (event.before or {})
                schema = static_schemas.setdefault(event.table, infer_schema(row))
                event = replace(event, schema=schema)
        out.append(event)
    return out
