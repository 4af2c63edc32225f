"""ReducingBuffer: Flink ReducingUpsertWriter rules, keys flushed in first-seen order."""

import pytest

from changelake.changelog import RowKind
from changelake.connectors.upsert_kafka.buffer import ReducingBuffer, normalize_kind


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def make(max_rows=10, interval_ms=1000):
    out = []
    clock = FakeClock()
    buf = ReducingBuffer(lambda kind, payload: out.append((str(kind), payload)), max_rows, interval_ms, clock=clock)
    return buf, out, clock


def test_latest_wins_per_key_and_first_seen_order():
    buf, out, _ = make()
    buf.add("b", RowKind.INSERT, "b1")
    buf.add("a", RowKind.INSERT, "a1")
    buf.add("b", RowKind.UPDATE_AFTER, "b2")
    assert out == [] and len(buf) == 2
    assert buf.flush() == 2
    assert out == [("+U", "b2"), ("+U", "a1")]
    assert len(buf) == 0


def test_insert_then_delete_writes_a_tombstone():
    buf, out, _ = make()
    buf.add("k", RowKind.INSERT, "v")
    buf.add("k", RowKind.DELETE, "tomb")
    buf.flush()
    assert out == [("-D", "tomb")]


def test_delete_then_insert_writes_only_the_value():
    buf, out, _ = make()
    buf.add("k", RowKind.DELETE, "tomb")
    buf.add("k", RowKind.INSERT, "v")
    buf.flush()
    assert out == [("+U", "v")]


def test_flush_when_distinct_keys_reach_max_rows():
    buf, out, _ = make(max_rows=2)
    buf.add("a", RowKind.INSERT, 1)
    buf.add("a", RowKind.INSERT, 2)  # same key: still one pending
    assert out == []
    buf.add("b", RowKind.INSERT, 3)
    assert out == [("+U", 2), ("+U", 3)]


def test_flush_when_interval_passes():
    buf, out, clock = make(interval_ms=500)
    buf.add("a", RowKind.INSERT, 1)
    clock.t += 0.4
    assert buf.flush_if_due() == 0
    clock.t += 0.1
    assert buf.due()
    assert buf.flush_if_due() == 1
    assert out == [("+U", 1)]
    # the interval restarts at each flush
    buf.add("b", RowKind.INSERT, 2)
    assert out == [("+U", 1)]
    clock.t += 0.6
    buf.add("c", RowKind.INSERT, 3)  # add also checks the timer
    assert out == [("+U", 1), ("+U", 2), ("+U", 3)]


def test_update_before_normalised_to_delete():
    assert normalize_kind(RowKind.UPDATE_BEFORE) is RowKind.DELETE
    assert normalize_kind(RowKind.INSERT) is RowKind.UPDATE_AFTER


def test_buffer_is_cleared_even_when_emit_fails():
    def boom(kind, payload):
        raise RuntimeError("down")

    buf = ReducingBuffer(boom, 10, 1000)
    buf.add("a", RowKind.INSERT, 1)
    with pytest.raises(RuntimeError):
        buf.flush()
    assert len(buf) == 0


def test_discard_drops_pending():
    buf, out, _ = make()
    buf.add("a", RowKind.INSERT, 1)
    assert buf.discard() == 1
    assert buf.flush() == 0 and out == []


@pytest.mark.parametrize("rows,interval", [(0, 100), (10, 0), (-1, 5)])
def test_requires_both_positive(rows, interval):
    with pytest.raises(ValueError):
        ReducingBuffer(lambda k, p: None, rows, interval)
