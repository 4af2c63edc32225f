"""One metadata vocabulary: change events by operation, a table's own offsets, skipped replays."""

from dataclasses import dataclass, field

from changelake.pipeline.progress import LakeProgress, lag_of


@dataclass
class _Result:
    table: str
    skipped: bool = False
    snapshot_id: int | None = 7
    offsets: dict = field(default_factory=dict)
    truncated: bool = False


def test_rows_by_operation_and_only_the_tables_own_offsets():
    progress = LakeProgress(topics_of=lambda table: [table])
    batch_offsets = {"db.a/0": 3001, "db.b/0": 10}
    steps = progress.add({
        "ops": {"db.a": {"r": 3000, "u": 1}, "db.b": {"c": 2, "d": 1}},
        "results": [_Result("db.a", offsets=batch_offsets), _Result("db.b", offsets=batch_offsets, snapshot_id=9)],
    })
    a, b = sorted(steps, key=lambda s: s.table)
    assert (a.rows_inserted, a.rows_updated, a.rows_deleted) == (3000, 1, 0)
    assert a.offsets == {"db.a/0": 3001} and b.offsets == {"db.b/0": 10}
    assert b.metadata(lag=0) == {"rows_inserted": 2, "rows_updated": 0, "rows_deleted": 1, "offsets": {"db.b/0": 10},
                                 "snapshot_id": 9, "commits": 1, "lag": 0}


def test_a_replayed_batch_counts_nothing_and_an_untouched_table_is_unchanged():
    progress = LakeProgress()
    assert progress.add({"ops": {"db.a": {"c": 5}}, "results": [_Result("db.a", skipped=True)]}) == []
    assert not progress.get("db.a").changed and not progress.get("db.zzz").changed


def test_lag_counts_from_zero_for_partitions_never_absorbed():
    assert lag_of({"t/0": 5}, {"t/0": 7, "t/1": 3}) == 5


def test_lag_by_topic_sums_each_topics_partitions():
    from changelake.pipeline.progress import lag_by_topic

    positions = {"db.a/0": (5, 7), "db.a/1": (3, 3), "db.b/0": (9, 4), "x/y/0": (0, 2)}
    assert lag_by_topic(positions) == {"db.a": 2, "db.b": 0, "x/y": 2}


def test_a_positioned_sources_batches_count_rows_by_op():
    progress = LakeProgress()
    steps = progress.add_positioned({"ops": {"db.t": {"r": 2, "c": 1, "u": 3, "d": 1, "t": 1}}})
    assert [(s.table, s.rows_inserted, s.rows_updated, s.rows_deleted, s.commits) for s in steps] == [("db.t", 3, 3, 1, 1)]
    progress.add_positioned({"ops": {"db.t": {"d": 2}}})
    total = progress.get("db.t")
    assert (total.rows_inserted, total.rows_updated, total.rows_deleted, total.commits) == (3, 3, 3, 2)
    assert total.offsets == {} and total.snapshot_id is None


@dataclass
class _LakeResult(_Result):
    rows_upserted: int = 0
    keys_deleted: int = 0
    rows_rewritten: int = 0


def test_rows_rewritten_and_write_amplification_when_the_lake_reports_them():
    progress = LakeProgress()
    batch = {"ops": {"db.a": {"u": 4}}, "results": [_LakeResult("db.a", rows_upserted=3, keys_deleted=1, rows_rewritten=36)]}
    (step,) = progress.add(batch)
    assert step.metadata()["rows_rewritten"] == 36 and step.metadata()["write_amplification"] == 9.75
    progress.add({"ops": {"db.a": {"c": 2}}, "results": [_LakeResult("db.a", rows_upserted=2)]})
    total = progress.get("db.a").metadata()
    assert total["rows_rewritten"] == 36 and total["write_amplification"] == round(41 / 6, 3)


def test_partition_lag_per_partition_of_the_ends_and_never_negative():
    from changelake.connectors.kafka_common import lag_of as kafka_lag_of, partition_lag

    positions = {("t", 0): 5, ("t", 1): 9, ("u", 0): 2}
    ends = {("t", 0): 7, ("t", 1): 4, ("t", 2): 3}
    assert partition_lag(positions, ends) == {("t", 0): 2, ("t", 1): 0, ("t", 2): 3}  # ("u", 0) has no end: left out
    assert kafka_lag_of(positions, ends) == 5
    assert lag_of is kafka_lag_of  # progress re-exports the one lag sum
