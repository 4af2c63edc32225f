"""ChangelogNormalize follows Flink's processLastRowOnChangelog table, on both stores."""

from __future__ import annotations

import pytest

from changelake.changelog import ChangelogRow, RowKind, Schema, SchemaError, parse_data_type
from changelake.changelog.normalize import ChangelogNormalize
from changelake.changelog.rowkind import RETRACT, UPSERT
from changelake.changelog.state import MemoryKeyStateStore, SqliteKeyStateStore

SCHEMA = Schema.of([("id", parse_data_type("INT NOT NULL")), ("name", parse_data_type("STRING"))], ["id"])


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    s = MemoryKeyStateStore() if request.param == "memory" else SqliteKeyStateStore(tmp_path / "ks")
    yield s
    s.close()


def kinds(rows):
    return [(str(r.kind), dict(r.values)) for r in rows]


def test_upsert_mode(store):
    n = ChangelogNormalize(SCHEMA, store)
    assert n.changelog_mode == UPSERT
    assert kinds(n.process(ChangelogRow.insert({"id": 1, "name": "a"}))) == [("+I", {"id": 1, "name": "a"})]
    # identical upsert: nothing
    assert n.process(ChangelogRow.update_after({"id": 1, "name": "a"})) == []
    assert kinds(n.process(ChangelogRow.insert({"id": 1, "name": "b"}))) == [("+U", {"id": 1, "name": "b"})]
    # delete with key only -> full previous row
    assert kinds(n.process(ChangelogRow.delete({"id": 1, "name": None}))) == [("-D", {"id": 1, "name": "b"})]
    # delete of an unknown key -> nothing
    assert n.process(ChangelogRow.delete({"id": 1})) == []
    # after a delete, the key is new again
    assert kinds(n.process(ChangelogRow.update_after({"id": 1, "name": "c"}))) == [("+I", {"id": 1, "name": "c"})]


def test_retract_mode_emits_update_before(store):
    n = ChangelogNormalize(SCHEMA, store, generate_update_before=True)
    assert n.changelog_mode == RETRACT
    n.process(ChangelogRow.insert({"id": 2, "name": "a"}))
    out = n.process(ChangelogRow.update_after({"id": 2, "name": "b"}))
    assert kinds(out) == [("-U", {"id": 2, "name": "a"}), ("+U", {"id": 2, "name": "b"})]


def test_update_before_input_acts_as_delete(store):
    n = ChangelogNormalize(SCHEMA, store)
    n.process(ChangelogRow.insert({"id": 3, "name": "x"}))
    out = n.process(ChangelogRow.update_before({"id": 3, "name": "x"}))
    assert kinds(out) == [("-D", {"id": 3, "name": "x"})]
    assert len(store) == 0


def test_explicit_key_bytes_and_metadata_kept(store):
    n = ChangelogNormalize(SCHEMA, store)
    row = ChangelogRow(RowKind.INSERT, {"id": 1, "name": "a"}, None, {"offset": 5})
    (out,) = n.process(row, key=b"custom")
    assert out.metadata == {"offset": 5}
    assert store.get(b"custom") is not None


def test_requires_primary_key():
    with pytest.raises(SchemaError):
        ChangelogNormalize(Schema.of([("a", parse_data_type("INT"))]), MemoryKeyStateStore())


# -- process_encoded: the state holds the caller's encoding; emits exactly what process emits ----
import json  # noqa: E402
import random  # noqa: E402

from changelake.changelog.errors import KeyStateError  # noqa: E402
from changelake.changelog.normalize import ENCODED_STATE_MARK  # noqa: E402

FLOAT_SCHEMA = Schema.of([("id", parse_data_type("INT NOT NULL")), ("x", parse_data_type("DOUBLE"))], ["id"])


def _encode(values):
    # a non-canonical encoding on purpose: the same row has several encodings (spaces)
    return json.dumps(values, separators=(",", ":") if random.random() < 0.5 else (", ", ": ")).encode()


def _decode(data):
    return json.loads(data)


@pytest.mark.parametrize("schema", [SCHEMA, FLOAT_SCHEMA])
@pytest.mark.parametrize("retract", [False, True])
def test_process_encoded_emits_what_process_emits(store, tmp_path, schema, retract):
    random.seed(7)
    reference = ChangelogNormalize(schema, MemoryKeyStateStore(), generate_update_before=retract)
    n = ChangelogNormalize(schema, store, generate_update_before=retract, decode_state=_decode)
    other = schema.names[1]
    choices = ["a", "b"] if schema is SCHEMA else [0.5, float("nan"), -0.0, 0.0]
    for i in range(600):
        key = random.randrange(5)
        kind = random.choice([RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.UPDATE_AFTER, RowKind.DELETE, RowKind.UPDATE_BEFORE])
        values = {"id": key, other: random.choice(choices)}
        row = ChangelogRow(kind, values, None, {"offset": i})
        k = n.key_bytes(values)
        if random.random() < 0.2 or kind in (RowKind.DELETE, RowKind.UPDATE_BEFORE):
            got = n.process(row, k)  # mixed state: tagged JSON and encoded values in one store
        else:
            got = n.process_encoded(row, k, _encode(values))
        want = reference.process(row, k)
        assert [(r.kind, repr(dict(r.values)), r.metadata) for r in got] == [
            (r.kind, repr(dict(r.values)), r.metadata) for r in want
        ], i
        prev = n.previous(k)
        assert repr(prev) == repr(reference.previous(k))
    if store.get(n.key_bytes({"id": 0})) is not None:
        assert len(store) == len(reference.store)


def test_process_encoded_stores_the_encoding_and_skips_equal_bytes(store):
    calls = []

    def decode(data):
        calls.append(data)
        return json.loads(data)

    n = ChangelogNormalize(SCHEMA, store, decode_state=decode)
    row = ChangelogRow.insert({"id": 1, "name": "a"})
    assert kinds(n.process_encoded(row, b"k", b'{"id":1,"name":"a"}')) == [("+I", {"id": 1, "name": "a"})]
    assert store.get(b"k") == ENCODED_STATE_MARK + b'{"id":1,"name":"a"}'
    assert n.process_encoded(row, b"k", b'{"id":1,"name":"a"}') == [] and calls == []  # equal bytes: no decode
    assert n.process_encoded(row, b"k", b'{"id": 1, "name": "a"}') == [] and len(calls) == 1  # equal row
    assert store.get(b"k") == ENCODED_STATE_MARK + b'{"id":1,"name":"a"}'  # unchanged, as process
    out = n.process(ChangelogRow.delete({"id": 1}), b"k")
    assert kinds(out) == [("-D", {"id": 1, "name": "a"})]


def test_encoded_state_without_a_decoder_is_refused(store):
    ChangelogNormalize(SCHEMA, store, decode_state=_decode).process_encoded(
        ChangelogRow.insert({"id": 1, "name": "a"}), b"k", b'{"id":1,"name":"a"}'
    )
    with pytest.raises(KeyStateError, match="delete the key-state directory"):
        ChangelogNormalize(SCHEMA, store).previous(b"k")
