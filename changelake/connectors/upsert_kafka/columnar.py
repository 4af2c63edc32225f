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
2. the normalization is replayed in Arrow, not per record: each record's state bytes (as the
   per-record path writes them: :func:`_state_bytes`), its previous record of the same key in
   the poll (a sort by key and offset), else the key's stored state (read once per distinct key);
   the kind of each record follows from the previous and the new state bytes;
3. the poll's values are decoded in ONE call of pyarrow's JSON reader with an explicit schema
   (:meth:`JsonFormat.decode_columns <changelake.formats.json.JsonFormat.decode_columns>`); the
   stored previous rows come decoded from :class:`ArrowState` (the rows this lane wrote, checked
   against the store's bytes), and only those it does not hold (a restart, a state the
   per-record path wrote) are read from their bytes in the same call;
4. the updates taken as changes (different state bytes) are checked in Arrow (column by column
   equality, null equal to null): a row equal to its previous one emits nothing in
   ``ChangelogNormalize``;
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
from bisect import bisect_left
from typing import Any, Iterator, cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError

from changelake.changelog.change_batch import ChangeBatch, op_counts
from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.normalize import ENCODED_STATE_MARK
from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import TableId

__all__ = ["poll_batches", "events_of", "ArrowState"]

TP = tuple[str, int]

_STATE_KEY_LEN = struct.Struct(">I")
_KINDS = pa.array(["+I", "-U", "+U", "-D"], pa.string())
_I, _UB, _UA, _D = 0, 1, 2, 3
#: chunks of the ArrowState table before they are combined into one
_MAX_CHUNKS = 8

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
        if ends is None and errors.count(None) == len(errors):
            self.messages, self.tps, self.offsets = messages, tps, offsets
            return
        done = source._done
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
    data = source.store.data()  # a MemoryKeyStateStore (change_batches)
    data.update(zip(planned.live_keys, planned.live_states))
    for sk in planned.dead_keys:
        data.pop(sk, None)
    cache = source._row_cache
    assert cache is not None
    if cache:  # its row tuples no longer match the state (the row path decodes)
        for sk in planned.live_keys:
            cache.pop(sk, None)
        for sk in planned.dead_keys:
            cache.pop(sk, None)
    source._arrow_state.add(planned.live_keys, planned.live_rows, planned.dead_keys)
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
    source.metrics.record_fetch(n, planned.nbytes, scan.timestamp(n - 1) if n else None)
    out_rec = _ints(planned.out_rec)
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
    rows = planned.images.take(planned.out_img)
    kinds = _KINDS.take(planned.out_kind)
    offsets = pa.array(scan.offsets, pa.int64()).take(planned.out_rec)
    return _split(source, scan, rows, kinds, offsets, out_rec)


class ArrowState:
    """The decoded rows of the memory key state (the previous rows a poll needs) in Arrow: a
    table of the rows this lane wrote, each with its state bytes (column ``__state``), and the
    row of each state key. A row counts only while its ``__state`` equals the store's bytes for
    the key: a state written otherwise (the per-record path, a store filled before the source
    opened) makes it stale, and that key's previous row is decoded from the store's bytes. Rows
    of replaced or deleted keys stay until :meth:`add` compacts the table (more than twice the
    live keys plus 4096 rows; more than 8 chunks are combined into one)."""

    def __init__(self) -> None:
        self.table: pa.Table | None = None
        self.row_of: dict[bytes, int] = {}

    def take(self, state_keys: list[bytes], raws: pa.Array) -> tuple[pa.Table | None, list[int]]:
        """The held rows of ``state_keys`` (whose store bytes are ``raws``: binary, same length)
        without ``__state``, and the positions in ``state_keys`` whose row it does not hold (or
        holds for other bytes): their rows in the returned table are not theirs."""
        table = self.table
        if table is None:
            return None, list(range(len(state_keys)))
        positions = list(map(self.row_of.get, state_keys))
        missing = [i for i, p in enumerate(positions) if p is None]
        for i in missing:
            positions[i] = 0
        rows = table.take(pa.array(positions, pa.int64()))
        stale = pc.invert(pc.fill_null(pc.equal(rows.column("__state"), raws), False))
        if pc.any(stale).as_py():
            missing = pc.indices_nonzero(stale).to_pylist()
        return rows.drop_columns(["__state"]), missing

    def add(self, state_keys: list[bytes], rows: pa.Table, deleted: list[bytes]) -> None:
        """Hold ``rows`` (the table's columns and ``__state``) as the rows of ``state_keys``;
        forget ``deleted``."""
        row_of = self.row_of
        for sk in deleted:
            row_of.pop(sk, None)
        table = self.table
        base = 0 if table is None else table.num_rows
        row_of.update(zip(state_keys, range(base, base + len(state_keys))))
        table = rows if table is None else pa.concat_tables([table, rows])
        if table.num_rows > 2 * len(row_of) + 4096:
            live = list(row_of.items())
            table = table.take(pa.array([p for _, p in live], pa.int64())).combine_chunks()
            self.row_of = {sk: i for i, (sk, _) in enumerate(live)}
        elif table.column(0).num_chunks > _MAX_CHUNKS:
            table = table.combine_chunks()  # a take over many chunks costs more than one copy
        self.table = table


class _Plan:
    """What :func:`_plan` decided for a poll, before anything is written: the decoded images
    (``images``), the image / kind / live record of each output row (``out_img``, ``out_kind``,
    ``out_rec``: Arrow arrays), the state bytes of each key live after the poll (``live_keys``,
    ``live_states``) and their rows with ``__state`` (``live_rows``), the keys deleted
    (``dead_keys``), and the key and value bytes read (``nbytes``)."""

    __slots__ = ("images", "out_img", "out_kind", "out_rec", "live_keys", "live_states", "live_rows",
                 "dead_keys", "nbytes")

    def __init__(self, images: pa.Table, out_img: pa.Array, out_kind: pa.Array, out_rec: pa.Array,
                 live_keys: list[bytes], live_states: list[bytes], live_rows: pa.Table, dead_keys: list[bytes],
                 nbytes: int) -> None:
        self.images, self.out_img, self.out_kind, self.out_rec = images, out_img, out_kind, out_rec
        self.live_keys, self.live_states, self.live_rows = live_keys, live_states, live_rows
        self.dead_keys, self.nbytes = dead_keys, nbytes


def _state_bytes(keys: pa.Array, values: pa.Array) -> pa.Array:
    """Per record, the state bytes the row path writes (``ENCODED_STATE_MARK``, the key's length
    as 4 bytes big-endian, the key, the value); null for a tombstone."""
    lengths = pc.binary_length(keys)
    distinct = pc.unique(lengths)
    heads = pa.array([ENCODED_STATE_MARK + _STATE_KEY_LEN.pack(n) for n in distinct.to_pylist()], pa.binary())
    head = heads.take(pc.index_in(lengths, value_set=distinct))
    return pc.binary_join_element_wise(head, keys, values, b"")


def _plan(source: Any, scan: _Scan) -> _Plan | None:
    """Steps 1-4 of the module docstring, in Arrow and without touching the state; None for the
    per-record path. Per record: its previous record of the same key in the poll (a stable sort
    by key), else the stored state; the kind follows from the previous and the new state bytes."""
    msgs = scan.messages
    keys: list[bytes | None] = [m.key() for m in msgs]
    if None in keys:
        return None
    decoded = source._decode_key_batch(keys)
    if decoded is None:
        return None
    state_keys = decoded[1]
    if None in state_keys:
        return None
    values: list[bytes | None] = [m.value() for m in msgs]
    n = len(keys)
    if not n:
        return None
    key_arr = pa.array(keys, pa.binary())
    val_arr = pa.array(values, pa.binary())
    encoded = pa.array(state_keys, pa.binary()).dictionary_encode()
    kid = pc.cast(encoded.indices, pa.int64())
    uniq = list(dict.fromkeys(cast("list[bytes]", state_keys)))  # first-appearance order, as ``distinct``
    raws: list[bytes | None] = list(map(source.store.data().get, uniq))
    raw_arr = pa.array(raws, pa.binary())
    if raw_arr.null_count < len(raw_arr) and not pc.all(pc.starts_with(raw_arr, pattern=ENCODED_STATE_MARK)).as_py():
        return None  # a state this source's batch path did not write: the row path decodes it
    new_state = _state_bytes(key_arr, val_arr)
    # the previous record of the same key: sort by (key, record), neighbours of one key
    rec = pa.array(range(n), pa.int64())
    order = pc.cast(pc.sort_indices(pc.add(pc.multiply(kid, n), rec)), pa.int64())
    sorted_kid = kid.take(order)
    same_key = pc.equal(sorted_kid.slice(1), sorted_kid.slice(0, n - 1))
    prev_sorted = pa.concat_arrays([pa.nulls(1, pa.int64()), pc.if_else(same_key, order.slice(0, n - 1), None)])
    prev = prev_sorted.take(pc.sort_indices(order))
    has_prev = pc.is_valid(prev)
    before = pa.concat_arrays([new_state, raw_arr]).take(pc.if_else(has_prev, prev, pc.add(kid, n)))
    tomb = pc.is_null(val_arr)
    live_before = pc.is_valid(before)
    same = pc.fill_null(pc.equal(before, new_state), False)
    del_m = pc.and_(tomb, live_before)
    ins_m = pc.and_(pc.invert(tomb), pc.invert(live_before))
    upd_m = pc.and_(pc.and_(pc.invert(tomb), live_before), pc.invert(same))
    own_img = pc.subtract(pc.cumulative_sum(pc.cast(pc.invert(tomb), pa.int64())), 1)
    present = [v for v in values if v is not None]
    n_present = len(present)
    # the stored previous rows needed: first records of a key that delete or update a live state
    need_m = pc.and_(pc.invert(has_prev), pc.or_(del_m, upd_m))
    need_rec = pc.indices_nonzero(need_m)
    need_kid = kid.take(need_rec)
    held: pa.Table | None = None
    missing: list[int] = []
    need_kids = _ints(need_kid)
    if need_kids:
        held, missing = source._arrow_state.take(list(map(uniq.__getitem__, need_kids)), raw_arr.take(need_kid))
    unpack = _STATE_KEY_LEN.unpack_from
    stored: list[bytes] = []
    for i in missing:
        raw = cast(bytes, raws[need_kids[i]])
        (key_len,) = unpack(raw, 1)
        stored.append(raw[5 + key_len:])
    decode_columns = getattr(source._value_format, "decode_columns")
    if present or stored:
        table = decode_columns(present + stored)
        if table is None:
            return None  # a value the batch decoder refuses: the row path raises or drops it
    else:  # tombstones only
        table = held.slice(0, 0) if held is not None else source._batch_schema.empty_table()
    images = table if held is None else pa.concat_tables([table, held.cast(table.schema)])
    base = n_present + len(stored)
    img_need = list(range(base, base + len(need_rec)))
    for r, i in enumerate(missing):
        img_need[i] = n_present + r
    before_img = own_img.take(prev)
    if img_need:
        rank = pc.max_element_wise(pc.subtract(pc.cumulative_sum(pc.cast(need_m, pa.int64())), 1), 0)
        before_img = pc.if_else(has_prev, before_img, pc.if_else(need_m, pa.array(img_need, pa.int64()).take(rank), None))
    if pc.any(upd_m).as_py() and _any_equal_rows(images, own_img.filter(upd_m), before_img.filter(upd_m)):
        return None  # an update equal to its previous row with other bytes: the row path decides
    main_m = pc.or_(del_m, pc.or_(ins_m, upd_m))
    main_rec = rec.filter(main_m)
    main_img = pc.if_else(del_m, before_img, own_img).filter(main_m)
    main_kind = pc.if_else(del_m, _D, pc.if_else(ins_m, _I, _UA)).filter(main_m)
    if source.normalizer.generate_update_before and pc.any(upd_m).as_py():
        ub_rec = rec.filter(upd_m)
        both = pa.concat_arrays([pc.multiply(ub_rec, 2), pc.add(pc.multiply(main_rec, 2), 1)])
        ordered = pc.sort_indices(both)
        out_rec = pa.concat_arrays([ub_rec, main_rec]).take(ordered)
        out_img = pa.concat_arrays([before_img.filter(upd_m), main_img]).take(ordered)
        out_kind = pa.concat_arrays([pa.array([_UB] * len(ub_rec), pa.int64()), main_kind]).take(ordered)
    else:
        out_rec, out_img, out_kind = main_rec, main_img, main_kind
    # the state after the poll: each key's last record
    last_sorted = pa.concat_arrays([pc.invert(same_key), pa.array([True])])
    last = order.filter(last_sorted)
    last_live = last.filter(pc.is_valid(val_arr.take(last)))
    last_dead = last.filter(pc.is_null(val_arr.take(last)))
    live_states = new_state.take(last_live)
    live_rows = images.take(own_img.take(last_live)).append_column("__state", live_states)
    nbytes = int(pc.sum(pc.binary_length(key_arr)).as_py() or 0) + int(pc.sum(pc.binary_length(val_arr)).as_py() or 0)
    return _Plan(images, out_img, pc.cast(out_kind, pa.int8()), out_rec,
                 list(map(uniq.__getitem__, _ints(kid.take(last_live)))),
                 live_states.to_numpy(zero_copy_only=False).tolist(), live_rows,
                 list(map(uniq.__getitem__, _ints(kid.take(last_dead)))), nbytes)


def _ints(arr: pa.Array) -> list[int]:
    """A null-free integer array as a list (through numpy: ``to_pylist`` builds a scalar per value)."""
    return cast("list[int]", arr.to_numpy(zero_copy_only=False).tolist())


def _any_equal_rows(table: pa.Table, new_idx: pa.Array, old_idx: pa.Array) -> bool:
    """True when some row ``new_idx[k]`` of ``table`` equals row ``old_idx[k]`` in every column
    (null equal to null, as Python's ``None == None``)."""
    new, old = table.take(new_idx), table.take(old_idx)
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
        end = bisect_left(out_rec, stop, at)
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
