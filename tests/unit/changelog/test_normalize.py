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
