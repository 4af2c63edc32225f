"""Pure logic of the lake sinks' DDL handling (issue 17): truncate scopes of hash-by-key topics,
the schema-change policy, and two source tables refused on one lake table."""

from __future__ import annotations

import pytest

from changelake.changelog import ChangelogRow, RowKind, Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions
from changelake.connectors.kafka.truncate_scope import TruncateScope, scope_of, truncate_scope_headers
from changelake.connectors.lake.compaction import TruncateMarker
from changelake.connectors.lake.ddl import dropped_after, expand_scoped_truncates, is_earlier_schema
from changelake.connectors.lake.schema_change import ColumnChange, SchemaChangeError, SchemaChangePolicy
from changelake.connectors.upsert_kafka.partitioner import partition_for
from changelake.errors import PipelineDataError
from changelake.formats.json_values import KeyFormat, encode_table_key

T = TableId("db", "t")
S = Schema.of([("id", parse_data_type("INT NOT NULL")), ("v", parse_data_type("STRING"))], ["id"])


def test_a_truncate_copy_covers_exactly_the_keys_murmur2_puts_in_its_partition():
    headers = truncate_scope_headers(3, KeyFormat.JSON)
    scopes = [scope_of(headers, "db.t", S, p) for p in range(3)]
    assert all(isinstance(s, TruncateScope) for s in scopes)
    for key in range(50):
        placed = partition_for(encode_table_key("db.t", S, {"id": key}, KeyFormat.JSON), 3)
        assert [s.covers({"id": key}) for s in scopes] == [p == placed for p in range(3)]
    assert scope_of([], "db.t", S, 0) is None  # no headers: the truncate covers every row
    assert scope_of(truncate_scope_headers(1, KeyFormat.JSON), "db.t", S, 0) is None


def test_scoped_truncates_become_deletes_of_the_covered_keys_only():
    scope = scope_of(truncate_scope_headers(3, KeyFormat.JSON), "db.t", S, 1)
    lake_rows = [{"id": i} for i in range(20)]
    items = [ChangelogRow(RowKind.INSERT, {"id": 100, "v": "x"}, T), TruncateMarker(scope=scope),
             ChangelogRow(RowKind.INSERT, {"id": 101, "v": "y"}, T)]
    out = expand_scoped_truncates(items, S, T, "db.t", lambda cols: lake_rows)
    deleted = {r.values["id"] for r in out if isinstance(r, ChangelogRow) and r.kind is RowKind.DELETE}
    assert deleted == {k for k in [*range(20), 100] if scope.covers({"id": k})}
    assert out[-1].values["id"] == 101  # rows after the truncate stay


def test_dropped_after():
    row = ChangelogRow(RowKind.INSERT, {"id": 1}, T)
    assert dropped_after([row]) is None
    assert dropped_after([row, TruncateMarker(drop=True)]) is True
    assert dropped_after([TruncateMarker(drop=True), row]) is False
    assert dropped_after([TruncateMarker()]) is None


def test_schema_change_policy_options_and_filters():
    with pytest.raises(OptionValidationError, match="schema.change.behavior"):
        SchemaChangePolicy.of("sometimes")
    with pytest.raises(OptionValidationError, match="exclude.schema.changes"):
        SchemaChangePolicy.of(None, exclude="[drop.everything]")
    assert SchemaChangePolicy.of(None).is_default
    lenient = SchemaChangePolicy.of("LENIENT")
    assert not lenient.applies("truncate.table") and not lenient.applies("drop.table") and lenient.applies("add.column")
    overridden = SchemaChangePolicy.of("lenient", exclude="[add.column]")  # FLINK-36514
    assert overridden.applies("truncate.table") and not overridden.applies("add.column")
    drops = SchemaChangePolicy.of("evolve", include="[drop]")
    assert drops.applies("drop.column") and drops.applies("drop.table") and not drops.applies("add.column")
    assert not SchemaChangePolicy.of("ignore").applies("add.column")
    assert SchemaChangePolicy.of("ignore").applies("create.table")


def test_schema_change_plans_per_mode():
    incoming = Schema.of([("id", parse_data_type("INT NOT NULL")), ("v", parse_data_type("INT")),
                          ("c", parse_data_type("INT"))], ["id"])
    changes = [ColumnChange("bad", "v", "string -> int"), ColumnChange("add", "c"), ColumnChange("drop", "b")]
    with pytest.raises(SchemaChangeError, match="db.t.*alter.column.type of column 'v'"):
        SchemaChangePolicy.of("exception").plan("db.t", changes, incoming)
    lenient = SchemaChangePolicy.of("lenient").plan("db.t", changes, incoming)
    assert lenient.schema.names == ["id", "v_int", "c"] and lenient.drop_columns == []
    row = ChangelogRow(RowKind.INSERT, {"id": 1, "v": 5, "c": 6}, T)
    assert lenient.apply([row])[0].values == {"id": 1, "v_int": 5, "c": 6}
    evolve = SchemaChangePolicy.of("try_evolve").plan("db.t", changes, incoming)
    assert evolve.schema.names == ["id", "c"] and evolve.drop_columns == ["b"]
    ignore = SchemaChangePolicy.of("ignore").plan("db.t", changes, incoming)
    assert ignore.schema.names == ["id"] and ignore.drop_columns == []
    with pytest.raises(SchemaChangeError, match="truncate.table"):
        SchemaChangePolicy.of("exception").filter_markers("db.t", [TruncateMarker()])
    assert SchemaChangePolicy.of("ignore").filter_markers("db.t", [TruncateMarker(), row]) == [row]
    narrower = [ColumnChange("keep", "v", "bigint -> int")]
    with pytest.raises(SchemaChangeError):
        SchemaChangePolicy.of("exception").plan("db.t", narrower, incoming)
    assert SchemaChangePolicy.of("evolve").plan("db.t", narrower, incoming).schema == incoming


def test_two_source_tables_on_one_lake_table_are_refused_by_name(tmp_path):
    (tmp_path / "wh").mkdir()
    sink = IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh", namespace="lake"))
    with sink:
        sink.write(TableId("db1", "t"), [ChangelogRow(RowKind.INSERT, {"id": 1, "v": "a"})], S, {})
        with pytest.raises(PipelineDataError) as err:
            sink.write(TableId("db2", "t"), [ChangelogRow(RowKind.INSERT, {"id": 1, "v": "b"})], S, {})
    assert "db1.t" in str(err.value) and "db2.t" in str(err.value) and "'lake.t'" in str(err.value)
    assert "route" in str(err.value)
    # a later run (or another worker: a new sink) is refused too: the lake table records its source
    again = IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh", namespace="lake"))
    with again:
        with pytest.raises(PipelineDataError) as err:
            again.write(TableId("db2", "t"), [ChangelogRow(RowKind.INSERT, {"id": 1, "v": "b"})], S, {})
        assert "db1.t" in str(err.value) and "db2.t" in str(err.value)
        again.write(TableId("db1", "t"), [ChangelogRow(RowKind.INSERT, {"id": 2, "v": "c"})], S, {})  # its own source


def _at(kind, values, offset):
    return ChangelogRow(kind, values, T, {"topic": "t", "partition": 0, "offset": offset})


S2 = Schema.of([("id", parse_data_type("INT NOT NULL")), ("v", parse_data_type("STRING")),
                ("w", parse_data_type("INT"))], ["id"])


@pytest.mark.parametrize("exclude, refused, ids, committed", [
    ("[add.column]", "truncate.table", {1: "1", 2: "22", 4: "4"}, 4),  # the changes before the truncate
    (None, "add.column of column 'w'", {1: "1", 2: "2"}, 2),  # the ADD COLUMN is first: nothing of it
])
def test_exception_commits_every_change_before_the_first_refused_one(tmp_path, exclude, refused, ids, committed):
    (tmp_path / "wh").mkdir()
    sink = IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh", namespace="lake"))
    sink.schema_change_policy = SchemaChangePolicy.of("exception", exclude=exclude)
    later = [_at(RowKind.INSERT, {"id": 4, "v": "4", "w": 4}, 2),
             _at(RowKind.UPDATE_BEFORE, {"id": 2, "v": "2", "w": None}, 3),
             _at(RowKind.UPDATE_AFTER, {"id": 2, "v": "22", "w": None}, 3),
             TruncateMarker(metadata={"topic": "t", "partition": 0, "offset": 4}),
             _at(RowKind.INSERT, {"id": 5, "v": "5", "w": 5}, 5)]
    with sink:
        sink.write(T, [_at(RowKind.INSERT, {"id": 1, "v": "1"}, 0), _at(RowKind.INSERT, {"id": 2, "v": "2"}, 1)], S,
                   {"t/0": 2})
        for _ in range(2):  # a restart stops at the same change, and the lake does not move
            with pytest.raises(SchemaChangeError) as err:
                sink.write(T, later, S2, {"t/0": 6, "other/0": 9})
            assert "lake.t" in str(err.value) and refused in str(err.value)
            table = sink.load_table(T)
            lake = {r["id"]: r["v"] for r in sink.read_table(T).to_pylist()}
            assert lake == ids
            assert sink._read_committed_offsets(table) == {"t/0": committed}
            assert sink.read_table(T).schema.names == ["id", "v"]
            if _ == 0:
                snapshot = table.current_snapshot().snapshot_id
        assert table.current_snapshot().snapshot_id == snapshot


def test_offsets_before_a_refused_change_stop_at_its_record_per_partition():
    from changelake.connectors.lake.ddl import Refusal, offsets_before

    def at(p, o):
        return ChangelogRow(RowKind.INSERT, {"id": o}, T, {"topic": "t", "partition": p, "offset": o})

    refusal = Refusal(SchemaChangeError("x"), [TruncateMarker(metadata={"topic": "t", "partition": 0, "offset": 7}),
                                               at(1, 3), at(0, 8)])
    # partition 0 up to the refused record, partition 1 up to its first record after it, partition 2
    # (written, nothing after) to the batch's offset, a partition none of the table's records came from left out
    assert offsets_before(refusal, [at(0, 5), at(1, 2), at(2, 4)], {"t/0": 9, "t/1": 4, "t/2": 6, "u/0": 1}) == \
        {"t/0": 7, "t/1": 3, "t/2": 6}


def test_a_truncate_copied_to_every_partition_is_cut_per_partition_under_exception():
    from changelake.connectors.lake.ddl import _before_refused

    headers = truncate_scope_headers(3, KeyFormat.JSON)

    def row(p, o):
        return ChangelogRow(RowKind.INSERT, {"id": o}, T, {"topic": "t", "partition": p, "offset": o})

    def copy(p, o):
        return TruncateMarker(metadata={"topic": "t", "partition": p, "offset": o},
                              scope=scope_of(headers, "db.t", S, p))

    policy = SchemaChangePolicy.of("exception")
    # partition 1's rows before its own copy precede the TRUNCATE, even when polled after partition 0's copy
    rows = [row(0, 1), copy(0, 2), row(0, 3), row(1, 10), row(1, 11), copy(1, 12), row(1, 13), row(2, 20)]
    written, tail = _before_refused(policy, rows, 1)
    assert written == [rows[0], rows[3], rows[4], rows[7]] and tail == [rows[1], rows[2], rows[5], rows[6]]
    # an unscoped marker (the table in one partition) cuts everything after it
    plain = [row(0, 1), TruncateMarker(metadata={"topic": "t", "partition": 0, "offset": 2}), row(1, 10)]
    assert _before_refused(policy, plain, 1) == ([plain[0]], plain[1:])


def test_an_earlier_definition_is_not_a_drop_column():
    """evolve / try_evolve drop a lake column only on a definition newer than the lake's: rows of a
    definition the lake already evolved past (its schema history) keep the column."""
    s0 = frozenset({"id", "v"})
    assert is_earlier_schema(S, ["w"], [s0])  # {id, v}: the lake's schema before ADD COLUMN w
    assert not is_earlier_schema(S, ["w"], [])  # no history: a real DROP COLUMN w
    assert not is_earlier_schema(S, ["w"], [frozenset({"id", "v", "w"})])  # that schema had w
    assert not is_earlier_schema(S, ["s"], [frozenset({"id", "s"})])  # v was never in it: a new definition
    assert is_earlier_schema(S, ["s", "w"], [frozenset({"id", "v", "x"}), frozenset({"id", "s"})])
