"""The upsert-kafka source on the columnar lane (``poll_batches``: Arrow ChangeBatches) against the
record-by-record path (``poll`` with ``batch_decode=False``) on the real broker, the SAME records
through both: the same changelog row for row (kind, values, topic, partition, offset), the same
key state bytes, the same positions and the same error (topic, partition, offset), for polls
mixing inserts, updates, repeated keys, duplicates, tombstones (of known and unknown keys),
corrupt records (raised, or dropped by ``ignore-parse-errors``), null keys, several partitions,
keys across polls and a durable (sqlite) store."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from changelake.changelog import Schema, parse_data_type
from changelake.changelog.change_batch import ChangeBatch
from changelake.changelog.event import Op
from changelake.changelog.state import KeyStateStore, MemoryKeyStateStore, SqliteKeyStateStore
from changelake.connectors.errors import SourceError
from changelake.connectors.upsert_kafka import create_source
from changelake.formats.errors import DecodeError

pytestmark = pytest.mark.integration

SCHEMA = Schema.of(
    [
        ("region", parse_data_type("STRING NOT NULL")),
        ("pv", parse_data_type("BIGINT")),
        ("amount", parse_data_type("DECIMAL(10, 2)")),
        ("ts", parse_data_type("TIMESTAMP(3)")),
    ],
    ["region"],
)

#: one poll: inserts, an update, a tombstone, a text decimal, the same bytes again, the same
#: values spelt otherwise, a tombstone of an unknown key, other key bytes of a known key, a
#: corrupt value (offset 9) and records after it
MIXED: list[tuple[bytes | None, bytes | None]] = [
    (b'{"region":"eu"}', b'{"region":"eu","pv":1,"amount":1.50,"ts":"2024-01-01 00:00:00.001"}'),
    (b'{"region":"us"}', b'{"region":"us","pv":2,"amount":2,"ts":"2024-01-01T00:00:00"}'),
    (b'{"region":"eu"}', b'{"region":"eu","pv":3,"amount":4.25,"ts":"2024-01-02 00:00:00"}'),
    (b'{"region":"us"}', None),
    (b'{"region":"ap"}', b'{"region":"ap","pv":5,"amount":"7.5","ts":null}'),
    (b'{"region":"eu"}', b'{"region":"eu","pv":3,"amount":4.25,"ts":"2024-01-02 00:00:00"}'),
    (b'{"region":"eu"}', b'{ "ts":"2024-01-02T00:00:00.000", "amount":4.250, "pv":3, "region":"eu" }'),
    (b'{"region":"zz"}', None),
    (b'{ "region" : "ap" }', b'{"region":"ap","pv":6,"amount":7.5}'),
    (b'{"region":"xx"}', b'{not json'),
    (b'{"region":"eu"}', b'{"region":"eu","pv":9,"amount":9.99,"ts":"2024-01-03 00:00:00"}'),
    (b'{"region":"ap"}', None),
]
CORRUPT_OFFSET = 9


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]], partition: int | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        if partition is None:
            p.produce(topic, key=key, value=value)
        else:
            p.produce(topic, key=key, value=value, partition=partition)
    assert p.flush(10) == 0


def _options(bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
    o = {
        "connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
        "key.format": "json", "value.format": "json", "scan.bounded.mode": "latest-offset",
    }
    o.update(extra)
    return o


def _batch_rows(batch: ChangeBatch) -> list[tuple[Any, ...]]:
    assert len(batch.kinds) == batch.num_rows == len(batch.offsets)
    return [(kind, values, batch.topic, batch.partition, offset)
            for kind, values, offset in zip(batch.kinds.to_pylist(), batch.rows.to_pylist(), batch.offsets.to_pylist())]


def _read(options: dict[str, str], store: KeyStateStore, columnar: bool, max_records: int) -> dict[str, Any]:
    """Poll to the bounded end with ``poll_batches`` (columnar) or ``poll`` record by record;
    the rows as (kind, values, topic, partition, offset), or the error, with the state and
    positions it left, and how many polls each path of ``poll_batches`` took."""
    rows: list[tuple[Any, ...]] = []
    with create_source(options, SCHEMA, store=store, batch_decode=columnar, commit_state_every_poll=False) as source:
        error: tuple[Any, ...] | None = None
        try:
            while not source.is_bounded_end_reached():
                if columnar:
                    for batch in source.poll_batches(max_events=max_records, timeout_s=1.0):
                        assert isinstance(batch, ChangeBatch) and batch.records >= 1
                        rows.extend(_batch_rows(batch))
                else:
                    rows.extend((r.kind.short_string, dict(r.values), r.metadata["topic"], r.metadata["partition"],
                                 r.metadata["offset"]) for r in source.poll(1.0, max_records=max_records))
            source.commit_state()
        except DecodeError as exc:
            error = (type(exc), str(exc), exc.topic, exc.partition, exc.offset)
        except SourceError as exc:
            error = (type(exc), str(exc))
        return {"rows": rows, "error": error, "positions": source.positions, "state": sorted(store.items()),
                "null_keys": source.null_key_records, "paths": (source.columnar_polls, source.record_path_polls)}


def _compare(options: dict[str, str], max_records: int, stores: tuple[str, ...] = ("memory",), tmp_path: Any = None,
             by_partition: bool = False) -> dict[str, Any]:
    """Read with both paths and assert the same result. ``by_partition``: rows compared in order
    per partition (the consumer interleaves partitions differently from run to run); for a
    read that fails, only the error."""
    reference = _read(options, MemoryKeyStateStore(), False, max_records)
    reference["columnar_paths"] = {}
    for name in stores:
        store = SqliteKeyStateStore(tmp_path / f"s-{random.random()}") if name == "sqlite" else MemoryKeyStateStore()
        got = _read(options, store, True, max_records)
        store.close()
        paths = got.pop("paths")
        want = {k: v for k, v in reference.items() if k not in ("paths", "columnar_paths")}
        if by_partition:
            if want["error"] is not None:
                assert got["error"] == want["error"]
                reference["columnar_paths"][name] = paths
                continue
            got["rows"] = sorted(got["rows"], key=lambda r: r[3])  # stable: the order within a partition
            want["rows"] = sorted(want["rows"], key=lambda r: r[3])
        first = next((i for i, (a, b) in enumerate(zip(got["rows"], want["rows"])) if a != b), None)
        assert got["rows"] == want["rows"], (name, max_records, first, got["rows"][first:first + 3] if first is not None else
                                             len(got["rows"]), want["rows"][first:first + 3] if first is not None else len(want["rows"]))
        assert got == want, (name, max_records)
        reference["columnar_paths"][name] = paths
    return reference


@pytest.mark.parametrize("max_records", [500, 4, 1])
@pytest.mark.parametrize("mode", ["upsert", "retract"])
def test_a_mixed_poll_gives_what_the_record_path_gives(kafka_bootstrap, topic_factory, mode, max_records):
    topic = topic_factory(partitions=1)
    _produce(kafka_bootstrap, topic, MIXED)
    ref = _compare(_options(kafka_bootstrap, topic, **{"scan.changelog-mode": mode}), max_records)
    assert ref["error"] is not None and ref["error"][2:] == (topic, 0, CORRUPT_OFFSET)
    if max_records == 4:
        # offsets 0-3 decided in Arrow; 4-7 record by record (offset 6: the row of offset 5 spelt
        # otherwise, equal values with other bytes), 8-11 too (the corrupt value)
        assert ref["columnar_paths"]["memory"] == (1, 2)

    ignoring = _options(kafka_bootstrap, topic, **{"scan.changelog-mode": mode, "value.json.ignore-parse-errors": "true"})
    ref = _compare(ignoring, max_records)
    assert ref["error"] is None
    expected = [
        ("+I", 0), ("+I", 1), ("+U", 2), ("-D", 3), ("+I", 4), ("+U", 8), ("+U", 10), ("-D", 11),
    ]
    assert [(r[0], r[4]) for r in ref["rows"] if r[0] != "-U"] == expected
    assert ref["rows"][-1][1] == {"region": "ap", "pv": 6, "amount": ref["rows"][-1][1]["amount"], "ts": None}
    assert str(ref["rows"][-1][1]["amount"]) == "7.50"


def _random_records(n: int, keys: int, seed: int, prefix: str = "k") -> list[tuple[bytes | None, bytes | None]]:
    """``n`` records over ``keys`` keys: inserts, updates (some repeating the stored row's bytes
    or its values spelt otherwise), tombstones (some of unknown keys) and other key bytes."""
    rng = random.Random(seed)
    out: list[tuple[bytes | None, bytes | None]] = []
    for i in range(n):
        k = f"{prefix}{rng.randrange(keys)}"
        key = (f'{{"region":"{k}"}}' if rng.random() < 0.9 else f'{{ "region" : "{k}" }}').encode()
        roll = rng.random()
        if roll < 0.15:
            out.append((key, None))
        elif roll < 0.25 and out and out[-1][1] is not None:
            out.append((out[-1][0], out[-1][1]))
        elif roll < 0.3:
            out.append((key, f'{{ "pv": {i % 7}, "region": "{k}", "amount": {i % 5}.50 }}'.encode()))
        else:
            out.append((key, f'{{"region":"{k}","pv":{i},"amount":{i % 5}.5,"ts":"2024-01-01 00:00:0{i % 10}"}}'.encode()))
    return out


@pytest.mark.parametrize("mode", ["upsert", "retract"])
def test_many_polls_of_random_changes(kafka_bootstrap, topic_factory, tmp_path, mode):
    """Many polls of random inserts, updates, duplicates and tombstones over few keys (repeated
    keys within a poll and keys across polls), with a corrupt record in the middle, on memory
    and sqlite state (sqlite: the per-record path, its rows as batches): the same rows, state,
    positions and error; then with the corrupt record dropped by ``ignore-parse-errors``."""
    topic = topic_factory(partitions=1)
    records = _random_records(1500, 60, seed=11)
    corrupt_at = 900
    records[corrupt_at] = (b'{"region":"k1"}', b'{"region":"k1","pv":')
    _produce(kafka_bootstrap, topic, records)
    for extra in ({}, {"value.json.ignore-parse-errors": "true"}):
        o = _options(kafka_bootstrap, topic, **{"scan.changelog-mode": mode}, **extra)
        for max_records in (500, 37):
            ref = _compare(o, max_records, ("memory", "sqlite"), tmp_path)
            if extra:
                assert ref["error"] is None and ref["positions"] == {(topic, 0): len(records)}
            else:
                assert ref["error"] is not None and ref["error"][2:] == (topic, 0, corrupt_at)
            kinds = {r[0] for r in ref["rows"]}
            assert {"+I", "+U", "-D"} <= kinds and (("-U" in kinds) == (mode == "retract"))
            columnar, by_record = ref["columnar_paths"]["memory"]
            if max_records == 37:
                assert columnar > by_record  # most polls decided in Arrow
            assert ref["columnar_paths"]["sqlite"][0] == 0


def test_several_partitions_and_null_keys(kafka_bootstrap, topic_factory):
    """Three partitions (one batch per run of a partition), and a null key: failed with
    topic/partition/offset (``fail``), or skipped and counted (``skip``), as ``poll`` does."""
    topic = topic_factory(partitions=3)
    # each key in one partition, as a keyed producer puts it (the order across partitions is the
    # consumer's, and differs from run to run)
    for p in range(3):
        _produce(kafka_bootstrap, topic, _random_records(300, 20, seed=p, prefix=f"p{p}k"), partition=p)
    _produce(kafka_bootstrap, topic, [(None, b'{"region":"p1k1","pv":1}')], partition=1)
    _produce(kafka_bootstrap, topic, _random_records(50, 20, seed=9, prefix="p1k"), partition=1)
    ref = _compare(_options(kafka_bootstrap, topic), 200, by_partition=True)
    assert ref["error"] is not None and "null key" in ref["error"][1] and "offset 300" in ref["error"][1]
    ref = _compare(_options(kafka_bootstrap, topic, **{"scan.null-key.mode": "skip"}), 200, by_partition=True)
    assert ref["columnar_paths"]["memory"][0] >= 1
    assert ref["error"] is None and ref["null_keys"] == 1
    assert {r[3] for r in ref["rows"]} == {0, 1, 2}


def test_batches_carry_their_records_and_events(kafka_bootstrap, topic_factory):
    """A batch's ``records``, ``last_offset``, ``ops`` and ``fallback()`` events (+I -> c, -U/+U
    -> u with before and after, -D -> d with the previous row)."""
    topic = topic_factory(partitions=1)
    _produce(kafka_bootstrap, topic, MIXED[:5] + MIXED[7:9])  # no update equal to its previous row
    o = _options(kafka_bootstrap, topic, **{"scan.changelog-mode": "retract"})
    with create_source(o, SCHEMA) as source:
        assert source.change_batches
        batches = source.poll_batches(max_events=500, timeout_s=5.0)
        while not source.is_bounded_end_reached():
            batches += source.poll_batches(max_events=500, timeout_s=1.0)
        assert source.columnar_polls >= 1 and source.record_path_polls == 0
    batches = [b for b in batches if b.records]
    assert sum(b.records for b in batches) == 7 and batches[-1].last_offset == 6
    assert isinstance(batches[0].rows, pa.Table)
    events = [e for b in batches for e in b.fallback()]
    assert [e.op for e in events] == [Op.CREATE, Op.CREATE, Op.UPDATE, Op.DELETE, Op.CREATE, Op.UPDATE]
    assert events[2].before["pv"] == 1 and events[2].after["pv"] == 3 and events[3].before["region"] == "us"
    assert [e.position["offset"] for e in events] == [0, 1, 2, 3, 4, 6]
    ops: dict[str, int] = {}
    for b in batches:
        for k, v in b.ops.items():
            ops[k] = ops.get(k, 0) + v
    assert ops == {"c": 3, "u": 2, "d": 1}


def _read_more(options: dict[str, str], store: KeyStateStore, columnar: bool, max_records: int,
               ) -> tuple[list[tuple[Any, ...]], tuple[int, int]]:
    """A new source on ``store`` (a restart), polled to the bounded end: its rows (kind, values,
    topic, partition, offset) and the polls of each path of ``poll_batches``."""
    got = _read(options, store, columnar, max_records)
    assert got["error"] is None, got["error"]
    return got["rows"], got["paths"]


@pytest.mark.parametrize("mode", ["upsert", "retract"])
def test_restarts_on_the_same_state_give_what_the_record_path_gives(kafka_bootstrap, topic_factory, mode):
    """Three runs on one memory store each, new records before each (updates and tombstones of
    keys the earlier runs left in the state, identical rows, rows spelt otherwise): a run on the
    columnar lane after a run of ``poll()`` (state it did not write, its decoded rows unknown)
    and after one of its own (a new source: none of the rows decoded), and the record path in
    all three on its own store, give the same rows and the same state after each run."""
    topic = topic_factory(partitions=1)
    o = _options(kafka_bootstrap, topic, **{"scan.changelog-mode": mode})
    reference, lane = MemoryKeyStateStore(), MemoryKeyStateStore()
    produced = 0
    for run, lane_columnar in enumerate((False, True, True)):
        records = _random_records(400, 40, seed=21 + run)
        # an identical row again and a tombstone of a key the previous run left live
        records += [records[-1], (b'{"region":"k3"}', None), (b'{"region":"k3"}', None)]
        _produce(kafka_bootstrap, topic, records)
        produced += len(records)
        want, _ = _read_more(o, reference, False, 64)
        got, (arrow_polls, _) = _read_more(o, lane, lane_columnar, 64)
        assert got == want, run
        assert (arrow_polls >= 1) == lane_columnar
        assert sorted(lane.items()) == sorted(reference.items()), run
        assert want and {r[4] for r in want} <= set(range(produced - len(records), produced))
        kinds = {r[0] for r in want}
        assert {"+U", "-D"} <= kinds and (("-U" in kinds) == (mode == "retract"))


def test_an_unbounded_read_past_the_partition_end(kafka_bootstrap, topic_factory):
    """Unbounded (no ``scan.bounded.mode``), the polls reach the end of the topic and get its
    partition-EOF event (``enable.partition.eof``) among or after the records: the same rows
    as the bounded record path, the position at the end, no error (on main the scan compared
    the KafkaError with None, which raises)."""
    import time

    topic = topic_factory(partitions=1)
    records = _random_records(300, 30, seed=3)
    _produce(kafka_bootstrap, topic, records)
    want = _read(_options(kafka_bootstrap, topic), MemoryKeyStateStore(), False, 500)
    assert want["error"] is None
    o = _options(kafka_bootstrap, topic)
    del o["scan.bounded.mode"]
    rows: list[tuple[Any, ...]] = []
    with create_source(o, SCHEMA) as source:
        deadline = time.monotonic() + 30
        polls_at_end = 0
        while polls_at_end < 3 and time.monotonic() < deadline:
            for batch in source.poll_batches(max_events=128, timeout_s=0.5):
                rows.extend(_batch_rows(batch))
            if source.positions.get((topic, 0)) == len(records):
                polls_at_end += 1
        assert source.positions == {(topic, 0): len(records)}
        assert source.columnar_polls >= 1
    assert rows == want["rows"]
