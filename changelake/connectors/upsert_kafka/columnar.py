"""The upsert-kafka source on the columnar lane: a poll's records as :class:`ChangeBatch`es (Arrow).

:meth:`UpsertKafkaSource.poll_batches
<changelake.connectors.upsert_kafka.source.UpsertKafkaSource.poll_batches>` gives the same
changelog as :meth:`~changelake.connectors.upsert_kafka.source.UpsertKafkaSource.poll` (Flink's
upsert-kafka source and its ``ChangelogNormalize``: ``+I`` for a new key, ``+U`` (after ``-U`` of
the previous row with ``scan.changelog-mode = retract``) for a known key whose row changed,
nothing for the same state bytes, ``-D`` with the previous row for a tombstone of a live key,
nothing for a tombstone of an unknown key), the same key state and positions, as Arrow batches
instead of one :class:`~changelake.changelog.row.ChangelogRow` per row:

1. the poll's keys are decoded in one call (the source's key cache: once per distinct key bytes);
2. a first pass over the records, on bytes only, replays the normalization per key (each
   distinct key's stored state read once) and notes which row image each output row is and
   which stored previous rows are needed;
3. the poll's values and those previous rows are decoded in ONE call of pyarrow's JSON reader
   with an explicit schema (:meth:`JsonFormat.decode_columns
   <changelake.formats.json.JsonFormat.decode_columns>`);
4. the updates the first pass took as changes (different state bytes) are checked in Arrow
   (column by column equality, null equal to null): a row equal to its previous one emits
   nothing in ``ChangelogNormalize``;
5. the output is ``take`` of the decoded images; the state is written once per distinct key.

The per-record path (:meth:`UpsertKafkaSource._poll_messages`) takes the WHOLE poll, before any
state is touched, when this one cannot decide it with certainty: a null key (``scan.null-key.mode``),
a key or value the batch decoders refuse (so a corrupt record raises the same DecodeError with
topic, partition and offset, or is dropped by ``ignore-parse-errors``), a Kafka error, a stored
state not written by this source, an update whose row equals the previous one with other bytes;
its rows are then turned into batches. The columnar decode itself is taken only with a
:class:`~changelake.changelog.state.MemoryKeyStateStore` (sqlite state stays on the per-record
path, its rows converted), json key and value, ``value.fields-include = ALL`` and no
FLOAT/DOUBLE column (equal bytes are then equal rows).
"""

from __future__ import annotations

import struct
from typing import Any, Iterator, cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError

from changelake.changelog.change_batch import ChangeBatch, op_counts
from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.normalize import ENCODED_STATE_MARK
from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import TableId

__all__ = ["poll_batches", "events_of"]

TP = tuple[str, int]

_STATE_KEY_LEN = struct.Struct(">I")
_KINDS = pa.array(["+I", "-U", "+U", "-D"], pa.string())
_I, _UB, _UA, _D = 0, 1, 2, 3
#: a key whose stored state the first pass has not read yet (see _plan)
_UNSEEN: list[Any] = []

#: ``source`` below is the UpsertKafkaSource (typed Any: it imports this module)


class _Scan:
    """The consumed messages sorted out as the per-record path does: the records it processes
    (``messages``, with their ``tps`` (topic, partition) and ``offsets``), the partition-EOF
    events, the records past a bounded end, and whether a Kafka error is among them."""

    def __init__(self, source: Any, messages: list[Any]) -> None:
        self.eofs: list[tuple[TP, int]] = []
        self.past_end: list[tuple[TP, int]] = []
        self.error = False
        errors = [msg.error() for msg in messages]
        tps: list[TP] = list(zip([str(m.topic()) for m in messages], [int(m.partition() or 0) for m in messages]))
        offsets: list[int] = [int(m.offset() or 0) for m in messages]
        ends = source._ends
        done = source._done
        if all(e is None for e in errors) and (ends is None or all(  # (a KafkaError cannot be compared with None)
            tp not in done and offset < ends.get(tp, 0)
            # the last offset of each partition (ascending within one): none past its end
            for tp, offset in dict(zip(tps, offsets)).items()
        )):
            self.messages, self.tps, self.offsets = messages, tps, offsets
            return
        self.messages, self.tps, self.offsets = [], [], []
        for msg, err, tp, offset in zip(messages, errors, tps, offsets):
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self.eofs.append((tp, offset))
                    continue
                self.error = True
                return
            # a record past its partition's end (or of a partition done before the poll); the
            # per-record path's done-during-the-poll is the same test, offsets ascending
            if ends is not None and (tp in done or offset >= ends.get(tp, 0)):
                self.past_end.append((tp, offset))
                continue
            self.messages.append(msg)
            self.tps.append(tp)
            self.offsets.append(offset)

    def timestamp(self, j: int) -> int | None:
        """The timestamp (ms) of live record ``j``, None when it has none (as the per-record path)."""
        ts_type, ts = self.messages[j].timestamp()
        return ts if ts_type and ts > 0 else None

    def runs(self) -> Iterator[tuple[int, int]]:
        """``(start, stop)`` of each run of consecutive live records of one partition."""
        tps = self.tps
        n = len(tps)
        if n and tps[0] == tps[-1] and tps.count(tps[0]) == n:
            yield 0, n
            return
        start = 0
        for j in range(1, n + 1):
            if j == n or tps[j] != tps[start]:
                yield start, j
                start = j


def poll_batches(source: Any, consumer: Any, messages: list[Any]) -> list[ChangeBatch]:
    """The changelog of ``messages`` as batches, one per run of one partition (see the module
    docstring); the key state, positions, metrics and state commit as :meth:`UpsertKafkaSource.poll`."""
    scan = _Scan(source, messages)
    planned = None if scan.error or not source.change_batches else _plan(source, scan)
    if planned is None:
        source.record_path_polls += 1
        rows = source._poll_messages(consumer, messages)
        return _batches_of_rows(source, scan, rows)
    source.columnar_polls += 1
    table, out_img, out_kind, out_rec, writes, nbytes = planned
    data = source.store.data()  # a MemoryKeyStateStore (change_batches)
    cache = source._row_cache
    assert cache is not None
    mark, pack = ENCODED_STATE_MARK, _STATE_KEY_LEN.pack
    for sk, held in writes.items():
        if held is None:
            data.pop(sk, None)
        else:
            data[sk] = mark + pack(len(held[1])) + held[1] + held[2]
    if cache:  # their row tuples no longer match the state (the row path decodes)
        for sk in writes:
            cache.pop(sk, None)
    ends = source._ends
    for tp, offset in scan.eofs:
        source._advance(tp, offset)
        source._check_end(consumer, tp, offset)
    for tp, offset in scan.past_end:
        source._check_end(consumer, tp, offset)
    for start, stop in scan.runs():
        tp, next_offset = scan.tps[start], scan.offsets[stop - 1] + 1
        source._advance(tp, next_offset)
        if ends is not None and next_offset >= ends.get(tp, 0):
            source._check_end(consumer, tp, next_offset)
    n = len(scan.messages)
    source.metrics.record_fetch(n, nbytes, scan.timestamp(n - 1) if n else None)
    seen = -1
    for j in reversed(out_rec):
        if j == seen:
            continue
        seen = j
        emitted_ts = scan.timestamp(j)
        if emitted_ts is not None:
            source.metrics.record_emit(emitted_ts)
            break
    source._update_pending(consumer)
    if source.commit_state_every_poll:
        source.commit_state()
    rows = table.take(pa.array(out_img, pa.int64())) if out_img else table.slice(0, 0)
    kinds = _KINDS.take(pa.array(out_kind, pa.int8()))
    record_offsets = scan.offsets
    offsets = pa.array([record_offsets[j] for j in out_rec], pa.int64())
    return _split(source, scan, rows, kinds, offsets, out_rec)


def _plan(
    source: Any, scan: _Scan,
) -> tuple[pa.Table, list[int], list[int], list[int], dict[bytes, list[Any] | None], int] | None:
    """Steps 1-4 of the module docstring, without touching the state: (decoded images, image
    index / kind / live record of each output row, the final state per written key: ``[image,
    key bytes, value bytes, written]`` or None for deleted, the key and value bytes read), or None
    for the per-record path."""
    keys: list[bytes | None] = [m.key() for m in scan.messages]
    if None in keys:
        return None
    decoded = source._decode_key_batch(keys)
    if decoded is None:
        return None
    state_keys = decoded[1]
    if None in state_keys:
        return None
    values: list[bytes | None] = [m.value() for m in scan.messages]
    present = [v for v in values if v is not None]
    n_values = len(present)
    store_get = source.store.data().get
    mark = ENCODED_STATE_MARK
    unpack = _STATE_KEY_LEN.unpack_from
    retract = source.normalizer.generate_update_before
    held_of: dict[bytes, list[Any] | None] = {}
    stored: list[bytes] = []  # previous rows to decode, after the poll's values
    out_img: list[int] = []
    out_kind: list[int] = []
    out_rec: list[int] = []
    new_idx: list[int] = []
    old_idx: list[int] = []
    vi = 0
    held: list[Any] | None
    for j, (sk, key, value) in enumerate(zip(cast("list[bytes]", state_keys), cast("list[bytes]", keys), values)):
        held = held_of.get(sk, _UNSEEN)
        if held is _UNSEEN:
            raw = store_get(sk)
            if raw is None:
                held = None
            elif raw[:1] != mark:
                return None  # a state this source's batch path did not write: the row path decodes it
            else:
                (key_len,) = unpack(raw, 1)
                held = [-1, raw[5 : 5 + key_len], raw[5 + key_len :], False]
        if value is None:
            if held is not None:
                if held[0] < 0:
                    held[0] = n_values + len(stored)
                    stored.append(held[2])
                out_img.append(held[0])
                out_kind.append(_D)
                out_rec.append(j)
            held_of[sk] = None
            continue
        image = vi
        vi += 1
        if held is None:
            out_img.append(image)
            out_kind.append(_I)
            out_rec.append(j)
        elif held[1] == key and held[2] == value:
            held_of[sk] = held
            continue  # the same state bytes: nothing (ChangelogNormalize)
        else:
            if held[0] < 0:
                held[0] = n_values + len(stored)
                stored.append(held[2])
            new_idx.append(image)
            old_idx.append(held[0])
            if retract:
                out_img.append(held[0])
                out_kind.append(_UB)
                out_rec.append(j)
            out_img.append(image)
            out_kind.append(_UA)
            out_rec.append(j)
        held_of[sk] = [image, key, value, True]
    decode_columns = getattr(source._value_format, "decode_columns")
    table = decode_columns(present + stored) if present or stored else None
    if table is None:
        return None
    if new_idx and _any_equal_rows(table, new_idx, old_idx):
        return None  # an update equal to its previous row with other bytes: the row path decides
    writes = {sk: held for sk, held in held_of.items() if held is None or held[3]}
    nbytes = sum(map(len, cast("list[bytes]", keys))) + sum(map(len, present))
    return table, out_img, out_kind, out_rec, writes, nbytes


def _any_equal_rows(table: pa.Table, new_idx: list[int], old_idx: list[int]) -> bool:
    """True when some row ``new_idx[k]`` of ``table`` equals row ``old_idx[k]`` in every column
    (null equal to null, as Python's ``None == None``)."""
    new, old = table.take(pa.array(new_idx, pa.int64())), table.take(pa.array(old_idx, pa.int64()))
    same: Any = None
    for a, b in zip(new.columns, old.columns):
        eq = pc.or_kleene(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        same = eq if same is None else pc.and_(same, eq)
        if not pc.any(same).as_py():
            return False
    return same is not None and bool(pc.any(same).as_py())


def _table_id(topic: str) -> TableId:
    return TableId(None, topic)


def _split(
    source: Any, scan: _Scan, rows: pa.Table, kinds: pa.Array, offsets: pa.Array, out_rec: list[int],
) -> list[ChangeBatch]:
    """One :class:`ChangeBatch` per run of one partition of the live records (``out_rec``: the live
    record of each row, ascending)."""
    batches: list[ChangeBatch] = []
    at = 0
    for start, stop in scan.runs():
        end = at
        while end < len(out_rec) and out_rec[end] < stop:
            end += 1
        tp = scan.tps[start]
        part_rows, part_kinds = rows.slice(at, end - at), kinds.slice(at, end - at)
        batch = ChangeBatch(
            table=_table_id(tp[0]), schema=source.schema, rows=part_rows, kinds=part_kinds,
            offsets=offsets.slice(at, end - at), topic=tp[0], partition=tp[1], records=stop - start,
            last_offset=scan.offsets[stop - 1], fallback=lambda: [], ops=op_counts(part_kinds),
        )
        batches.append(_with_fallback(batch))
        at = end
    return batches


def _with_fallback(batch: ChangeBatch) -> ChangeBatch:
    object.__setattr__(batch, "fallback", lambda: events_of(batch))
    return batch


def _batches_of_rows(source: Any, scan: _Scan, rows: list[ChangelogRow]) -> list[ChangeBatch]:
    """The per-record path's ``rows`` as batches (their metadata gives topic, partition, offset)."""
    schema = source._batch_schema
    if schema is None:
        from changelake.connectors.errors import ConnectorError

        raise ConnectorError(f"table columns {source.schema.names} have no columnar (Arrow) type: use poll()")
    position = {(tp, offset): j for j, (tp, offset) in enumerate(zip(scan.tps, scan.offsets))}
    out_rec = [position[((r.metadata["topic"], r.metadata["partition"]), r.metadata["offset"])] for r in rows]
    table = pa.Table.from_pylist([r.values for r in rows], schema=schema)
    kinds = pa.array([r.kind.short_string for r in rows], pa.string())
    offsets = pa.array([r.metadata["offset"] for r in rows], pa.int64())
    return _split(source, scan, table, kinds, offsets, out_rec)


def events_of(batch: ChangeBatch) -> list[DataChangeEvent]:
    """The batch's rows as change events (``+I`` -> c, ``-U``/``+U`` -> u, ``-D`` -> d), each with
    ``position`` ``{"topic", "partition", "offset"}``: :attr:`ChangeBatch.fallback` of this source."""
    rows = batch.rows.to_pylist()
    kinds = batch.kinds.to_pylist()
    offsets = batch.offsets.to_pylist()
    out: list[DataChangeEvent] = []
    before: dict[str, Any] | None = None
    for row, kind, offset in zip(rows, kinds, offsets):
        position = {"topic": batch.topic, "partition": batch.partition, "offset": offset}
        if kind == "-U":
            before = row
            continue
        if kind == "+I":
            out.append(DataChangeEvent(batch.table, Op.CREATE, None, row, batch.schema, position=position))
        elif kind == "+U":
            out.append(DataChangeEvent(batch.table, Op.UPDATE, before, row, batch.schema, position=position))
        else:
            out.append(DataChangeEvent(batch.table, Op.DELETE, row, None, batch.schema, position=position))
        before = None
    return out
