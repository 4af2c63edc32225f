"""UpsertKafkaSource: read a keyed Kafka topic as a changelog (+I / +U / -D, or retract).

Semantics are Flink's upsert-kafka source followed by its ChangelogNormalize
(``DeduplicateFunctionHelper.processLastRowOnChangelog``), with the seed's rules:

* always from the EARLIEST offset (not configurable: the whole history is needed to rebuild the
  changelog); a durable key-state store resumes from its stored offsets instead (see below);
* a record whose key was seen before -> ``+U``; a new key -> ``+I``; a record identical to the
  stored row emits nothing;
* a tombstone (null value) -> ``-D`` carrying the key's LAST FULL ROW; nothing if the key is unknown;
* with ``value.fields-include = ALL`` key columns are filled from the key, then overwritten by the
  value (Flink);
* a null KEY fails with SourceError naming topic, partition and offset (``scan.null-key.mode =
  fail``, default) or is skipped and counted in :attr:`UpsertKafkaSource.null_key_records`
  (``skip``). Flink drops such records silently;
* an undecodable key or value raises DecodeError with topic/partition/offset filled in, unless the
  format's ``ignore-parse-errors`` is on (the record is then dropped);
* ``scan.changelog-mode = retract`` also emits ``-U(previous row)`` before each ``+U``.

Decoding is batched per poll where the format allows (``json``): the poll's keys and values are
decoded with one call each (``JsonFormat.decode_values_many``), the key state of every key of the
poll is read ahead (:class:`~changelake.connectors.upsert_kafka.prefetch.PrefetchedReads`) and
the previous rows an update compares or a tombstone emits are decoded with one more call. A
record the batch decoder does not take with certainty (malformed, an array, a value that does
not convert, ...) is decoded alone, as with ``batch_decode=False``: the changelog, the key state,
the positions and every error (DecodeError with topic, partition and offset, or the record
dropped by ``ignore-parse-errors``) are the same.

Key bytes seen before are not decoded again (a bounded cache of key bytes -> decoded key and
state key). With a :class:`~changelake.changelog.state.MemoryKeyStateStore` the batch path
normalizes in its own loop over the store's dict (:meth:`MemoryKeyStateStore.data`): the steps
of ``ChangelogNormalize.upsert_encoded`` and of its ``-D``, with the previous row an update
compares or a tombstone emits taken from the row the source wrote with that state value (kept
as a tuple beside it, as Flink's heap state keeps rows) instead of being decoded again; a state
value it did not write is decoded as before. The rows, the state bytes and the errors are those
of the record-by-record path (tests/integration/upsert_kafka/test_upsert_kafka_batch_decode_it.py).

:meth:`UpsertKafkaSource.poll_batches` gives the same changelog as Arrow
:class:`~changelake.changelog.change_batch.ChangeBatch`es (the columnar lane,
:mod:`~changelake.connectors.upsert_kafka.columnar`): with memory state and json key and value,
a poll's values and the previous rows it needs are read in one pyarrow JSON call and the state
is looked up and written once per distinct key; a poll it cannot decide with certainty goes
through :meth:`poll`'s path whole (tests/integration/upsert_kafka/test_upsert_kafka_columnar_it.py).

Key state: the last full row per key lives in a :class:`~changelake.changelog.state.KeyStateStore`
together with the next offset per partition (metadata ``offset:<topic>:<partition>``), committed
after every :meth:`UpsertKafkaSource.poll` (or by :meth:`UpsertKafkaSource.commit_state`). With a
:class:`~changelake.changelog.state.SqliteKeyStateStore` a restart resumes where the last commit
stopped, without re-reading or re-emitting. Deleting the store's directory rebuilds the state
from the earliest offset (and re-emits the whole changelog).

Bounded modes (``scan.bounded.mode``) compute end offsets once, at :meth:`UpsertKafkaSource.open`;
:meth:`UpsertKafkaSource.is_bounded_end_reached` turns True when every partition got there.

Example::

    src = create_source(decl, store=SqliteKeyStateStore("state/pv"))
    with src:
        while not src.is_bounded_end_reached():
            for row in src.poll(1.0):
                print(row)            # +I[us-east, 3, 2]
"""

from __future__ import annotations

import json
import logging
import operator
import re
import struct
import time
import uuid
from typing import Any, Callable, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from changelake.changelog.errors import KeyStateError
from changelake.collector import young_generation
from changelake.changelog.change_batch import ChangeBatch, batch_arrow_schema
from changelake.changelog.normalize import ENCODED_STATE_MARK, ChangelogNormalize
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import RowKind
from changelake.changelog.schema import Schema
from changelake.changelog.state import KeyStateStore, MemoryKeyStateStore, encode_key
from changelake.connectors.errors import ConnectorError, SourceError
from changelake.connectors.kafka_common import (
    consumer_error,
    lag_of,
    partition_end_offsets,
    partition_watermarks,
    reader_config,
    unavailable_error,
    with_logger,
)
from changelake.connectors.metrics import SourceMetrics
from changelake.connectors.upsert_kafka import columnar, formats_bridge
from changelake.connectors.upsert_kafka.layout import RowLayout
from changelake.connectors.upsert_kafka.prefetch import PrefetchedReads
from changelake.connectors.upsert_kafka.options import (
    BoundedMode,
    ChangelogModeOption,
    NullKeyMode,
    UpsertKafkaOptions,
    ValueFieldsInclude,
)
from changelake.formats.errors import DecodeError

__all__ = ["UpsertKafkaSource"]

log = logging.getLogger(__name__)

TP = tuple[str, int]

def _not_open(data: bytes) -> list[Mapping[str, Any]]:
    raise ConnectorError("the upsert-kafka source is not open; call open() first")


#: a format's batch decoder: the values of each message, None where it must be decoded alone
_BatchDecoder = Callable[[list[bytes | None]], list[dict[str, Any] | None]]

#: length prefix of the key bytes in a state value (see UpsertKafkaSource._decode_state)
_STATE_KEY_LEN = struct.Struct(">I")

_INSERT, _UPDATE_BEFORE, _UPDATE_AFTER, _DELETE = (
    RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
)
_first, _second = operator.itemgetter(0), operator.itemgetter(1)
_new_row = object.__new__
_set_fields = object.__setattr__


def _row(kind: RowKind, values: dict[str, Any], metadata: dict[str, Any]) -> ChangelogRow:
    """``ChangelogRow(kind, values, None, metadata)`` built without the frozen dataclass's
    ``__init__`` (four ``object.__setattr__`` calls): the same fields in the instance dict."""
    row: ChangelogRow = _new_row(ChangelogRow)
    _set_fields(row, "__dict__", {"kind": kind, "values": values, "table": None, "metadata": metadata})
    return row


#: most key bytes whose decoded key the source keeps (see UpsertKafkaSource._decode_key_batch)
_KEY_CACHE_MAX = 1 << 18


class UpsertKafkaSource:
    """Reads an upsert topic into changelog rows (see module docstring).

    Args:
        options: validated options (:func:`~changelake.connectors.upsert_kafka.factory.validate_options`).
        schema: the table schema with its primary key.
        store: key state (last full row per key + offsets); a new MemoryKeyStateStore when None.
            The source commits it but does not close it unless it created it.
        commit_state_every_poll: commit the store at the end of each poll (default True); when
            False the caller calls :meth:`commit_state` once it has handled the rows.
        metrics: a :class:`SourceMetrics` to update (a new one when None).
        batch_decode: decode each poll's keys and values in one call per format where the format
            has a batch decoder (``json``: ``JsonFormat.decode_values_many``), and the previous row
            of an update through it too (default True). The changelog, the state and every error
            are the same as record by record (False): a record the batch decoder does not take
            with certainty is decoded alone, so a corrupt one raises the same DecodeError with its
            topic, partition and offset, or is dropped by ``ignore-parse-errors``.

    Emitted rows carry ``metadata`` ``{"topic", "partition", "offset", "timestamp"}`` (timestamp in
    ms since epoch) of the record that caused them.
    """

    def __init__(
        self,
        options: UpsertKafkaOptions,
        schema: Schema,
        *,
        store: KeyStateStore | None = None,
        commit_state_every_poll: bool = True,
        metrics: SourceMetrics | None = None,
        batch_decode: bool = True,
    ) -> None:
        self.options = options
        self.schema = schema
        self.layout = RowLayout(schema, options)
        self._own_store = store is None
        self.store: KeyStateStore = store if store is not None else MemoryKeyStateStore()
        self.commit_state_every_poll = commit_state_every_poll
        self.metrics = metrics or SourceMetrics()
        # the normalizer reads through the poll's prefetched reads (see _prefetch_previous)
        self._reads = PrefetchedReads(self.store)
        #: previous rows decoded ahead for this poll, by their state encoding (see _decode_state)
        self._previous_rows: dict[bytes, dict[str, Any]] = {}
        #: memory state only: per state key, the state value last written by the batch path and
        #: the row it holds as a tuple in column order (see _poll_records); None for other stores
        self._row_cache: dict[bytes, tuple[bytes, tuple[Any, ...]]] | None = (
            {} if type(self.store) is MemoryKeyStateStore else None
        )
        #: per key bytes of a batch, the decoded key row and its state key (see _decode_key_batch)
        self._key_cache: dict[bytes, tuple[dict[str, Any], bytes]] = {}
        self.normalizer = ChangelogNormalize(
            schema,
            self._reads,
            generate_update_before=options.scan_changelog_mode is ChangelogModeOption.RETRACT,
            decode_state=self._decode_state,
        )
        self.null_key_records = 0
        #: polls of :meth:`poll_batches` decoded in Arrow / taken by the per-record path
        self.columnar_polls = 0
        self.record_path_polls = 0
        self._consumer: Consumer | None = None
        self._key_format: Any = None
        self._value_format: Any = None
        self._decode_key: Callable[[bytes], list[Mapping[str, Any]]] = _not_open
        self._decode_value: Callable[[bytes], list[Mapping[str, Any]]] = _not_open
        self._decode_keys: _BatchDecoder | None = None
        self._decode_values: _BatchDecoder | None = None
        self._decode_one_value: Callable[[bytes], dict[str, Any] | None] | None = None
        #: decode a poll's keys and values in one call each where the format can (json)
        self.batch_decode = batch_decode
        # a json value row holds every table column in table order: it is the table row
        self._value_row_is_table_row = (
            options.value_fields_include is ValueFieldsInclude.ALL and self.layout.value_schema.names == schema.names
        )
        self._current_key: tuple[bytes, Mapping[str, Any]] | None = None
        #: the Arrow schema of this table's change batches (None: a column has no batch type)
        self._batch_schema = batch_arrow_schema(schema)
        self._positions: dict[TP, int] = {}
        self._ends: dict[TP, int] | None = None
        self._done: set[TP] = set()
        self._dirty_positions: set[TP] = set()
        self._last_pending_check = 0.0
        self._closed = False

    @property
    def changelog_mode(self) -> frozenset[RowKind]:
        """UPSERT (+I/+U/-D) or RETRACT (with -U) per ``scan.changelog-mode``."""
        return self.normalizer.changelog_mode

    # -- lifecycle --------------------------------------------------------------------------------
    def consumer_config(self) -> dict[str, Any]:
        """librdkafka consumer config: ``properties.*`` plus a generated ``group.id`` when none is
        given, no auto commit, earliest reset, partition-EOF events (for bounded reads) and
        :func:`~changelake.connectors.kafka_common.reader_config`'s fetch defaults."""
        conf: dict[str, Any] = reader_config(self.options.properties)
        conf["bootstrap.servers"] = self.options.bootstrap_servers
        conf.setdefault("group.id", f"changelake-upsert-kafka-{uuid.uuid4().hex[:12]}")
        conf["enable.auto.commit"] = False
        conf["auto.offset.reset"] = "earliest"  # always earliest, as Flink's upsert-kafka source
        conf["enable.partition.eof"] = True
        return conf

    def _identity(self) -> bytes:
        return json.dumps(
            {
                "topics": list(self.options.topics),
                "topic-pattern": self.options.topic_pattern,
                "key.format": self.options.key_format,
                "value.format": self.options.value_format,
                "columns": self.schema.names,
                "primary-key": list(self.schema.primary_key),
            },
            separators=(",", ":"),
        ).encode()

    def open(self) -> "UpsertKafkaSource":
        """Build the formats, check the key state belongs to this table, resolve topics and
        partitions, compute bounded end offsets and assign every partition at its stored offset
        (earliest when none). Raises KeyStateError (state of another table: delete its directory),
        KafkaUnavailableError (no broker answered within 10 s; names ``bootstrap.servers``) or
        ConnectorError (no matching topic, a Kafka request failed)."""
        if self._consumer is not None:
            return self
        self._key_format = formats_bridge.create_format(
            self.options.key_format, self.layout.key_schema, self.options.key_format_options
        )
        self._value_format = formats_bridge.create_format(
            self.options.value_format, self.layout.value_schema, self.options.value_format_options
        )
        self._decode_key = self._values_decoder(self._key_format)
        self._decode_value = self._values_decoder(self._value_format)
        if self.batch_decode:
            self._decode_keys = getattr(self._key_format, "decode_values_many", None)
            self._decode_values = getattr(self._value_format, "decode_values_many", None)
            self._decode_one_value = getattr(self._value_format, "decode_one_value", None)
        identity = self._identity()
        stored = self.store.get_meta("identity")
        if stored is None:
            self.store.put_meta("identity", identity)
            self.store.commit()
        elif stored != identity:
            raise KeyStateError(
                f"the key state belongs to another table ({stored.decode(errors='replace')}); "
                "delete the key-state directory to rebuild it from the earliest offset"
            )
        conf = self.consumer_config()
        consumer = Consumer(with_logger(conf))
        try:
            partitions = self._partitions(consumer)
            starts: dict[TP, int] = {}
            for tp in partitions:
                raw = self.store.get_meta(f"offset:{tp[0]}:{tp[1]}")
                starts[tp] = int(raw) if raw is not None else OFFSET_BEGINNING
            self._ends = self._end_offsets(consumer, partitions)
            self._positions = {tp: (off if off >= 0 else 0) for tp, off in starts.items()}
            if self._ends is not None:
                for tp, (low, _high) in partition_watermarks(consumer, partitions, 10).items():
                    if max(self._positions[tp], low) >= self._ends.get(tp, 0):
                        self._done.add(tp)
            consumer.assign([TopicPartition(t, p, starts[(t, p)]) for (t, p) in partitions if (t, p) not in self._done])
        except KafkaException as exc:
            consumer.close()
            unavailable = unavailable_error(exc, conf, 10)
            if unavailable is not None:
                raise unavailable from exc
            raise ConnectorError(f"cannot open the upsert-kafka source on {self._topic_label()}: {exc}") from exc
        except BaseException:
            consumer.close()
            raise
        self._consumer = consumer
        self._closed = False
        return self

    def _topic_label(self) -> str:
        return f"topic-pattern '{self.options.topic_pattern}'" if self.options.topic_pattern else f"topics {list(self.options.topics)}"

    def _partitions(self, consumer: Consumer) -> list[TP]:
        md = consumer.list_topics(timeout=10)
        if self.options.topic_pattern:
            rx = re.compile(self.options.topic_pattern)
            topics = sorted(t for t in md.topics if rx.fullmatch(t) and not t.startswith("__"))
        else:
            topics = list(self.options.topics)
        out: list[TP] = []
        for t in topics:
            meta = md.topics.get(t)
            if meta is None or meta.error is not None:
                raise ConnectorError(f"Kafka topic {t!r} does not exist ({meta.error if meta else 'missing'})")
            out.extend((t, p) for p in sorted(meta.partitions))
        return out

    def _end_offsets(self, consumer: Consumer, partitions: list[TP]) -> dict[TP, int] | None:
        mode = self.options.scan_bounded_mode
        if mode is BoundedMode.UNBOUNDED:
            return None
        if mode is BoundedMode.LATEST_OFFSET:
            return partition_end_offsets(consumer, partitions, 10)
        if mode is BoundedMode.SPECIFIC_OFFSETS:
            given = self.options.scan_bounded_specific_offsets or {}
            # partitions not listed are not read (their end is their start)
            return {tp: given.get(tp[1], 0) for tp in partitions}
        if mode is BoundedMode.TIMESTAMP:
            ts = int(self.options.scan_bounded_timestamp_millis or 0)
            found = consumer.offsets_for_times([TopicPartition(t, p, ts) for t, p in partitions], timeout=10)
            ends: dict[TP, int] = {(tp.topic, tp.partition): tp.offset for tp in found}
            # no record at or after ts: read to the current end
            ends.update(partition_end_offsets(consumer, [tp for tp, off in ends.items() if off < 0], 10))
            return ends
        # GROUP_OFFSETS: the committed offsets of properties.group.id
        committed = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=10)
        return {(tp.topic, tp.partition): max(tp.offset, 0) for tp in committed}

    def __enter__(self) -> "UpsertKafkaSource":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the consumer (and the store if the source created it). Uncommitted state is
        not committed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._own_store:
            self.store.close()

    # -- reading ------------------------------------------------------------------------------------
    @property
    def end_offsets(self) -> dict[TP, int] | None:
        """The bounded end offset per (topic, partition), exclusive; None when unbounded."""
        return None if self._ends is None else dict(self._ends)

    @property
    def positions(self) -> dict[TP, int]:
        """The next offset to read per (topic, partition)."""
        return dict(self._positions)

    def is_bounded_end_reached(self) -> bool:
        """True when bounded and every partition reached its end offset; always False unbounded."""
        return self._ends is not None and self._consumer is not None and all(tp in self._done for tp in self._ends)

    @property
    def change_batches(self) -> bool:
        """True when :meth:`poll_batches` decodes columnar (open, memory key state, json key and
        value, ``value.fields-include = ALL``, no FLOAT/DOUBLE column, every column with an Arrow
        batch type); otherwise it converts :meth:`poll`'s rows (see
        :mod:`~changelake.connectors.upsert_kafka.columnar`)."""
        return (
            self._row_cache is not None
            and self._decode_keys is not None
            and callable(getattr(self._value_format, "decode_columns", None))
            and self._value_row_is_table_row
            and self.normalizer._equal_bytes_equal_rows
            and self._batch_schema is not None
        )

    def poll_batches(self, max_events: int = 2000, timeout_s: float = 1.0) -> list[ChangeBatch]:
        """As :meth:`poll` (with ``max_records = max_events``; 2000 by default, the runner loop's
        batch size: Arrow's per-call costs spread over more records), but the changelog comes as
        :class:`ChangeBatch`es (Arrow), one per run
        of records of one partition: ``rows`` (the table's columns), ``kinds`` (``+I``, ``-U``,
        ``+U``, ``-D``), ``offsets`` (the offset of each row's record), ``records`` (Kafka records
        covered). The same rows, key state, positions and errors as :meth:`poll` (per record, the
        row's record timestamp is not carried); decoded in Arrow when :attr:`change_batches`
        (:mod:`~changelake.connectors.upsert_kafka.columnar`).

        Raises what :meth:`poll` raises, and ConnectorError when a column has no Arrow batch type
        (DECIMAL wider than 38 digits)."""
        consumer = self._consumer
        if consumer is None:
            raise ConnectorError("the upsert-kafka source is not open; call open() first")
        if self.is_bounded_end_reached():
            return []
        with young_generation():  # as poll()
            messages = consumer.consume(max_events, timeout_s)
            return columnar.poll_batches(self, consumer, messages)

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[ChangelogRow]:
        """Fetch up to ``max_records`` records (waiting at most ``timeout_s`` seconds) and return
        the changelog rows they produce, then commit the key state (unless disabled).

        The poll runs with the cyclic garbage collector's young-generation threshold raised
        (:func:`~changelake.collector.young_generation`; a no-op inside the runner loop, which
        raises it for the whole run): a poll allocates a few container objects per record, and
        at CPython's default threshold their promotions set off full collections of the whole
        imported heap (measured: 4-5 per 200,000 records, 10-15 % of the poll time).

        Raises SourceError (null key with ``fail``, Kafka errors; names topic/partition/offset),
        DecodeError (undecodable key/value; position filled in)."""
        consumer = self._consumer
        if consumer is None:
            raise ConnectorError("the upsert-kafka source is not open; call open() first")
        if self.is_bounded_end_reached():
            return []
        with young_generation():
            messages = consumer.consume(max_records, timeout_s)
            return self._poll_messages(consumer, messages)

    def _poll_messages(self, consumer: Consumer, messages: list[Any]) -> list[ChangelogRow]:
        """:meth:`poll`'s work on the consumed ``messages``: the changelog rows, the key state,
        the positions, the metrics and the state commit."""
        keys = [msg.key() for msg in messages]
        values = [msg.value() for msg in messages]
        # one decode call per format for the whole poll (None entries: decoded record by record)
        decoded_keys = self._decode_key_batch(keys)
        key_rows, state_keys = (None, None) if decoded_keys is None else decoded_keys
        value_rows = self._decode_values(values) if self._decode_values is not None else None
        out: list[ChangelogRow] = []
        nbytes = 0
        n_records = 0
        last_ts: int | None = None
        ends = self._ends
        upsert = self.normalizer.upsert_encoded
        pack = _STATE_KEY_LEN.pack
        lean = value_rows is not None and state_keys is not None and self._value_row_is_table_row
        # memory state: the normalizer's steps done here, the previous rows taken from _row_cache
        cache = self._row_cache if lean else None
        if cache is not None:
            data = self.store.data()  # type: ignore[attr-defined]  # a MemoryKeyStateStore (see __init__)
            store_get = data.get
            cache_get = cache.get
            mark = ENCODED_STATE_MARK
            equal_bytes_equal_rows = self.normalizer._equal_bytes_equal_rows
            retract = self.normalizer.generate_update_before
            names = self.schema.names
            decode_previous = self.normalizer._decode
        advanced: dict[TP, int] = {}  # next offset per partition, applied (also on error) at the end
        try:
            if lean and cache is None:
                self._prefetch_previous(state_keys, keys, values, value_rows)  # type: ignore[arg-type]
            for i, msg in enumerate(messages):
                err = msg.error()
                tp: TP = (str(msg.topic()), int(msg.partition() or 0))
                offset = int(msg.offset() or 0)
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        self._advance(tp, offset)
                        self._check_end(consumer, tp, offset)
                        continue
                    raise consumer_error(err, msg.topic(), tp[1], offset, self._topic_label())
                if ends is not None and (tp in self._done or offset >= ends.get(tp, 0)):
                    self._check_end(consumer, tp, offset)
                    continue
                key, value = keys[i], values[i]
                n_records += 1
                ts_type, ts = msg.timestamp()
                last_ts = ts if ts_type and ts > 0 else None
                if cache is not None and key is not None and (sk := state_keys[i]) is not None:  # type: ignore[index]
                    # memory state, a key decoded by the batch: ChangelogNormalize.upsert_encoded /
                    # process(-D) step by step, the previous row from _row_cache when it holds the
                    # stored state value (else decoded as the normalizer does)
                    if value is None:
                        nbytes += len(key)
                        prev_state = store_get(sk)
                        if prev_state is not None:
                            del data[sk]
                            hit = cache.pop(sk, None)
                            gone = (dict(zip(names, hit[1])) if hit is not None and hit[0] == prev_state
                                    else decode_previous(prev_state))
                            meta = {"topic": tp[0], "partition": tp[1], "offset": offset, "timestamp": last_ts}
                            out.append(_row(_DELETE, gone, meta))
                        advanced[tp] = offset + 1
                        if ends is not None and offset + 1 >= ends.get(tp, 0):
                            self._check_end(consumer, tp, offset + 1)
                        continue
                    if (vr := value_rows[i]) is not None:  # type: ignore[index]
                        nbytes += len(key) + len(value)
                        state = mark + pack(len(key)) + key + value
                        prev_state = store_get(sk)
                        row_tuple = tuple(vr.values())
                        if prev_state is None:
                            data[sk] = state
                            cache[sk] = (state, row_tuple)
                            meta = {"topic": tp[0], "partition": tp[1], "offset": offset, "timestamp": last_ts}
                            out.append(_row(_INSERT, vr, meta))
                        elif prev_state != state or not equal_bytes_equal_rows:
                            hit = cache_get(sk)
                            if hit is not None and hit[0] == prev_state:
                                prev_tuple = hit[1]
                                changed = prev_tuple != row_tuple
                                prev: dict[str, Any] = dict(zip(names, prev_tuple)) if changed and retract else {}
                            else:
                                self._current_key = (key, key_rows[i])  # type: ignore[index,assignment]
                                prev = decode_previous(prev_state)
                                self._current_key = None
                                changed = prev != vr
                            if changed:
                                data[sk] = state
                                cache[sk] = (state, row_tuple)
                                meta = {"topic": tp[0], "partition": tp[1], "offset": offset, "timestamp": last_ts}
                                if retract:
                                    out.append(_row(_UPDATE_BEFORE, prev, meta))
                                out.append(_row(_UPDATE_AFTER, vr, meta))
                        advanced[tp] = offset + 1
                        if ends is not None and offset + 1 >= ends.get(tp, 0):
                            self._check_end(consumer, tp, offset + 1)
                        continue
                    nbytes += len(key) + len(value)
                elif lean and key is not None and value is not None and (vr := value_rows[i]) is not None:  # type: ignore[index]
                    # the common record, as _process: a key and a value decoded by the batch; the
                    # value row is the table row (json, ALL)
                    nbytes += len(key) + len(value)
                    sk = state_keys[i]  # type: ignore[index]
                    if sk is not None:
                        self._current_key = (key, key_rows[i])  # type: ignore[index,assignment]
                        meta = {"topic": tp[0], "partition": tp[1], "offset": offset, "timestamp": last_ts}
                        out.extend(upsert(vr, sk, pack(len(key)) + key + value, None, meta))
                        advanced[tp] = offset + 1
                        if ends is not None and offset + 1 >= ends.get(tp, 0):
                            self._check_end(consumer, tp, offset + 1)
                        continue
                else:
                    nbytes += (0 if key is None else len(key)) + (0 if value is None else len(value))
                out.extend(self._process(
                    key, value, tp, offset, last_ts,
                    None if key_rows is None else key_rows[i], None if value_rows is None else value_rows[i],
                ))
                advanced[tp] = offset + 1
                if ends is not None and offset + 1 >= ends.get(tp, 0):
                    self._check_end(consumer, tp, offset + 1)
        finally:
            self._current_key = None
            self._reads.clear()
            self._previous_rows.clear()
            for tp, next_offset in advanced.items():
                self._advance(tp, next_offset)
        self.metrics.record_fetch(n_records, nbytes, last_ts)
        # the emit lag is that of the last row with a timestamp: record only that one
        for row in reversed(out):
            emitted_ts = row.metadata.get("timestamp")
            if emitted_ts is not None and emitted_ts > 0:
                self.metrics.record_emit(emitted_ts)
                break
        self._update_pending(consumer)
        if self.commit_state_every_poll:
            self.commit_state()
        return out

    def _advance(self, tp: TP, next_offset: int) -> None:
        if next_offset > self._positions.get(tp, 0):
            self._positions[tp] = next_offset
            self._dirty_positions.add(tp)

    def _check_end(self, consumer: Consumer, tp: TP, offset: int) -> None:
        if self._ends is None or tp in self._done:
            return
        if offset >= self._ends.get(tp, 0):
            self._done.add(tp)
            consumer.pause([TopicPartition(*tp)])

    def _process(
        self,
        key: bytes | None,
        value: bytes | None,
        tp: TP,
        offset: int,
        ts: int | None,
        key_row: dict[str, Any] | None = None,
        value_row: dict[str, Any] | None = None,
    ) -> list[ChangelogRow]:
        """The changelog rows of one record. ``key_row`` / ``value_row``: the record's key and
        value as the batch decoder gave them (None: decode them here, record by record)."""
        topic, partition = tp
        if key is None:
            if self.options.scan_null_key_mode is NullKeyMode.SKIP:
                self.null_key_records += 1
                return []
            raise SourceError(
                f"record with a null key at topic {topic!r} partition {partition} offset {offset}: upsert-kafka "
                "needs keyed records (set 'scan.null-key.mode' = 'skip' to skip and count such records)"
            )
        value_rows: list[Mapping[str, Any]] | None
        try:
            key_rows = self._decode_key(key) if key_row is None else [key_row]
            if value is None:
                value_rows = None
            elif value_row is None:
                value_rows = self._decode_value(value)
            else:
                value_rows = [value_row]
        except DecodeError as exc:
            raise exc.at(topic=topic, partition=partition, offset=offset)
        if not key_rows or (value_rows is not None and not value_rows):
            return []  # skipped by the format's ignore-parse-errors
        first_key = key_rows[0]
        layout = self.layout
        state_key = encode_key(layout.key_tuple_from_key_row(first_key))
        meta = {"topic": topic, "partition": partition, "offset": offset, "timestamp": ts}
        if value is None or value_rows is None:
            row = ChangelogRow(RowKind.DELETE, layout.table_row(first_key, None), None, meta)
            return self.normalizer.process(row, state_key)
        if len(value_rows) == 1:
            # the state keeps the record's own key and value bytes (see _decode_state); a batch-
            # decoded value row of every column is a fresh dict in table order: the row itself
            values_ = (
                value_row if value_row is not None and self._value_row_is_table_row
                else layout.table_row(first_key, value_rows[0])
            )
            self._current_key = (key, first_key)
            try:
                return self.normalizer.upsert_encoded(values_, state_key, _STATE_KEY_LEN.pack(len(key)) + key + value, None, meta)
            finally:
                self._current_key = None
        out: list[ChangelogRow] = []
        for vr in value_rows:
            row = ChangelogRow(RowKind.UPDATE_AFTER, layout.table_row(first_key, vr), None, meta)
            out.extend(self.normalizer.process(row, state_key))
        return out

    def _decode_key_batch(self, keys: list[bytes | None]) -> tuple[list[dict[str, Any] | None], list[bytes | None]] | None:
        """The decoded key row and the state key of each key of a poll (None where the key is
        decoded alone, by :meth:`_process`), or None without a batch decoder. Key bytes seen
        before are answered from ``_key_cache`` (decoding is a function of the bytes and the
        format options); the others are decoded in one call. The cache is emptied when it passes
        :data:`_KEY_CACHE_MAX` entries."""
        decode_keys = self._decode_keys
        if decode_keys is None:
            return None
        cache = self._key_cache
        hits: list[tuple[dict[str, Any], bytes] | None] = list(map(cache.get, keys))  # type: ignore[arg-type]
        if None not in hits:
            return list(map(_first, hits)), list(map(_second, hits))  # type: ignore[arg-type]
        missing = list(dict.fromkeys(k for k, h in zip(keys, hits) if h is None and k is not None))
        if missing:
            rows = decode_keys(missing)  # type: ignore[arg-type]
            found = {
                k: (r, sk) for k, r, sk in zip(missing, rows, self.layout.state_keys(rows)) if r is not None and sk is not None
            }
            if len(cache) + len(found) > _KEY_CACHE_MAX:
                cache.clear()
            cache.update(found)
            again: list[tuple[dict[str, Any], bytes] | None] = list(map(cache.get, keys))  # type: ignore[arg-type]
            if None not in again:  # every key decoded: the fast return above
                return list(map(_first, again)), list(map(_second, again))  # type: ignore[arg-type]
            get = found.get
            hits = [h if h is not None or k is None else get(k) for k, h in zip(keys, hits)]
        return [None if h is None else h[0] for h in hits], [None if h is None else h[1] for h in hits]

    def _prefetch_previous(
        self,
        state_keys: list[bytes | None],
        keys: list[bytes | None],
        values: list[bytes | None],
        value_rows: list[dict[str, Any] | None],
    ) -> None:
        """Read the stored row of each key of the poll (:class:`PrefetchedReads`) and decode, in
        one batch-decoder call, the ones the normalizer will decode: written by this source with
        the same key bytes as the record, and either the record is a tombstone (``-D`` carries the
        previous row) or its value bytes differ (an update to compare). The decoded rows wait in
        ``_previous_rows`` for :meth:`_decode_state`; a row the batch decoder does not take is
        decoded there as before (which raises KeyStateError for one that no longer decodes)."""
        decode_values = self._decode_values
        if decode_values is None:
            return
        prefetch = self._reads.prefetch
        mark = ENCODED_STATE_MARK
        unpack = _STATE_KEY_LEN.unpack_from
        wanted: list[bytes] = []
        wanted_values: list[bytes | None] = []
        for sk, key, value, value_row in zip(state_keys, keys, values, value_rows):
            if sk is None or key is None:
                continue
            raw = prefetch(sk)
            if raw is None or raw[:1] != mark:
                continue
            (key_len,) = unpack(raw, 1)
            if raw[5 : 5 + key_len] != key:
                continue  # other key bytes: _decode_state decodes the stored key too
            stored_value = raw[5 + key_len :]
            if value is not None and (value_row is None or stored_value == value):
                continue  # decoded alone, or equal bytes: nothing to decode
            wanted.append(raw[1:])
            wanted_values.append(stored_value)
        if wanted:
            rows = self._previous_rows
            for encoded, row in zip(wanted, decode_values(wanted_values)):
                if row is not None:
                    rows[encoded] = row

    def _values_decoder(self, fmt: Any) -> Callable[[bytes], list[Mapping[str, Any]]]:
        """``data -> [row values]`` of a format: its ``decode_to_values`` (json) when it has one,
        else the values of ``decode``'s rows."""
        direct = getattr(fmt, "decode_to_values", None)
        if direct is not None:
            return direct  # type: ignore[no-any-return]

        def decode(data: bytes) -> list[Mapping[str, Any]]:
            return [r.values for r in fmt.decode(data)]

        return decode

    def _decode_state(self, data: bytes) -> dict[str, Any]:
        """The table row of a state value written by :meth:`_process`: a 4-byte big-endian key
        length, the record's key bytes, then its value bytes (decoded with the key and value
        formats, as when the record was read). Raises KeyStateError if they no longer decode."""
        ahead = self._previous_rows.pop(data, None)
        if ahead is not None:
            return ahead  # decoded with the poll's batch (see _prefetch_previous)
        (key_len,) = _STATE_KEY_LEN.unpack_from(data)
        key, value = data[4 : 4 + key_len], data[4 + key_len :]
        current = self._current_key
        try:
            # the record being processed usually has the same key bytes: reuse its decoded key
            key_rows = [current[1]] if current is not None and current[0] == key else self._decode_key(key)
            fast = None if self._decode_one_value is None else self._decode_one_value(value)
            value_rows = self._decode_value(value) if fast is None else [fast]
        except DecodeError as exc:
            raise KeyStateError(
                f"a row in the key state no longer decodes ({exc}); delete the key-state directory to rebuild "
                "it from the earliest offset"
            ) from exc
        if len(key_rows) != 1 or len(value_rows) != 1:
            raise KeyStateError(
                "a row in the key state no longer decodes to one row (were the format options changed?); "
                "delete the key-state directory to rebuild it from the earliest offset"
            )
        return self.layout.table_row(key_rows[0], value_rows[0])

    def _update_pending(self, consumer: Consumer) -> None:
        now = time.monotonic()
        if now - self._last_pending_check < 5.0:
            return
        self._last_pending_check = now
        try:
            # the high watermark of the last fetch response (no broker round trip); the broker is
            # asked only when none is known yet
            highs = partition_end_offsets(consumer, [tp for tp in self._positions if tp not in self._done], 5,
                                          cached=True)
            bounded = self._ends
            ends = highs if bounded is None else {tp: min(high, bounded.get(tp, high)) for tp, high in highs.items()}
            pending = lag_of(self._positions, ends)
        except KafkaException:
            pending = -1
        self.metrics.set_pending_records(pending)

    def commit_state(self) -> None:
        """Store the next offset per partition and commit the key state (durable stores: atomically)."""
        for tp in self._dirty_positions:
            self.store.put_meta(f"offset:{tp[0]}:{tp[1]}", str(self._positions[tp]).encode())
        self._dirty_positions.clear()
        self.store.commit()

    def read_all(self, timeout_s: float = 30.0, idle_timeout_s: float | None = None) -> list[ChangelogRow]:
        """Poll until the bounded end is reached (or, unbounded, until ``idle_timeout_s`` passes
        without a row) and return every row. Raises SourceError if ``timeout_s`` elapses first."""
        deadline = time.monotonic() + timeout_s
        rows: list[ChangelogRow] = []
        last_row = time.monotonic()
        while not self.is_bounded_end_reached():
            got = self.poll(0.2)
            rows.extend(got)
            now = time.monotonic()
            if got:
                last_row = now
            elif idle_timeout_s is not None and now - last_row >= idle_timeout_s:
                break
            if now > deadline:
                raise SourceError(f"did not reach the end of {self._topic_label()} within {timeout_s} s")
        return rows
