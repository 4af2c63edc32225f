"""The ``kafka`` table source: reads topics as a changelog, decoded by the value format.

As Flink's ``KafkaDynamicSource``: an insert-only format (json, csv, avro, raw) yields ``+I`` rows;
a changelog format yields the kinds its messages carry (a Debezium topic yields +I/-U/+U/-D).
Records with a null value (tombstones) yield nothing. Key columns ('key.fields') are decoded
from the record key; with 'value.fields-include' = 'ALL' the value's copy wins.

Every row carries ``metadata`` ``{"topic", "partition", "offset", "timestamp"}`` (timestamp in
ms since epoch), so consume-transform-produce code can commit exactly what it consumed.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Callable, Mapping, TypeVar

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema
from changelake.connectors.errors import ConnectorError, SourceError
from changelake.connectors.kafka_common import (consumer_error, partition_end_offsets, reader_config, unavailable_error,
                                                 with_logger)
from changelake.connectors.kafka_table.options import KafkaTableOptions, ScanBoundedMode, ScanStartupMode
from changelake.formats.errors import DecodeError

__all__ = ["KafkaTableSource"]

TP = tuple[str, int]
T = TypeVar("T")


_RETRIABLE = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError._TIMED_OUT,
    KafkaError._WAIT_COORD,
    KafkaError.UNSTABLE_OFFSET_COMMIT,
}


def _retry_coordinator(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """Call ``fn`` until it stops failing with a retriable group-coordinator error."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return fn()
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            code = err.code() if isinstance(err, KafkaError) else None
            if code not in _RETRIABLE or time.monotonic() > deadline:
                raise SourceError(f"cannot {what}: {exc}") from exc
            time.sleep(0.2)


class KafkaTableSource:
    """Reads one or more topics (or a topic pattern) as changelog rows.

    Args:
        options: parsed options (:func:`~changelake.connectors.kafka_table.factory.create_source`).
        schema: the table schema.
        value_format: value format instance (``decode(bytes | None) -> list[ChangelogRow]``,
            ``changelog_mode``).
        key_format: key format instance, or None.

    Start position per 'scan.startup.mode': earliest-offset, latest-offset, group-offsets (the
    group's committed offsets; partitions without one start at ``properties.auto.offset.reset``,
    default earliest — Flink fails there unless a reset strategy is set), timestamp,
    specific-offsets (unlisted partitions start at earliest). With a 'scan.bounded.mode' other
    than unbounded, the end offsets (exclusive) are fixed at :meth:`open` and :attr:`finished`
    turns True once every partition reached them.

    Consumer settings: ``enable.auto.commit=false`` (offsets are committed by :meth:`commit`,
    or inside a transaction by the sink), ``isolation.level=read_committed`` unless set, a
    random ``group.id`` when 'properties.group.id' is not given.

    Example::

        src = create_source({"connector": "kafka", "topic": "pageviews", "format": "json",
                             "properties.bootstrap.servers": "localhost:9092",
                             "scan.startup.mode": "earliest-offset",
                             "scan.bounded.mode": "latest-offset"}, schema).open()
        while not src.finished:
            for row in src.poll(1.0): ...
        src.close()
    """

    def __init__(self, options: KafkaTableOptions, schema: Schema, value_format: Any, key_format: Any | None = None) -> None:
        self.options = options
        self.schema = schema
        self.value_format = value_format
        self.key_format = key_format
        self._consumer: Consumer | None = None
        self._positions: dict[TP, int] = {}
        self._stop: dict[TP, int] | None = None
        self._eof: set[TP] = set()
        self._assigned = False
        self.records_read = 0

    @property
    def changelog_mode(self) -> frozenset[RowKind]:
        """The kinds this source emits: the value format's changelog mode."""
        return frozenset(getattr(self.value_format, "changelog_mode", frozenset({RowKind.INSERT})))

    # -- lifecycle --------------------------------------------------------------------------------
    def consumer_config(self) -> dict[str, Any]:
        conf: dict[str, Any] = reader_config(self.options.properties)
        conf.setdefault("group.id", f"changelake-kafka-table-{uuid.uuid4().hex[:12]}")
        conf["enable.auto.commit"] = False
        conf["enable.partition.eof"] = True
        conf.setdefault("isolation.level", "read_committed")
        conf.setdefault("auto.offset.reset", "earliest")
        return conf

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            raise ConnectorError("kafka source is not open; call open() first")
        return self._consumer

    def _connect(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(with_logger(self.consumer_config()))
        return self._consumer

    def open(self, start_offsets: Mapping[TP, int] | None = None) -> "KafkaTableSource":
        """Connect, resolve topics and partitions, compute start and end offsets, assign.

        Args:
            start_offsets: next offsets to read per (topic, partition), overriding
                'scan.startup.mode' for those partitions (e.g. restored from a checkpoint).
                Partitions are assigned once, at these offsets: re-assigning later could
                deliver records prefetched for the first assignment.

        Raises:
            KafkaUnavailableError: no broker answered within 10 s (names ``bootstrap.servers``).
            SourceError: a topic does not exist or offsets cannot be read (names the topic).
        """
        if self._assigned:
            return self
        consumer = self._connect()
        try:
            tps = self._partitions()
            start = self._start_offsets(tps)
            self._stop = self._stop_offsets(tps)
        except KafkaException as exc:
            self.close()
            unavailable = unavailable_error(exc, self.options.properties, 10)
            if unavailable is not None:
                raise unavailable from exc
            raise SourceError(f"cannot open kafka source on {self._topics_text()}: {exc}") from exc
        if start_offsets:
            unknown = [tp for tp in start_offsets if tp not in start]
            if unknown:
                self.close()
                raise SourceError(f"cannot start partitions {unknown}: this source reads {sorted(start)}")
            start.update(start_offsets)
        consumer.assign([TopicPartition(t, p, start[(t, p)]) for t, p in tps])
        self._assigned = True
        for tp, off in start.items():
            if off >= 0:
                self._positions[tp] = off
        return self

    def __enter__(self) -> "KafkaTableSource":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the consumer (no offsets are committed). Idempotent."""
        if self._consumer is not None:
            try:
                self._consumer.close()
            finally:
                self._consumer = None
                self._assigned = False

    def _topics_text(self) -> str:
        return f"topic pattern {self.options.topic_pattern!r}" if self.options.topic_pattern else f"topic(s) {list(self.options.topics)}"

    def _partitions(self) -> list[TP]:
        md = self.consumer.list_topics(timeout=10)
        if self.options.topic_pattern:
            rx = re.compile(self.options.topic_pattern)
            topics = sorted(t for t in md.topics if rx.fullmatch(t))
        else:
            topics = list(self.options.topics)
        out: list[TP] = []
        for t in topics:
            tmd = md.topics.get(t)
            if tmd is None or tmd.error is not None or not tmd.partitions:
                raise SourceError(f"Kafka topic {t!r} does not exist or has no partitions")
            out.extend((t, p) for p in sorted(tmd.partitions))
        return out

    def committed(self, timeout_s: float = 30.0) -> dict[TP, int]:
        """The consumer group's committed next offsets per (topic, partition) with one (may be
        called before :meth:`open`).

        Retries while the group coordinator is loading or moving (a fresh broker), up to
        ``timeout_s`` seconds. Raises SourceError after that.
        """
        self._connect()
        tps = [TopicPartition(t, p) for t, p in self._partitions()]
        res = _retry_coordinator(lambda: self.consumer.committed(tps, timeout=10), timeout_s, "read committed offsets")
        return {(r.topic, r.partition): r.offset for r in res if r.offset >= 0}

    def _offsets_for_time(self, tps: list[TP], ms: int) -> dict[TP, int]:
        res = self.consumer.offsets_for_times([TopicPartition(t, p, ms) for t, p in tps], timeout=10)
        out: dict[TP, int] = {(r.topic, r.partition): r.offset for r in res}
        # no record at/after ms: the end
        out.update(partition_end_offsets(self.consumer, [tp for tp, off in out.items() if off < 0], 10))
        return out

    def _ends(self, tps: list[TP]) -> dict[TP, int]:
        return partition_end_offsets(self.consumer, tps, 10)

    def _start_offsets(self, tps: list[TP]) -> dict[TP, int]:
        o = self.options
        mode = o.scan_startup_mode
        if mode is ScanStartupMode.EARLIEST_OFFSET:
            return {tp: OFFSET_BEGINNING for tp in tps}
        if mode is ScanStartupMode.LATEST_OFFSET:
            return self._ends(tps)
        if mode is ScanStartupMode.TIMESTAMP:
            assert o.scan_startup_timestamp_millis is not None
            return self._offsets_for_time(tps, o.scan_startup_timestamp_millis)
        if mode is ScanStartupMode.SPECIFIC_OFFSETS:
            spec = o.scan_startup_specific_offsets or {}
            return {(t, p): spec.get(p, OFFSET_BEGINNING) for t, p in tps}
        committed = self.committed()
        reset = OFFSET_END if str(o.properties.get("auto.offset.reset", "earliest")).lower() in ("latest", "largest") else OFFSET_BEGINNING
        return {tp: committed.get(tp, reset) for tp in tps}

    def _stop_offsets(self, tps: list[TP]) -> dict[TP, int] | None:
        o = self.options
        mode = o.scan_bounded_mode
        if mode is ScanBoundedMode.UNBOUNDED:
            return None
        if mode is ScanBoundedMode.LATEST_OFFSET:
            return self._ends(tps)
        if mode is ScanBoundedMode.TIMESTAMP:
            assert o.scan_bounded_timestamp_millis is not None
            return self._offsets_for_time(tps, o.scan_bounded_timestamp_millis)
        if mode is ScanBoundedMode.SPECIFIC_OFFSETS:
            spec = o.scan_bounded_specific_offsets or {}
            ends = self._ends(tps)
            return {(t, p): spec.get(p, ends[(t, p)]) for t, p in tps}
        committed = self.committed()
        return {tp: committed.get(tp, 0) for tp in tps}

    # -- reading ----------------------------------------------------------------------------------
    @property
    def stop_offsets(self) -> dict[TP, int] | None:
        """End offsets (exclusive) of a bounded source, or None when unbounded."""
        return dict(self._stop) if self._stop is not None else None

    @property
    def finished(self) -> bool:
        """True when bounded and every partition reached its end offset."""
        if self._stop is None:
            return False
        return all(tp in self._eof or self._positions.get(tp, 0) >= end for tp, end in self._stop.items())

    def positions(self) -> dict[TP, int]:
        """Next offset to consume per (topic, partition), for every partition read so far."""
        return dict(self._positions)

    def offsets_to_commit(self, floor: Mapping[TP, int] | None = None) -> list[TopicPartition]:
        """:meth:`positions` as TopicPartitions (for ``send_offsets_to_transaction``/``commit``).

        Args:
            floor: offsets never to go below, per partition (e.g. the committed offsets while
                a restarted job is still replaying a partition: committing its position then
                would move the group's offset backwards). Partitions only in ``floor`` are
                included too.
        """
        merged = dict(floor or {})
        for tp, off in self._positions.items():
            merged[tp] = max(off, merged.get(tp, off))
        return [TopicPartition(t, p, off) for (t, p), off in sorted(merged.items())]

    def group_metadata(self) -> Any:
        """The consumer's group metadata (for ``send_offsets_to_transaction``)."""
        return self.consumer.consumer_group_metadata()

    def commit(self, floor: Mapping[TP, int] | None = None) -> None:
        """Synchronously commit :meth:`positions` (not below ``floor``, see
        :meth:`offsets_to_commit`) to the consumer group (non-transactional)."""
        offsets = self.offsets_to_commit(floor)
        if offsets:
            _retry_coordinator(lambda: self.consumer.commit(offsets=offsets, asynchronous=False), 30.0, "commit offsets")

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[ChangelogRow]:
        """Up to ``max_records`` records as changelog rows; waits at most ``timeout_s`` seconds.

        Records at or past a bounded source's end offset are not returned.

        Raises:
            DecodeError: a record does not decode (topic, partition and offset filled in).
            SourceError: a fatal consumer error (names topic and partition).
        """
        out: list[ChangelogRow] = []
        for m in self.poll_messages(timeout_s, max_records):
            out.extend(self._decode(m))
        return out

    def poll_messages(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Any]:
        """As :meth:`poll`, but the records undecoded: confluent-kafka ``Message`` objects (for a
        caller that decodes a whole batch at once, then :meth:`decode_message` for exact errors).
        Positions and the bounded end advance as with :meth:`poll`.

        Raises:
            SourceError: a fatal consumer error (names topic and partition).
        """
        if self.finished:
            return []
        msgs = self.consumer.consume(max_records, timeout_s)
        out: list[Any] = []
        for m in msgs:
            err = m.error()
            tp: TP = (str(m.topic()), int(m.partition() or 0))
            off = int(m.offset() or 0)
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self._positions[tp] = max(self._positions.get(tp, 0), off)
                    if self._stop is not None and off >= self._stop.get(tp, 0):
                        self._eof.add(tp)
                    continue
                raise consumer_error(err, m.topic(), tp[1], off, self._topics_text())
            if self._stop is not None and off >= self._stop.get(tp, 0):
                self._eof.add(tp)
                continue
            self._positions[tp] = off + 1
            self.records_read += 1
            out.append(m)
        return out

    def decode_message(self, m: Any) -> list[ChangelogRow]:
        """The changelog rows of one message from :meth:`poll_messages`, as :meth:`poll` returns them.

        Raises:
            DecodeError: the record does not decode (topic, partition and offset filled in).
        """
        return self._decode(m)

    def _decode(self, m: Any) -> list[ChangelogRow]:
        topic, part, off = m.topic(), m.partition(), m.offset()
        try:
            rows = self.value_format.decode(m.value())
            if not rows:
                return []
            key_values: dict[str, Any] = {}
            if self.key_format is not None and m.key() is not None:
                krows = self.key_format.decode(m.key())
                if krows:
                    names = self.options.key_names
                    key_values = {f: krows[0].values.get(n) for f, n in zip(self.options.key_fields, names)}
        except DecodeError as exc:
            raise exc.at(topic=topic, partition=part, offset=off)
        ts_type, ts = m.timestamp()
        meta = {"topic": topic, "partition": part, "offset": off, "timestamp": ts if ts_type else None}
        out = []
        for r in rows:
            values = {c: None for c in self.schema.names}
            values.update(key_values)
            values.update({k: v for k, v in r.values.items() if k in values})
            out.append(ChangelogRow(r.kind, values, r.table, {**dict(r.metadata), **meta}))
        return out
