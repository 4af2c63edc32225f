"""Pure logic of the incremental snapshot: chunk splitting, chunk marks, the high-watermark
binlog filter (Flink CDC's ``shouldEmit``), and its options (no server)."""

from __future__ import annotations

import bisect
import decimal
import json
from datetime import datetime

import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.mysql_cdc import validate_options
from changelake.connectors.mysql_cdc.snapshot.chunks import Chunk, ChunkSplitter, distribution_factor
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SourcePosition
from changelake.connectors.mysql_cdc.snapshot.watermarks import (
    ChunkMark,
    TableMarks,
    WatermarkFilter,
    decode_value,
    encode_value,
    hw_reached,
    marks_from_json,
)

BASE = {"hostname": "db.example", "username": "cdc", "password": "pw", "tables": "shop.\\.*"}


class ListQueries:
    """ChunkQueries over a sorted in-memory list of chunk key values (counts the queries)."""

    def __init__(self, keys: list, approx: int | None = None) -> None:
        self.keys = sorted(keys)
        self.approx = len(keys) if approx is None else approx
        self.calls = 0

    def min_max(self, start):
        ks = [k for k in self.keys if start is None or k >= start]
        return (ks[0], ks[-1]) if ks else (None, None)

    def approximate_row_count(self):
        return self.approx

    def next_chunk_max(self, start, size):
        self.calls += 1
        i = bisect.bisect_left(self.keys, start)
        window = self.keys[i:i + size]
        return window[-1] if window else None

    def min_greater(self, value):
        self.calls += 1
        i = bisect.bisect_right(self.keys, value)
        return self.keys[i] if i < len(self.keys) else None


def _covers_once(chunks: list[Chunk], keys: list) -> None:
    """Every key lies in exactly one chunk; the first starts unbounded, the last ends unbounded."""
    assert chunks[0].start is None and chunks[-1].end is None
    for k in keys:
        assert sum(c.contains((k,)) for c in chunks) == 1, k
    for a, b in zip(chunks, chunks[1:]):
        assert b.start == (a.end,) and b.start_inclusive


# -- splitter --------------------------------------------------------------------------------------
def test_dense_integer_keys_are_split_evenly_with_boundary_queries_only_for_the_tail():
    keys = list(range(1, 10_001))
    q = ListQueries(keys)
    chunks = list(ChunkSplitter(1000).split("d.t", q, integral=True))
    assert q.calls == 1  # the last chunk's MAX query
    assert [c.end for c in chunks[:3]] == [1001, 2001, 3001] and len(chunks) == 10
    _covers_once(chunks, keys + [0, -5, 10_001, 10**9])  # rows inserted outside [min, max] too


def test_sparse_keys_within_the_bounds_get_a_wider_even_step():
    keys = list(range(7, 7 * 2000 + 1, 7))  # factor 7
    chunks = list(ChunkSplitter(100).split("d.t", ListQueries(keys), integral=True))
    step = int(100 * distribution_factor(7, 14000, 2000))  # factor 6.997: ~100 rows per chunk
    assert step == 699 and chunks[0].end == 7 + step and len(chunks) in (20, 21)
    _covers_once(chunks, keys)


def test_keys_beyond_the_upper_bound_are_split_by_queries_into_chunk_size_runs():
    keys = list(range(1, 501)) + list(range(10**12, 10**12 + 500))
    q = ListQueries(keys)
    chunks = list(ChunkSplitter(100, upper_bound=1000.0).split("d.t", q, integral=True))
    assert distribution_factor(1, 10**12 + 499, 1000) > 1000
    assert q.calls > 0 and 9 <= len(chunks) <= 11
    sizes = [sum(c.contains((k,)) for k in keys) for c in chunks]
    assert max(sizes) <= 100
    _covers_once(chunks, keys)


def test_a_factor_below_the_lower_bound_is_split_by_queries():
    keys = [1] * 50 + [2] * 50 + list(range(3, 103))  # first pk column of a composite key: repeats
    q = ListQueries(keys)
    chunks = list(ChunkSplitter(40, lower_bound=0.9).split("d.t", q, integral=True))
    assert q.calls > 0
    _covers_once(chunks, sorted(set(keys)))
    # a run of equal chunk keys longer than the chunk size stays in one chunk
    assert sum(c.contains((1,)) for c in chunks) == 1


class GrowingQueries(ListQueries):
    """Rows are inserted above the max right after the split read MIN/MAX (a writer during the snapshot)."""

    def __init__(self, keys: list, inserted: list) -> None:
        super().__init__(keys)
        self.inserted = inserted

    def min_max(self, start):
        out = super().min_max(start)
        self.keys = sorted(self.keys + self.inserted)
        self.inserted = []
        return out


@pytest.mark.parametrize("keys", [list(range(1, 1001)), list(range(1, 1001)) + [10**12]])  # even, by query
def test_rows_inserted_above_the_max_during_the_split_do_not_pile_up_in_the_last_chunk(keys):
    q = GrowingQueries(keys, list(range(2 * 10**12, 2 * 10**12 + 550)))
    chunks = list(ChunkSplitter(100).split("d.t", q, integral=True))
    everything = q.keys
    sizes = [sum(c.contains((k,)) for k in everything) for c in chunks]
    assert sum(sizes) == len(everything) == len(keys) + 550
    assert max(sizes) <= 101 and sizes[-1] <= 100, sizes
    _covers_once(chunks, everything)


def test_decimal_keys_are_split_by_queries():
    keys = [decimal.Decimal(i) / 4 for i in range(1, 301)]
    chunks = list(ChunkSplitter(50).split("d.t", ListQueries(keys), integral=False))
    assert 5 <= len(chunks) <= 7
    _covers_once(chunks, keys)


def test_empty_table_and_small_table_are_one_unbounded_chunk():
    assert list(ChunkSplitter(10).split("d.t", ListQueries([]), integral=True)) == [Chunk("d.t", 0, None, True, None)]
    assert [c.end for c in ChunkSplitter(10).split("d.t", ListQueries([1, 2, 3]), integral=True)] == [None]


def test_resume_after_a_row_inside_a_chunk_excludes_the_rows_up_to_it():
    keys = list(range(1, 101))
    chunks = list(ChunkSplitter(30).split("d.t", ListQueries(keys), integral=True, start=(40, "b"), start_inclusive=False))
    first = chunks[0]
    assert first.start == (40, "b") and not first.start_inclusive
    assert not first.contains((40, "a")) and not first.contains((40, "b")) and first.contains((40, "c"))
    assert not first.contains((39, "z")) and first.contains((41, "a"))
    assert chunks[-1].end is None


# -- marks -----------------------------------------------------------------------------------------
HW1, HW2, HW3 = BinlogPosition("mysql-bin.000001", 500), BinlogPosition("mysql-bin.000001", 900), BinlogPosition("mysql-bin.000002", 4)


def test_marks_find_the_chunk_of_a_key_and_merge_adjacent_chunks_of_one_hw():
    m = TableMarks(["a", "b"])
    m.append(ChunkMark((10,), False, HW1))
    m.append(ChunkMark((20,), False, HW1))  # same hw: merged
    assert len(m.marks) == 1 and m.marks[0].end == (20,)
    m.append(ChunkMark((25, "k"), True, HW2))  # emitted part-way to (25, "k")
    m.append(ChunkMark(None, False, HW3))
    assert m.finished
    assert m.find((5, "x")).hw == HW1 and m.find((19, "z")).hw == HW1
    assert m.find((20, "a")).hw == HW2 and m.find((25, "k")).hw == HW2
    assert m.find((25, "l")).hw == HW3 and m.find((10**9, "a")).hw == HW3


def test_exclusive_mark_of_a_single_column_key_excludes_its_end():
    m = TableMarks(["id"], [ChunkMark((10,), False, HW1)])
    assert m.find((9,)).hw == HW1 and m.find((10,)) is None
    assert m.resume_start() == ((10,), True)
    m2 = TableMarks(["id"], [ChunkMark((10,), True, HW1)])
    assert m2.find((10,)).hw == HW1 and m2.resume_start() == ((10,), False)


def test_marks_and_values_round_trip_through_json():
    values = [1, "s", decimal.Decimal("1.50"), b"\x00\xff", datetime(2024, 1, 2, 3, 4, 5, 6), True]
    assert [decode_value(json.loads(json.dumps(encode_value(v)))) for v in values] == values
    m = TableMarks(["id", "k"], [ChunkMark((decimal.Decimal("2.5"), b"\x01"), True, HW1), ChunkMark(None, False, HW2)])
    back = marks_from_json(json.loads(json.dumps({"d.t": m.to_json()})))["d.t"]
    assert back.marks == m.marks and back.key_columns == ("id", "k")
    pos = SourcePosition(HW1, None, (), {"d.t": m.to_json()})
    assert SourcePosition.from_dict(json.loads(json.dumps(pos.to_dict()))).watermarks == pos.watermarks


# -- shouldEmit ------------------------------------------------------------------------------------
T = TableId("d", "t")


def _ev(op: Op, pos: BinlogPosition, before: int | None = None, after: int | None = None) -> DataChangeEvent:
    return DataChangeEvent(T, op, {"id": before, "v": 0} if before is not None else None,
                           {"id": after, "v": 1} if after is not None else None, None, 1,
                           {"phase": "binlog", "file": pos.file, "pos": pos.pos, "row": 1})


def _filter() -> WatermarkFilter:
    # keys < 100 read at HW1, keys >= 100 read at HW2 (a later chunk)
    return WatermarkFilter({"d.t": TableMarks(["id"], [ChunkMark((100,), False, HW1), ChunkMark(None, False, HW2)])})


def test_a_change_is_emitted_only_after_the_high_watermark_of_its_chunk():
    f = _filter()
    assert f.min_hw == HW1 and f.max_hw == HW2
    between = BinlogPosition("mysql-bin.000001", 700)
    assert f.apply(_ev(Op.CREATE, between, after=5)) != []  # chunk 1 was read before it
    assert f.apply(_ev(Op.CREATE, between, after=150)) == []  # chunk 2 already holds it
    assert f.apply(_ev(Op.DELETE, between, before=150)) == []
    assert f.apply(_ev(Op.CREATE, HW1, after=5)) != []  # a transaction starting at the hw is after it
    other = DataChangeEvent(TableId("d", "other"), Op.CREATE, None, {"id": 150}, None, 1, {"file": between.file, "pos": 700})
    assert f.apply(other) == [other]  # not snapshotted: always emitted


def test_an_update_moving_its_row_between_chunks_emits_only_the_new_half():
    f = _filter()
    between = BinlogPosition("mysql-bin.000001", 700)
    (half,) = f.apply(_ev(Op.UPDATE, between, before=150, after=5))  # old row in chunk 2 (read later)
    assert half.op is Op.CREATE and half.before is None and half.after["id"] == 5
    (half,) = f.apply(_ev(Op.UPDATE, between, before=5, after=150))
    assert half.op is Op.DELETE and half.after is None and half.before["id"] == 5
    assert f.apply(_ev(Op.UPDATE, between, before=150, after=151)) == []
    assert f.apply(_ev(Op.UPDATE, between, before=5, after=6))[0].op is Op.UPDATE


def test_before_the_smallest_hw_nothing_and_past_the_largest_everything_is_emitted():
    f = _filter()
    early = BinlogPosition("mysql-bin.000001", 100)
    assert f.apply(_ev(Op.CREATE, early, after=5)) == [] and f.apply(_ev(Op.CREATE, early, after=500)) == []
    assert f.active
    assert f.apply(_ev(Op.CREATE, HW3, after=500)) != []
    assert not f.active  # switched off for good
    assert f.apply(_ev(Op.CREATE, early, after=500)) != []


def _truncate(pos: BinlogPosition, table: TableId = T) -> DataChangeEvent:
    return DataChangeEvent(table, Op.TRUNCATE, None, None, None, 1, {"phase": "binlog", "file": pos.file, "pos": pos.pos, "row": 0})


def _state(events: list[DataChangeEvent]) -> set[int]:
    keys: set[int] = set()
    for e in events:
        if e.op is Op.TRUNCATE:
            keys.clear()
        if e.before is not None:
            keys.discard(e.before["id"])
        if e.after is not None:
            keys.add(e.after["id"])
    return keys


def test_a_truncate_between_two_chunks_keeps_the_rows_written_after_it():
    # chunk 1 (keys < 100) read at HW1 (500), truncate at 700, inserts of 5 and 150 at 750, chunk 2 read at HW2 (900)
    f, at = _filter(), BinlogPosition("mysql-bin.000001", 700)
    after = BinlogPosition("mysql-bin.000001", 750)
    snapshot = [_ev(Op.READ, HW1, after=1), _ev(Op.READ, HW2, after=150)]  # chunk 2 saw only 150 (after the truncate)
    replayed = [_ev(Op.CREATE, BinlogPosition("mysql-bin.000001", 650), after=2), _truncate(at),
                _ev(Op.CREATE, after, after=5), _ev(Op.CREATE, after, after=150)]
    out = snapshot + [e for ev in replayed for e in f.apply(ev)]
    assert [e.op for e in out].count(Op.TRUNCATE) == 1
    assert _state(out) == {5, 150}  # MySQL: 5 and 150 inserted after the truncate
    assert "d.t" not in f.to_json()  # a restart after the truncate emits every later change of the table too


def test_a_truncate_before_every_chunk_is_dropped_and_one_after_every_chunk_is_emitted():
    f = _filter()
    assert f.apply(_truncate(BinlogPosition("mysql-bin.000001", 100))) == []  # every chunk shows the table after it
    assert "d.t" in f.to_json()
    late = _truncate(BinlogPosition("mysql-bin.000001", 850))  # before HW2 only; another table's marks stay
    g = WatermarkFilter({**_filter().tables, "d.o": TableMarks(["id"], [ChunkMark(None, False, HW2)])})
    assert g.apply(late) == [late] and list(g.to_json()) == ["d.o"] and g.active
    assert g.apply(_ev(Op.CREATE, BinlogPosition("mysql-bin.000001", 860), after=150)) != []  # d.t: all emitted now


def test_progress_past_the_largest_hw_switches_the_filter_off():
    f = _filter()
    assert not f.passed("mysql-bin.000001", 800) and f.active
    assert f.passed("mysql-bin.000001", 900) and not f.active
    assert hw_reached(BinlogPosition("mysql-bin.000002", 4), BinlogPosition("mysql-bin.000001", 10**9))


# -- options ---------------------------------------------------------------------------------------
def test_incremental_snapshot_options_with_flink_names_and_defaults():
    opts = validate_options(BASE)
    assert opts.incremental_snapshot_enabled is False  # see the option's doc: MariaDB's consistent snapshot stays the default
    assert (opts.chunk_key_factor_upper_bound, opts.chunk_key_factor_lower_bound) == (1000.0, 0.05)
    assert opts.snapshot_parallelism() == 1
    opts = validate_options({**BASE, "scan.incremental.snapshot.enabled": "true", "server-id": "5400-5403",
                             "chunk-key.even-distribution.factor.upper-bound": "50",
                             "chunk-key.even-distribution.factor.lower-bound": "0.5"})
    assert opts.incremental_snapshot_enabled and opts.snapshot_parallelism() == 4
    assert (opts.chunk_key_factor_upper_bound, opts.chunk_key_factor_lower_bound) == (50.0, 0.5)


@pytest.mark.parametrize("key,value,message", [
    ("chunk-key.even-distribution.factor.upper-bound", "x", "Could not parse value 'x'"),
    ("chunk-key.even-distribution.factor.lower-bound", "-1", "must be a positive number"),
    ("chunk-key.even-distribution.factor.lower-bound", "2000", "must not be larger than"),
    ("scan.incremental.snapshot.enabled", "maybe", "scan.incremental.snapshot.enabled"),
])
def test_bad_incremental_snapshot_options_name_the_key(key, value, message):
    with pytest.raises(OptionValidationError, match=message) as err:
        validate_options({**BASE, key: value})
    assert err.value.option == key
