"""DROP TABLE, re-CREATE with another definition, rows, and DROP again, read by Pipeline 2 in one
go (issue 17: "a re-CREATE starts from the new definition"), on real local Iceberg and Paimon
tables: rows of a definition dropped within the batch never decide the lake table's schema, so no
order of rows and drops (one partition, or a hash-by-key topic whose partitions each carry their
own drop copy) stops the run, and the lake ends as the last definition's rows."""

from __future__ import annotations

import datetime as dt

import pytest

from changelake.changelog import ChangelogRow, RowKind, Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions
from changelake.connectors.kafka.truncate_scope import scope_of, truncate_scope_headers
from changelake.connectors.lake.compaction import TruncateMarker
from changelake.connectors.lake.ddl import without_dropped_rows
from changelake.connectors.paimon import PaimonSink, PaimonSinkOptions
from changelake.connectors.upsert_kafka.partitioner import partition_for
from changelake.formats.table_id_key import KeyFormat, encode_table_key

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
                                                      namespace="lake"))
        return PaimonSink(PaimonSinkOptions.filesystem(tmp_path / "wh"))
    return make


def _lake(sink) -> list[dict]:
    return sorted(sink.read_table(T).to_pylist(), key=lambda r: r["id"])


def _partition(k: int) -> int:
    return partition_for(encode_table_key(str(T), D1, {"id": k}, KeyFormat.JSON), 3)


class _Topic:
    """Records of one table as Pipeline 1 writes them to a topic of ``partitions`` partitions
    (hash-by-key when more than one: a row to its key's partition, a drop copy to every partition)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.logs: list[list[tuple[Schema, object, int]]] = [[] for _ in range(partitions)]

    def rows(self, schema: Schema, keys) -> None:
        for k in keys:
            p = _partition(k) if self.partitions > 1 else 0
            self._append(p, schema, lambda meta, k=k: ChangelogRow(RowKind.INSERT, _value(schema, k), T, meta))

    def drop(self, schema: Schema) -> None:
        for p in range(self.partitions):
            scope = (scope_of(truncate_scope_headers(self.partitions, KeyFormat.JSON), str(T), schema, p)
                     if self.partitions > 1 else None)
            self._append(p, schema, lambda meta, s=scope: TruncateMarker(metadata=meta, scope=s, drop=True))

    def _append(self, p: int, schema: Schema, make) -> None:
        log = self.logs[p]
        offset = len(log)
        log.append((schema, make({"topic": "t", "partition": p, "offset": offset}), p))

    def polled(self, order: str) -> list[tuple[Schema, object, int]]:
        """Every record, each partition in order: ``partition-major`` (all of partition 0, then 1,
        ...) or ``interleaved`` (one record of each partition in turn)."""
        if order == "partition-major":
            return [r for log in self.logs for r in log]
        out = []
        for i in range(max(len(log) for log in self.logs)):
            out.extend(log[i] for log in self.logs if i < len(log))
        return out


def _read(sink, records, flush_every: int | None = None) -> None:
    """Pipeline 2's lake writes: each record buffered with its schema (a schema change hands the
    rows so far over, as the changelog sink does), flushed every ``flush_every`` records and at the end."""
    for n, (schema, item, p) in enumerate(records, 1):
        sink.add(T, [item], schema, {f"t/{p}": item.metadata["offset"] + 1})
        if flush_every and n % flush_every == 0:
            sink.flush()
    sink.flush()


def _start(sink, topic: _Topic) -> list[tuple[Schema, object, int]]:
    """The first definition's rows, already in the lake; returns the records absorbed."""
    topic.rows(D1, range(1, 13))
    first = topic.polled("partition-major")
    _read(sink, first)
    assert [r["id"] for r in _lake(sink)] == list(range(1, 13))
    return first


#: Known gap: with a commit between them, the rows of a hash-by-key partition that is a whole
#: drop behind another (its next drop copy not yet read) re-create the lake table to their older
#: definition and the newer definition's values of the other partitions are lost (NULL). Telling
#: them apart needs the drop copies seen per partition (a generation per topic/partition).
_BEHIND = pytest.mark.xfail(strict=True, reason="a partition a whole drop behind, across commits")


@pytest.mark.parametrize("partitions, order, flush_every", [
    (1, "partition-major", None), (1, "partition-major", 1), (1, "partition-major", 3),
    (3, "partition-major", None), (3, "interleaved", None),
    pytest.param(3, "interleaved", 2, marks=_BEHIND), pytest.param(3, "partition-major", 5, marks=_BEHIND),
], ids=["one-partition-one-batch", "one-partition-each-record", "one-partition-every-3",
        "hash3-partition-major", "hash3-interleaved", "hash3-interleaved-every-2", "hash3-partition-major-every-5"])
def test_drop_recreate_rows_drop_recreate_rows_ends_as_the_last_definition(make_sink, partitions, order, flush_every):
    topic = _Topic(partitions)
    with make_sink() as sink:
        absorbed = len(_start(sink, topic))
        # DROP; CREATE (v VARCHAR); INSERT; DROP; CREATE (v DATE, w); INSERT -- read in one run
        topic.drop(D1)
        topic.rows(D2, range(20, 32))
        topic.drop(D2)
        topic.rows(D3, range(40, 52))
        records = [r for r in topic.polled(order) if r[1].metadata["offset"] >= _absorbed_offset(topic, r, absorbed)]
        _read(sink, records, flush_every)
        assert _lake(sink) == [_value(D3, k) for k in range(40, 52)]
        assert set(sink.read_table(T).column_names) >= {"id", "v", "w"}
        # later changes of the last definition evolve and flow as usual
        sink.write(T, [ChangelogRow(RowKind.INSERT, _value(D3, 60), T)], D3, {})
        assert [r["id"] for r in _lake(sink)] == [*range(40, 52), 60]


def _absorbed_offset(topic: _Topic, record, absorbed: int) -> int:
    # the first definition's rows of each partition (offsets 0..n-1 of it) were absorbed by _start
    return sum(1 for s, item, p in topic.logs[record[2]] if s is D1 and isinstance(item, ChangelogRow))


@pytest.mark.parametrize("partitions", [1, 3], ids=["one-partition", "hash3"])
def test_rows_then_drop_of_a_re_created_definition_leave_the_lake_dropped_then_a_re_create_fills_it(
        make_sink, partitions):
    topic = _Topic(partitions)
    with make_sink() as sink:
        _start(sink, topic)
        topic.drop(D1)
        _read(sink, [r for r in topic.polled("partition-major") if isinstance(r[1], TruncateMarker)])
        assert _lake(sink) == []
        # the reported order: the re-created definition's rows and its drop in one batch
        topic.rows(D2, range(20, 32))
        topic.drop(D2)
        new = [r for r in topic.polled("partition-major") if r[0] is D2]
        _read(sink, new)  # no SchemaEvolutionError int -> string
        assert _lake(sink) == []
        topic.rows(D3, range(40, 45))
        _read(sink, [r for r in topic.polled("interleaved") if r[0] is D3])
        assert _lake(sink) == [_value(D3, k) for k in range(40, 45)]


def test_without_dropped_rows_keeps_what_outlives_the_batch():
    def row(k, p=0):
        return ChangelogRow(RowKind.INSERT, {"id": k, "v": k}, T, {"topic": "t", "partition": p, "offset": k})
    drop = TruncateMarker(drop=True)
    truncate = TruncateMarker()
    assert without_dropped_rows([row(1), drop, row(2)]) == [drop, row(2)]
    assert without_dropped_rows([row(1), truncate, row(2)]) == [row(1), truncate, row(2)]  # a truncate: kept
    scopes = [scope_of(truncate_scope_headers(3, KeyFormat.JSON), str(T), D1, p) for p in range(3)]
    keys = {p: [k for k in range(30) if _partition(k) == p][:2] for p in range(3)}
    copy0 = TruncateMarker(scope=scopes[0], drop=True)
    items = [row(keys[0][0]), row(keys[1][0]), copy0, row(keys[0][1]), row(keys[2][0])]
    # the copy of partition 0 deletes only the rows of partition 0 before it
    assert without_dropped_rows(items) == [row(keys[1][0]), copy0, row(keys[0][1]), row(keys[2][0])]
