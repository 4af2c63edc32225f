"""The upsert-kafka source's batch decode (a poll's keys and values in one json decode call each,
previous rows read ahead and decoded together) against the record-by-record path
(``batch_decode=False``) on the real broker: the same changelog, the same key state, the same
positions and the same error for a poll that mixes good records, updates, duplicates, tombstones
and a corrupt record."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka import Producer

from changelake.changelog import ChangelogRow, Schema, parse_data_type
from changelake.changelog.state import KeyStateStore, MemoryKeyStateStore, SqliteKeyStateStore
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

#: (key, value) records of one poll: inserts, an update, a tombstone, a text decimal (the
#: converter's general path), the same value bytes again and the same values spelt otherwise
#: (both duplicates), a tombstone of an unknown key, a corrupt value, and records after it
MIXED: list[tuple[bytes, bytes | None]] = [
    (b'{"region":"eu"}', b'{"region":"eu","pv":1,"amount":1.50,"ts":"2024-01-01 00:00:00.001"}'),
    (b'{"region":"us"}', b'{"region":"us","pv":2,"amount":2,"ts":"2024-01-01T00:00:00"}'),
    (b'{"region":"eu"}', b'{"region":"eu","pv":3,"amount":4.25,"ts":"2024-01-02 00:00:00"}'),
    (b'{"region":"us"}', None),
    (b'{"region":"ap"}', b'{"region":"ap","pv":5,"amount":"7.5","ts":null}'),
    (b'{"region":"eu"}', b'{"region":"eu","pv":3,"amount":4.25,"ts":"2024-01-02 00:00:00"}'),
    (b'{"region":"eu"}', b'{ "ts":"2024-01-02T00:00:00.000", "amount":4.250, "pv":3, "region":"eu" }'),
    (b'{"region":"zz"}', None),
    (b'{ "region" : "ap" }', b'{"region":"ap","pv":6,"amount":7.5}'),  # other key bytes, same key
    (b'{"region":"xx"}', b'{not json'),
    (b'{"region":"eu"}', b'{"region":"eu","pv":9,"amount":9.99,"ts":"2024-01-03 00:00:00"}'),
    (b'{"region":"ap"}', None),
]
CORRUPT_OFFSET = 9


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        p.produce(topic, key=key, value=value)
    assert p.flush(10) == 0


def _options(bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
    o = {
        "connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": bootstrap,
        "key.format": "json", "value.format": "json", "scan.bounded.mode": "latest-offset",
    }
    o.update(extra)
    return o


def _read(options: dict[str, str], store: KeyStateStore, batch: bool, max_records: int) -> dict[str, Any]:
    """Poll to the bounded end; the rows, or the error (with the state and positions it left)."""
    rows: list[ChangelogRow] = []
    with create_source(options, SCHEMA, store=store, batch_decode=batch, commit_state_every_poll=False) as source:
        error: tuple[Any, ...] | None = None
        try:
            while not source.is_bounded_end_reached():
                rows.extend(source.poll(1.0, max_records=max_records))
            source.commit_state()
        except DecodeError as exc:
            error = (type(exc), str(exc), exc.topic, exc.partition, exc.offset)
        return {"rows": rows, "error": error, "positions": source.positions, "state": sorted(store.items())}


@pytest.mark.parametrize("max_records", [500, 4])
@pytest.mark.parametrize("mode", ["upsert", "retract"])
def test_a_mixed_poll_gives_what_the_record_path_gives(kafka_bootstrap, topic_factory, mode, max_records):
    topic = topic_factory(partitions=1)
    _produce(kafka_bootstrap, topic, MIXED)
    o = _options(kafka_bootstrap, topic, **{"scan.changelog-mode": mode})
    by_record = _read(o, MemoryKeyStateStore(), False, max_records)
    batched = _read(o, MemoryKeyStateStore(), True, max_records)
    assert by_record["error"] is not None and by_record["error"][2:] == (topic, 0, CORRUPT_OFFSET)
    assert batched == by_record
    if max_records == 4:  # the polls before the corrupt one returned their rows
        assert [str(r) for r in batched["rows"]][:3] == ["+I[eu, 1, 1.50, 2024-01-01 00:00:00.001000]",
                                                        "+I[us, 2, 2.00, 2024-01-01 00:00:00]",
                                                        *(["-U[eu, 1, 1.50, 2024-01-01 00:00:00.001000]"] if mode == "retract" else
                                                          ["+U[eu, 3, 4.25, 2024-01-02 00:00:00]"])]

    ignoring = _options(kafka_bootstrap, topic, **{"scan.changelog-mode": mode, "value.json.ignore-parse-errors": "true"})
    by_record = _read(ignoring, MemoryKeyStateStore(), False, max_records)
    batched = _read(ignoring, MemoryKeyStateStore(), True, max_records)
    assert by_record["error"] is None and batched == by_record
    expected = [
        "+I[eu, 1, 1.50, 2024-01-01 00:00:00.001000]", "+I[us, 2, 2.00, 2024-01-01 00:00:00]",
        "+U[eu, 3, 4.25, 2024-01-02 00:00:00]", "-D[us, 2, 2.00, 2024-01-01 00:00:00]", "+I[ap, 5, 7.50, NULL]",
        "+U[ap, 6, 7.50, NULL]", "+U[eu, 9, 9.99, 2024-01-03 00:00:00]", "-D[ap, 6, 7.50, NULL]",
    ]
    assert [str(r) for r in batched["rows"] if r.kind.short_string != "-U"] == expected
    assert [r.metadata["offset"] for r in batched["rows"] if r.kind.short_string != "-U"] == [0, 1, 2, 3, 4, 8, 10, 11]
    assert {type(r.values["amount"]) for r in batched["rows"]} == {Decimal}


def test_previous_rows_from_a_durable_store(kafka_bootstrap, topic_factory, tmp_path):
    """The second run's previous rows come from the SQLite state written by the first (read
    ahead and batch-decoded), with a tombstone and updates of keys stored in the first run."""
    topic = topic_factory(partitions=1)
    _produce(kafka_bootstrap, topic, MIXED[:5])
    o = _options(kafka_bootstrap, topic)
    for batch in (False, True):
        store = SqliteKeyStateStore(tmp_path / f"state-{batch}")
        first = _read(o, store, batch, 500)
        store.close()
        assert first["error"] is None
    _produce(kafka_bootstrap, topic, [
        (b'{"region":"eu"}', b'{"region":"eu","pv":3,"amount":4.25,"ts":"2024-01-02 00:00:00"}'),  # same bytes
        (b'{"region":"ap"}', b'{"region":"ap","pv":5,"amount":7.50,"ts":null}'),  # same values
        (b'{"region":"eu"}', b'{"region":"eu","pv":4,"amount":4.25,"ts":"2024-01-02 00:00:00"}'),
        (b'{"region":"ap"}', None),
        (b'{"region":"us"}', b'{"region":"us","pv":8}'),
    ])
    second = {}
    for batch in (False, True):
        store = SqliteKeyStateStore(tmp_path / f"state-{batch}")
        second[batch] = _read(o, store, batch, 500)
        store.close()
    assert second[True] == second[False]
    assert [str(r) for r in second[True]["rows"]] == [
        "+U[eu, 4, 4.25, 2024-01-02 00:00:00]", "-D[ap, 5, 7.50, NULL]", "+I[us, 8, NULL, NULL]",
    ]


def _random_records(n: int, keys: int, seed: int) -> list[tuple[bytes, bytes | None]]:
    """``n`` records over ``keys`` keys: inserts, updates (some repeating the stored row's bytes
    or its values spelt otherwise), tombstones (some of unknown keys) and other key bytes."""
    import random

    rng = random.Random(seed)
    out: list[tuple[bytes, bytes | None]] = []
    for i in range(n):
        k = f"k{rng.randrange(keys)}"
        key = (f'{{"region":"{k}"}}' if rng.random() < 0.9 else f'{{ "region" : "{k}" }}').encode()
        roll = rng.random()
        if roll < 0.15:
            out.append((key, None))  # a tombstone (of an unknown key when k is not live)
        elif roll < 0.25 and out and out[-1][1] is not None:
            out.append((out[-1][0], out[-1][1]))  # the previous record again (a duplicate when same key)
        elif roll < 0.3:
            out.append((key, f'{{ "pv": {i % 7}, "region": "{k}", "amount": {i % 5}.50 }}'.encode()))
        else:
            out.append((key, f'{{"region":"{k}","pv":{i % 7},"amount":{i % 5}.5,"ts":"2024-01-01 00:00:0{i % 10}"}}'.encode()))
    return out


@pytest.mark.parametrize("mode", ["upsert", "retract"])
def test_the_memory_state_lane_gives_what_the_record_path_gives(kafka_bootstrap, topic_factory, tmp_path, mode):
    """The batch path with memory state (its own loop: previous rows from the rows it wrote,
    key bytes decoded once) against the record-by-record path and against the batch path on
    SQLite state, over many polls of random inserts, updates, duplicates and tombstones (of
    known and unknown keys), with a corrupt record in the middle: the same rows (kinds, values,
    metadata), the same state bytes, the same positions and the same error; then the same with
    the corrupt record dropped by ``ignore-parse-errors``."""
    topic = topic_factory(partitions=1)
    records = _random_records(1200, 60, seed=7)
    corrupt_at = 700
    records[corrupt_at] = (b'{"region":"k1"}', b'{"region":"k1","pv":')
    _produce(kafka_bootstrap, topic, records)
    for extra in ({}, {"value.json.ignore-parse-errors": "true"}):
        o = _options(kafka_bootstrap, topic, **{"scan.changelog-mode": mode}, **extra)
        for max_records in (500, 37):  # the rows of the poll that fails are not returned: compare per size
            runs = {}
            for name, batch in [("record", False), ("memory", True), ("sqlite", True), ("sqlite-record", False)]:
                store = (SqliteKeyStateStore(tmp_path / f"{name}-{len(extra)}-{mode}-{max_records}")
                         if name.startswith("sqlite") else MemoryKeyStateStore())
                runs[name] = _read(o, store, batch, max_records)
                runs[name]["meta"] = [dict(r.metadata) for r in runs[name]["rows"]]
                store.close()
            reference = runs.pop("record")
            if extra:
                assert reference["error"] is None
                assert reference["positions"] == {(topic, 0): len(records)}
            else:
                assert reference["error"] is not None and reference["error"][2:] == (topic, 0, corrupt_at)
            kinds = {r.kind.short_string for r in reference["rows"]}
            assert {"+I", "+U", "-D"} <= kinds and (("-U" in kinds) == (mode == "retract"))
            for name, got in runs.items():
                assert got == reference, (name, max_records)
