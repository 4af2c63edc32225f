"""The lake changelog sinks on a local lake (no services): events from Kafka records become rows
with their offsets, commits wait for commit.max-rows / idle / stop, the checkpoint follows the
tables, data errors are PipelineDataError naming where."""

from __future__ import annotations

import threading

import pytest

from changelake.changelog import DataChangeEvent, Op, Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions
from changelake.connectors.lake.changelog_sink import LakeOffsetsSink, LakePositionSink
from changelake.connectors.paimon import PaimonSink, PaimonSinkOptions
from changelake.errors import PipelineDataError

T = TableId("db", "t")
S = Schema.of([("id", parse_data_type("INT NOT NULL")), ("v", parse_data_type("STRING"))], ["id"])
NO_PK = Schema.of([("id", parse_data_type("INT NOT NULL"))], [])


def lake(kind: str, tmp_path, **extra):
    if kind == "paimon":
        return PaimonSink(PaimonSinkOptions.filesystem(tmp_path / "paimon", **extra))
    (tmp_path / "wh").mkdir(exist_ok=True)
    return IcebergSink(IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh", **extra))


def kafka_event(offset: int, row: dict, schema: Schema | None = S, partition: int = 0) -> DataChangeEvent:
    return DataChangeEvent(T, Op.CREATE, None, row, schema, 0, {"topic": "db.t", "partition": partition, "offset": offset + 1})


@pytest.mark.parametrize("kind", ["iceberg", "paimon"])
def test_offsets_sink_commits_at_max_rows_or_idle_and_stores_the_checkpoint_after_the_tables(kind, tmp_path):
    sink = LakeOffsetsSink(lake(kind, tmp_path, **{"commit.max-rows": 3}), "p")
    sink.open()
    try:
        assert sink.stored_position() == {}
        sink.write([kafka_event(0, {"id": 1, "v": "a"})])
        assert sink.commit({"db.t/0": 1}) is None  # buffered: 1 row < commit.max-rows
        assert sink.flush(force=False) is not None  # idle: committed
        assert sink.stored_position() == {"db.t/0": 1} and sink.lake.committed_offsets(T) == {"db.t/0": 1}
        sink.write([kafka_event(1, {"id": 2, "v": "b"}), kafka_event(2, {"id": 1, "v": "c"}), kafka_event(3, {"id": 3, "v": "d"})])
        results = sink.commit({"db.t/0": 5})  # 3 rows: due; the position may step past a transaction marker
        assert results is not None and [r.rows_upserted for r in results] == [3]
        assert sink.read_stored() == {"db.t/0": 5}
        sink.write([kafka_event(5, {"id": 4, "v": "e"})])
        sink.commit({"db.t/0": 6})
    finally:
        sink.close()  # not flushed: the last row is read again by the next run
    again = LakeOffsetsSink(lake(kind, tmp_path), "p")
    again.open()
    try:
        assert again.stored_position() == {"db.t/0": 5}
        assert again.lake.committed_offsets(T) == {"db.t/0": 4}  # the table: after its last record
    finally:
        again.close()


@pytest.mark.parametrize("kind", ["iceberg", "paimon"])
def test_parallel_workers_merge_the_checkpoint_by_max(kind, tmp_path):
    for writer, offsets in (("w0", {"db.t/0": 7, "db.t/1": 2}), ("w1", {"db.t/0": 4, "db.t/1": 9})):
        sink = LakeOffsetsSink(lake(kind, tmp_path), "p", merge=True, writer=writer)
        sink.open()
        try:
            sink.commit(offsets)
            sink.flush()
        finally:
            sink.close()
    sink = LakeOffsetsSink(lake(kind, tmp_path), "p")
    sink.open()
    try:
        assert sink.stored_position() == {"db.t/0": 7, "db.t/1": 9}
    finally:
        sink.close()


@pytest.mark.parametrize("kind", ["iceberg", "paimon"])
def test_parallel_workers_stores_interleaving_keep_both_advances(kind, tmp_path, monkeypatch):
    # Worker A stores its advance while worker B is in the middle of storing its own: no lock,
    # each writes only its own partitions' entries, so neither undoes the other's advance.
    a = LakeOffsetsSink(lake(kind, tmp_path), "p", merge=True, writer="a")
    b = LakeOffsetsSink(lake(kind, tmp_path), "p", merge=True, writer="b")
    a.open()
    b.open()
    other = threading.Thread(target=lambda: (a.commit({"db.t/1": 9}), a.flush()))
    write = b.lake.write_checkpoint_entries

    def let_a_store_then_write(pipeline: str, offsets, writer: str) -> None:
        if not other.is_alive():
            other.start()
            other.join(timeout=30)
        write(pipeline, offsets, writer)

    monkeypatch.setattr(b.lake, "write_checkpoint_entries", let_a_store_then_write)
    try:
        b.commit({"db.t/0": 7})
        b.flush()
        other.join(timeout=30)
        assert not other.is_alive()
        assert a.read_stored() == {"db.t/0": 7, "db.t/1": 9}
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("kind", ["iceberg", "paimon"])
def test_a_worker_stores_only_the_partitions_it_advanced(kind, tmp_path):
    """A worker that lost partition 1 (a zombie) cannot pull the new owner's advance back."""
    a = LakeOffsetsSink(lake(kind, tmp_path), "p", merge=True, writer="a")
    b = LakeOffsetsSink(lake(kind, tmp_path), "p", merge=True, writer="b")
    a.open()
    b.open()
    try:
        a.commit({"db.t/0": 3, "db.t/1": 4})
        a.flush()
        b.commit({"db.t/1": 12})  # b owns partition 1 now
        b.flush()
        a.commit({"db.t/0": 5, "db.t/1": 6})  # a, resumed, still commits what it polled of 1
        a.flush()
        assert a.read_stored() == {"db.t/0": 5, "db.t/1": 12}
    finally:
        a.close()
        b.close()


def test_data_errors_name_the_record_and_the_table(tmp_path):
    sink = LakeOffsetsSink(lake("paimon", tmp_path), "p")
    with pytest.raises(PipelineDataError) as info:
        sink.write([kafka_event(41, {"id": 1}, NO_PK, partition=2)])
    err = info.value
    assert "table db.t (topic 'db.t' partition 2 offset 41) has no primary key" in str(err)
    assert (err.topic, err.partition, err.offset, err.table, err.pipeline) == ("db.t", 2, 41, "db.t", "p")
    truncate = DataChangeEvent(T, Op.TRUNCATE, None, None, None, 0, {"topic": "db.t", "partition": 0, "offset": 8})
    with pytest.raises(PipelineDataError, match="a truncate of db.t \\(topic 'db.t' partition 0 offset 7\\) carries no schema"):
        sink.write([truncate])
    positioned = LakePositionSink(lake("paimon", tmp_path), "p")
    with pytest.raises(PipelineDataError, match="table db.t has no primary key") as info:
        positioned.write([DataChangeEvent(T, Op.CREATE, None, {"id": 1}, NO_PK)])
    assert info.value.topic is None and info.value.table == "db.t"


@pytest.mark.parametrize("kind", ["iceberg", "paimon"])
def test_read_checkpoint_takes_the_map_and_the_entries_of_its_own_pipeline_only(kind, tmp_path):
    """One read serves the checkpoint map and the per-partition entries; the properties of a
    pipeline whose name starts with this one's (its keys start with this checkpoint key) are
    not taken for this pipeline's."""
    with lake(kind, tmp_path) as sink:
        sink.write_checkpoint("p", {"db.t/0": 5, "db.t/1": 3})
        sink.write_checkpoint_entries("p", {"db.t/1": 8}, writer="w1")
        sink.write_checkpoint("p.kafka-offsets-2", {"db.t/0": 99, "db.t/2": 99})
        sink.write_checkpoint_entries("p.kafka-offsets-2", {"db.t/1": 96, "db.t/4": 96}, writer="w1")
        sink.write_checkpoint("p2", {"db.t/0": 98, "db.t/3": 98})
        sink.write_checkpoint_entries("p2", {"db.t/1": 97}, writer="w1")
        assert sink.read_checkpoint("p") == {"db.t/0": 5, "db.t/1": 8}
        assert sink.read_checkpoint("p2") == {"db.t/0": 98, "db.t/1": 97, "db.t/3": 98}
        assert sink.read_checkpoint("other") == {}
