"""One suite for every KeyStateStore implementation (memory and sqlite)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from changelake.changelog.errors import KeyStateError
from changelake.changelog.state import (
    KeyStateStore,
    MemoryKeyStateStore,
    SqliteKeyStateStore,
    decode_values,
    encode_key,
    encode_values,
)


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path) -> KeyStateStore:
    s: KeyStateStore = MemoryKeyStateStore() if request.param == "memory" else SqliteKeyStateStore(tmp_path / "ks")
    yield s
    s.close()


def test_put_get_delete_len(store):
    assert store.get(b"a") is None
    assert len(store) == 0
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    store.put(b"a", b"3")
    assert store.get(b"a") == b"3"
    assert len(store) == 2
    store.delete(b"a")
    store.delete(b"missing")
    assert store.get(b"a") is None
    assert len(store) == 1
    store.commit()
    assert list(store.items()) == [(b"b", b"2")]


def test_meta_is_separate_from_keys(store):
    store.put_meta("offset:t:0", b"42")
    store.put_meta("offset:t:1", b"7")
    store.put_meta("identity", b"x")
    assert len(store) == 0
    assert store.get_meta("offset:t:0") == b"42"
    assert store.get_meta("nope") is None
    assert store.meta_items("offset:") == [("offset:t:0", b"42"), ("offset:t:1", b"7")]


def test_closed_store_refuses_use_and_close_is_idempotent(store):
    store.close()
    store.close()
    with pytest.raises(KeyStateError):
        store.get(b"a")


def test_items_in_key_order(store):
    for k in [b"c", b"a", b"b"]:
        store.put(k, k * 2)
    assert [k for k, _ in store.items()] == [b"a", b"b", b"c"]


def test_sqlite_durable_after_commit_only(tmp_path):
    s = SqliteKeyStateStore(tmp_path / "d")
    s.put(b"k1", b"v1")
    s.put_meta("offset:t:0", b"5")
    s.commit()
    s.put(b"k2", b"v2")  # never committed
    s.put_meta("offset:t:0", b"9")
    s.close()
    s2 = SqliteKeyStateStore(tmp_path / "d")
    assert s2.get(b"k1") == b"v1"
    assert s2.get(b"k2") is None
    assert s2.get_meta("offset:t:0") == b"5"
    assert len(s2) == 1
    s2.close()


def test_sqlite_refuses_a_non_database_file(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / SqliteKeyStateStore.FILE_NAME).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(KeyStateError, match="delete the directory"):
        SqliteKeyStateStore(d)


def test_codec_roundtrips_every_value_type():
    values = {
        "n": None,
        "b": True,
        "i": -(2**63),
        "f": 0.1,
        "s": "é\"x",
        "d": Decimal("12.50"),
        "bin": b"\x00\xff",
        "date": dt.date(2024, 2, 29),
        "ts": dt.datetime(2024, 1, 1, 12, 0, 0, 123000),
        "ltz": dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.timezone.utc),
        "time": dt.timedelta(hours=-1, seconds=5),
    }
    out = decode_values(encode_values(values))
    assert out == values
    assert [type(v) for v in out.values()] == [type(v) for v in values.values()]
    assert str(out["d"]) == "12.50"
    assert encode_values(values) == encode_values(dict(values))


def test_codec_refuses_unknown_types_and_corrupt_bytes():
    with pytest.raises(TypeError):
        encode_values({"x": object()})
    with pytest.raises(KeyStateError):
        decode_values(b"{not json")


def test_encode_key_distinguishes_types_and_order():
    assert encode_key(("a", 1)) != encode_key((1, "a"))
    assert encode_key((1,)) != encode_key(("1",))
    assert encode_key((Decimal("1.0"),)) == encode_key((Decimal("1.0"),))


def test_sqlite_batched_writes_read_back_commit_and_discard(tmp_path, monkeypatch):
    """Key writes are batched in memory and written with executemany: reads see them, the last
    write per key wins, commit makes them durable, close without commit discards them."""
    monkeypatch.setattr(SqliteKeyStateStore, "PENDING_MAX", 3)  # also cross the in-transaction flush
    s = SqliteKeyStateStore(tmp_path / "ks")
    for i in range(7):
        s.put(b"k%d" % i, b"v%d" % i)
    s.delete(b"k1")
    s.put(b"k2", b"new")
    s.delete(b"k6")
    s.put(b"k6", b"back")
    s.delete(b"missing")
    assert s.get(b"k1") is None and s.get(b"k2") == b"new" and s.get(b"k6") == b"back"
    assert len(s) == 6
    s.put_meta("offset:t:0", b"7")
    s.commit()
    s.put(b"k0", b"lost")
    s.delete(b"k3")
    assert s.get(b"k0") == b"lost" and s.get(b"k3") is None
    s.close()
    s = SqliteKeyStateStore(tmp_path / "ks")
    assert dict(s.items()) == {b"k0": b"v0", b"k2": b"new", b"k3": b"v3", b"k4": b"v4", b"k5": b"v5", b"k6": b"back"}
    assert s.get_meta("offset:t:0") == b"7"
    s.delete(b"k0")
    assert list(s.items())[0] == (b"k2", b"new")  # items() sees the pending delete
    s.close()


def test_encode_key_is_compact_json_of_tagged_values():
    assert encode_key((1,)) == b"[1]"
    assert encode_key(("eu", 3, Decimal("1.50"), None, True)) == b'["eu",3,{"$dec":"1.50"},null,true]'
    assert encode_values({"a": "é", "b": 1.5}) == b'{"a":"\\u00e9","b":1.5}'
