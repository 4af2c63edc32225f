"""ReducingBuffer.add_many and emit_batch: the same records, in the same order, at the same
flushes as add() one by one with emit()."""

from __future__ import annotations

import random

from changelake.changelog.rowkind import RowKind
from changelake.connectors.upsert_kafka.buffer import ReducingBuffer


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_add_many_with_emit_batch_equals_add_with_emit() -> None:
    rnd = random.Random(4)
    kinds = list(RowKind)
    items = [(rnd.randrange(30), rnd.choice(kinds), i) for i in range(3000)]
    ticks = [rnd.random() < 0.01 for _ in items]

    one_clock, one_out = Clock(), []
    one = ReducingBuffer(lambda k, p: one_out.append((k, p)), 50, 1000, clock=one_clock)
    many_clock, flushes = Clock(), []
    many = ReducingBuffer(lambda k, p: None, 50, 1000, clock=many_clock, emit_batch=flushes.append)

    flush_sizes_one = []
    last = 0
    for (key, kind, payload), tick in zip(items, ticks):
        if tick:
            one_clock.t += 1.5  # the interval passes: the next add flushes
        one.add(key, kind, payload)
        if len(one_out) != last:
            flush_sizes_one.append(len(one_out) - last)
            last = len(one_out)
    one.flush()
    if len(one_out) != last:
        flush_sizes_one.append(len(one_out) - last)

    chunk: list[tuple[int, RowKind, int]] = []
    for item, tick in zip(items, ticks):
        if tick:
            many.add_many(chunk)
            chunk = []
            many_clock.t += 1.5
        chunk.append(item)
    many.add_many(chunk)
    many.flush()

    assert [kp for f in flushes for kp in f] == one_out
    assert [len(f) for f in flushes] == flush_sizes_one
    assert {k for k, _ in one_out} == {RowKind.UPDATE_AFTER, RowKind.DELETE}
