"""DROP TABLE, re-CREATE with another definition, rows, and DROP again, read by Pipeline 2 in one
go (issue 17: "a re-CREATE starts from the new definition"), through the lake changelog sink on
real local Iceberg and Paimon tables: rows of a definition dropped within the batch never decide
the lake table's schema, so no order of rows and drops in a poll (one partition, or a hash-by-key
topic whose partitions each carry their own drop copy) stops the run, and the lake ends as the
last definition's rows."""

from __future__ import annotations

import contextlib
import datetime as dt

import pytest

from changelake.changelog import ChangelogRow, DataChangeEvent, Op, RowKind, Schema, TableId
from changelake.changelog.event import DROP_TABLE
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions
from changelake.connectors.kafka.truncate_scope import scope_of, truncate_scope_headers
from changelake.connectors.lake.compaction import TruncateMarker
from changelake.connectors.lake.ddl import dropped_rows_removed, without_dropped_rows
from changelake.connectors.lake.changelog_sink import LakeOffsetsSink
from changelake.connectors.paimon import PaimonSink, PaimonSinkOptions
from changelake.connectors.upsert_kafka.partitioner import partition_for
from changelake.formats.json_values import KeyFormat, encode_table_key

T = TableId("db", "t")


def _schema(*cols: tuple[str, str]) -> Schema:
    return Schema.of([("id", parse_data_type("INT NOT NULL"))] + [(n, parse_data_type(t)) for n, t in cols], ["id"])


D1 = _schema(("v", "INT"))  # CREATE TABLE t(id INT PRIMARY KEY, v INT)
D2 = _schema(("v", "VARCHAR(20)"))  # re-CREATE: v changes type
D3 = _schema(("v", "DATE"), ("w", "VARCHAR(10)"))  # re-CREATE again: another type, a new column


def _value(schema: Schema, k: int) -> dict:
    if schema is D1:
        return {"id": k, "v": k}
    if schema is D2:
        return {"id": k, "v": f"s{k}"}
    return {"id": k, "v": dt.date(2026, 1, 1) + dt.timedelta(days=k), "w": f"w{k}"}


@pytest.fixture(params=["iceberg", "paimon"])
def make_sink(request, tmp_path):
    (tmp_path / "wh").mkdir()

    def make():
        if request.param == "iceberg":
            return IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh",
                                                      namespace="lake", **{"commit.max-rows": 1}))
        return PaimonSink(PaimonSinkOptions.filesystem(tmp_path / "wh", **{"commit.max-rows": 1}))
    return make


@contextlib.contextmanager
def _opened(sink):
    sink.open()
    try:
        yield sink
    finally:
        sink.close()


def _lake(lake) -> list[dict]:
    return sorted(lake.read_table(T).to_pylist(), key=lambda r: r["id"])


def _partition(k: int) -> int:
    return partition_for(encode_table_key(str(T), D1, {"id": k}, KeyFormat.JSON), 3)


class _Topic:
    """Records of one table as Pipeline 1 writes them to a topic of ``partitions`` partitions
    (hash-by-key when more than one: a row to its key's partition, a drop copy, scoped, to every
    partition), as the events Pipeline 2 decodes from them."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.logs: list[list[DataChangeEvent]] = [[] for _ in range(partitions)]

    def rows(self, schema: Schema, keys) -> None:
        for k in keys:
            p = _partition(k) if self.partitions > 1 else 0
            self._append(p, lambda pos, k=k: DataChangeEvent(T, Op.CREATE, None, _value(schema, k), schema, 0, pos))

    def drop(self, schema: Schema) -> None:
        for p in range(self.partitions):
            scope = (scope_of(truncate_scope_headers(self.partitions, KeyFormat.JSON), str(T), schema, p)
                     if self.partitions > 1 else None)
            self._append(p, lambda pos, s=scope: DataChangeEvent(
                T, Op.TRUNCATE, None, None, schema, 0, {**pos, "truncate.scope": s}, schema_change=DROP_TABLE))

    def _append(self, p: int, make) -> None:
        log = self.logs[p]
        log.append(make({"topic": "db.t", "partition": p, "offset": len(log) + 1}))  # the next offset

    def polled(self, order: str, since: dict[int, int] | None = None) -> list[DataChangeEvent]:
        """Every record from ``since[p]`` on, each partition in order: ``partition-major`` (all of
        partition 0, then 1, ...) or ``interleaved`` (one record of each partition in turn)."""
        logs = [log[(since or {}).get(p, 0):] for p, log in enumerate(self.logs)]
        if order == "partition-major":
            return [e for log in logs for e in log]
        out = []
        for i in range(max(len(log) for log in logs)):
            out.extend(log[i] for log in logs if i < len(log))
        return out

    def ends(self) -> dict[int, int]:
        return {p: len(log) for p, log in enumerate(self.logs)}


def _read(sink: LakeOffsetsSink, events, poll: int | None = None) -> None:
    """Pipeline 2's lake writes: ``poll`` events at a time (None: all in one), each poll a lake
    commit (``commit.max-rows`` 1), the checkpoint after the tables."""
    poll = poll or max(len(events), 1)
    for i in range(0, len(events), poll):
        chunk = events[i:i + poll]
        sink.write(chunk)
        sink.commit({f"db.t/{e.position['partition']}": e.position["offset"] for e in chunk})
    sink.flush()


def _start(sink, topic: _Topic) -> dict[int, int]:
    """The first definition's rows, already in the lake; returns where each partition is."""
    topic.rows(D1, range(1, 13))
    _read(sink, topic.polled("partition-major"))
    assert [r["id"] for r in _lake(sink.lake)] == list(range(1, 13))
    return topic.ends()


#: Before the drop-copy counts (lake/ddl.py by_drop_generation): with a lake commit (a poll)
#: between them, the rows of a hash-by-key partition that is a whole drop behind another (its next
#: drop copy not read yet) re-created the lake table to their older definition, and the newer
#: definition's values of the other partitions were lost (NULL), or the run stopped.
@pytest.mark.parametrize("partitions, order, poll", [
    (1, "partition-major", None), (1, "partition-major", 1), (1, "partition-major", 3),
    (3, "partition-major", None), (3, "interleaved", None),
    (3, "interleaved", 2), (3, "partition-major", 5),
], ids=["one-partition-one-poll", "one-partition-each-record", "one-partition-polls-of-3",
        "hash3-partition-major", "hash3-interleaved", "hash3-interleaved-polls-of-2", "hash3-partition-major-polls-of-5"])
def test_drop_recreate_rows_drop_recreate_rows_ends_as_the_last_definition(make_sink, partitions, order, poll):
    topic = _Topic(partitions)
    sink = LakeOffsetsSink(make_sink(), "p")
    with _opened(sink):
        since = _start(sink, topic)
        # DROP; CREATE (v VARCHAR); INSERT; DROP; CREATE (v DATE, w); INSERT -- read in one run
        topic.drop(D1)
        topic.rows(D2, range(20, 32))
        topic.drop(D2)
        topic.rows(D3, range(40, 52))
        _read(sink, topic.polled(order, since), poll)
        assert _lake(sink.lake) == [_value(D3, k) for k in range(40, 52)]
        # later changes of the last definition flow as usual
        sink.lake.write(T, [ChangelogRow(RowKind.INSERT, _value(D3, 60), T)], D3, {})
        assert [r["id"] for r in _lake(sink.lake)] == [*range(40, 52), 60]


@pytest.mark.parametrize("partitions", [1, 3], ids=["one-partition", "hash3"])
def test_rows_then_drop_of_a_re_created_definition_leave_the_lake_dropped_then_a_re_create_fills_it(
        make_sink, partitions):
    topic = _Topic(partitions)
    sink = LakeOffsetsSink(make_sink(), "p")
    with _opened(sink):
        since = _start(sink, topic)
        topic.drop(D1)
        _read(sink, topic.polled("partition-major", since))
        assert _lake(sink.lake) == []
        # the reported order: the re-created definition's rows and its own drop in one poll
        since = topic.ends()
        topic.rows(D2, range(20, 32))
        topic.drop(D2)
        _read(sink, topic.polled("partition-major", since))  # before: SchemaEvolutionError int -> string
        assert _lake(sink.lake) == []
        since = topic.ends()
        topic.rows(D3, range(40, 45))
        _read(sink, topic.polled("interleaved", since))
        assert _lake(sink.lake) == [_value(D3, k) for k in range(40, 45)]


def test_without_dropped_rows_keeps_what_outlives_the_batch():
    def row(k, p=0):
        return ChangelogRow(RowKind.INSERT, {"id": k, "v": k}, T, {"topic": "t", "partition": p, "offset": k})
    drop = TruncateMarker(drop=True)
    truncate = TruncateMarker()
    assert without_dropped_rows([row(1), drop, row(2)]) == [drop, row(2)]
    assert without_dropped_rows([row(1), truncate, row(2)]) == [row(1), truncate, row(2)]  # a truncate: kept
    scopes = [scope_of(truncate_scope_headers(3, KeyFormat.JSON), str(T), D1, p) for p in range(3)]
    keys = {p: [k for k in range(30) if _partition(k) == p][:2] for p in range(3)}
    # a copy without a partition (a direct write) covers the keys its scope hashes to partition 0
    copy0 = TruncateMarker(scope=scopes[0], drop=True)
    items = [row(keys[0][0]), row(keys[1][0], 1), copy0, row(keys[0][1]), row(keys[2][0], 2)]
    assert without_dropped_rows(items) == [row(keys[1][0], 1), copy0, row(keys[0][1]), row(keys[2][0], 2)]
    # a copy read from partition 1 deletes that partition's earlier rows, in earlier segments too
    copy1 = TruncateMarker({"topic": "t", "partition": 1, "offset": 99}, scope=scopes[1], drop=True)
    assert dropped_rows_removed([[row(keys[1][0], 1), row(keys[2][0], 2)], [row(keys[1][1], 1), copy1]]) == [
        [row(keys[2][0], 2)], [copy1]]


@pytest.mark.parametrize("partitions", [1, 3], ids=["one-partition", "hash3"])
def test_a_drop_that_carries_the_re_created_definition_and_its_rows_in_one_poll(make_sink, partitions):
    # Pipeline 1 read after the re-CREATE gives the DROP the table's newest schema (or the lake
    # changelog sink gives a DROP without one the schema of the rows before it): the drop and the
    # re-created table's rows then share one buffer, and the flag of the drop is not stored yet
    topic = _Topic(partitions)
    sink = LakeOffsetsSink(make_sink(), "p")
    with _opened(sink):
        since = _start(sink, topic)
        topic.drop(D3)
        topic.rows(D3, range(40, 46))
        _read(sink, topic.polled("partition-major", since))  # before: SchemaEvolutionError int -> date
        assert _lake(sink.lake) == [_value(D3, k) for k in range(40, 46)]


# -- a partition a whole DROP behind another, across lake commits, restarts and workers -----------
def _drop_copies(sink) -> dict:
    from changelake.connectors.lake.ddl import drop_copies
    return drop_copies(sink.lake._read_committed_offsets(sink.lake.load_table(T)))


def _rounds(topic: _Topic) -> None:
    # DROP; CREATE (v VARCHAR); INSERT; DROP; CREATE (v DATE, w); INSERT
    topic.drop(D1)
    topic.rows(D2, range(20, 32))
    topic.drop(D2)
    topic.rows(D3, range(40, 52))


@pytest.mark.parametrize("poll", [2, 5], ids=["polls-of-2", "polls-of-5"])
def test_a_partition_a_drop_behind_across_restarts_and_replays_ends_as_the_last_definition(make_sink, poll):
    topic = _Topic(3)
    sink = LakeOffsetsSink(make_sink(), "p")
    with _opened(sink):
        since = _start(sink, topic)
    _rounds(topic)
    events = topic.polled("partition-major", since)
    for i in range(0, len(events), poll):  # a restart (a new sink) before each poll
        chunk = events[max(0, i - poll):i + poll]  # each poll reads the previous one again (a replay)
        sink = LakeOffsetsSink(make_sink(), "p")
        with _opened(sink):
            _read(sink, chunk)
    sink = LakeOffsetsSink(make_sink(), "p")
    with _opened(sink):
        assert _lake(sink.lake) == [_value(D3, k) for k in range(40, 52)]
        # each partition passed each DROP once (replays counted nothing twice); the Kafka offsets
        # the lake reports leave the counts out
        assert _drop_copies(sink) == {"db.t/0": 2, "db.t/1": 2, "db.t/2": 2}
        assert sink.lake.committed_offsets(T) == {f"db.t/{p}": n for p, n in topic.ends().items()}


def test_two_workers_one_a_drop_behind_the_other_end_as_the_last_definition(tmp_path):
    # Iceberg (the multi-writer lake): worker A owns partition 0 and reads all of it (both DROPs
    # and the last definition's rows) before worker B reads partitions 1 and 2
    (tmp_path / "wh").mkdir()

    def worker(name):
        return LakeOffsetsSink(IcebergSink(IcebergSinkOptions.sql(
            f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh", namespace="lake", **{"commit.max-rows": 1})),
            "p", merge=True, writer=name)
    topic = _Topic(3)
    a, b = worker("a"), worker("b")
    with _opened(a), _opened(b):
        topic.rows(D1, range(1, 13))
        _rounds(topic)
        polled = topic.polled("partition-major")
        _read(a, [e for e in polled if e.position["partition"] == 0], 3)
        assert {r["id"] for r in _lake(a.lake)} == {k for k in range(40, 52) if _partition(k) == 0}
        _read(b, [e for e in polled if e.position["partition"] != 0], 3)
        assert _lake(b.lake) == [_value(D3, k) for k in range(40, 52)]


@pytest.mark.parametrize("poll", [None, 2, 5], ids=["one-poll", "polls-of-2", "polls-of-5"])
def test_truncate_copies_read_across_commits_end_as_mysql(make_sink, poll):
    # the same scoping, without a definition change: a partition a whole TRUNCATE behind another
    # deletes only its own keys when it gets there (no count is needed, nothing is left out)
    topic = _Topic(3)
    sink = LakeOffsetsSink(make_sink(), "p")
    with _opened(sink):
        since = _start(sink, topic)

        def truncate():
            for p in range(3):
                scope = scope_of(truncate_scope_headers(3, KeyFormat.JSON), str(T), D1, p)
                topic._append(p, lambda pos, s=scope: DataChangeEvent(
                    T, Op.TRUNCATE, None, None, D1, 0, {**pos, "truncate.scope": s}))
        truncate()
        topic.rows(D1, range(20, 32))
        truncate()
        topic.rows(D1, range(40, 52))
        _read(sink, topic.polled("partition-major", since), poll)
        assert _lake(sink.lake) == [_value(D1, k) for k in range(40, 52)]
        assert _drop_copies(sink) == {}


def test_by_drop_generation_leaves_out_the_rows_of_a_partition_a_drop_behind():
    from changelake.connectors.lake.ddl import by_drop_generation

    def row(k, p, offset):
        return ChangelogRow(RowKind.INSERT, {"id": k}, T, {"topic": "t", "partition": p, "offset": offset})

    def drop(p, offset):
        return TruncateMarker({"topic": "t", "partition": p, "offset": offset}, drop=True)
    # partition 0 passed 2 drops, partition 1 one: its row is of the dropped generation 1
    found = by_drop_generation([row(1, 1, 5), drop(1, 6), row(2, 1, 7), row(3, 0, 9)], {"t/0": 2, "t/1": 0})
    assert found.items == [drop(1, 6), row(3, 0, 9)] and found.stale == 2
    assert found.copies == {"t/0": 2, "t/1": 1} and (found.before, found.newest) == (2, 2)
    assert not found.items[0].drop  # a late copy: only its partition's share is deleted
    assert found.through == {"t/1": 7}
    # the first copy of a drop raises the generation and stays a drop; the rows before the
    # copies still to come of the other partitions are left out, those after it kept
    found = by_drop_generation([row(1, 1, 1), drop(0, 3), row(2, 0, 4), row(4, 1, 2)], {})
    assert found.items == [drop(0, 3), row(2, 0, 4)] and found.items[0].drop and found.newest == 1
    # never dropped, or rows without a Kafka position: nothing is left out
    plain = [ChangelogRow(RowKind.INSERT, {"id": 1}, T), row(2, 0, 1)]
    assert by_drop_generation(plain, {}).items == plain
    assert by_drop_generation([plain[0]], {"t/0": 3}).items == [plain[0]]


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("behavior", ["evolve", "try_evolve"])
def test_a_partition_a_drop_behind_under_a_schema_change_behavior_ends_as_the_last_definition(make_sink, behavior,
                                                                                             partitions):
    # the rows of a dropped generation never reach the policy (it would retype the lake's columns)
    from changelake.connectors.lake.schema_change import SchemaChangePolicy
    topic = _Topic(partitions)
    lake = make_sink()
    lake.schema_change_policy = SchemaChangePolicy.of(behavior)
    sink = LakeOffsetsSink(lake, "p")
    with _opened(sink):
        since = _start(sink, topic)
        _rounds(topic)
        _read(sink, topic.polled("partition-major", since), 5)
        assert _lake(sink.lake) == [_value(D3, k) for k in range(40, 52)]
