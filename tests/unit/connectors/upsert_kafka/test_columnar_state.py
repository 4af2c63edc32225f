"""The columnar lane's Arrow key state (:class:`changelake.connectors.upsert_kafka.columnar.ArrowState`)
and its state bytes (the same bytes the per-record path writes)."""

from __future__ import annotations

import struct

import pyarrow as pa

from changelake.changelog.normalize import ENCODED_STATE_MARK
from changelake.connectors.upsert_kafka.columnar import ArrowState, _state_bytes


def _rows(values: list[int], states: list[bytes]) -> pa.Table:
    return pa.table({"v": pa.array(values, pa.int64()), "__state": pa.array(states, pa.binary())})


def test_state_bytes_are_the_record_paths_encoding():
    keys = pa.array([b'{"id":1}', b'{"id":22}', b'{ "id" : 3 }'], pa.binary())
    values = pa.array([b'{"id":1,"v":2}', None, b"{}"], pa.binary())
    got = _state_bytes(keys, values).to_pylist()
    want = [ENCODED_STATE_MARK + struct.pack(">I", len(k)) + k + v if v is not None else None
            for k, v in zip(keys.to_pylist(), values.to_pylist())]
    assert got == want and got[1] is None


def test_take_gives_held_rows_and_names_unknown_and_stale_keys():
    state = ArrowState()
    rows, missing = state.take([b"a"], pa.array([b"sa"], pa.binary()))
    assert rows is None and missing == [0]
    state.add([b"a", b"b", b"c"], _rows([1, 2, 3], [b"sa", b"sb", b"sc"]), [])
    rows, missing = state.take([b"c", b"a", b"z", b"b"], pa.array([b"sc", b"sa", b"sz", b"other"], pa.binary()))
    assert missing == [2, 3]  # z never held; b held for other bytes (written by another path)
    assert rows is not None and rows.column_names == ["v"] and rows.column("v").to_pylist()[:2] == [3, 1]
    state.add([b"a"], _rows([10], [b"sa2"]), [b"c"])
    rows, missing = state.take([b"a", b"c"], pa.array([b"sa2", b"sc"], pa.binary()))
    assert missing == [1] and rows is not None and rows.column("v").to_pylist()[0] == 10


def test_compaction_keeps_each_keys_last_row():
    state = ArrowState()
    live: dict[bytes, int] = {}
    for step in range(200):
        keys = [f"k{(step * 7 + i) % 50}".encode() for i in range(40)]
        keys = list(dict.fromkeys(keys))
        values = [step * 1000 + i for i in range(len(keys))]
        dead = [f"k{step % 50}".encode()] if step % 3 == 0 else []
        dead = [d for d in dead if d not in keys]
        state.add(keys, _rows(values, [b"s%d" % v for v in values]), dead)
        live.update(zip(keys, values))
        for d in dead:
            live.pop(d, None)
    assert state.table is not None and state.table.num_rows <= 2 * len(live) + 4096 + 40
    assert state.table.column(0).num_chunks <= 9  # more than 8 are combined
    names = sorted(live)
    rows, missing = state.take(names, pa.array([b"s%d" % live[k] for k in names], pa.binary()))
    assert missing == [] and rows is not None and rows.column("v").to_pylist() == [live[k] for k in names]
