"""When Pipeline 2 commits its buffered polls (commit.max-rows, commit.interval, idle, stop)."""

from __future__ import annotations

import pytest

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.iceberg import IcebergSinkOptions, parse_sink_options
from changelake.connectors.lake.commit_policy import CommitPolicy, PendingPolls


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_pending_polls_merge_offsets_by_max_and_count_tables():
    pending = PendingPolls()
    pending.note(3, 4, {"t/0": 10, "t/1": 5}, {"db.a": 2})
    pending.note(2, 2, {"t/0": 12, "t/1": 4}, {"db.a": 1, "db.b": 1})
    assert (pending.records, pending.events) == (5, 6)
    assert pending.offsets == {"t/0": 12, "t/1": 5}
    assert pending.applied == {"db.a": 3, "db.b": 1}


def test_a_commit_is_due_when_the_buffer_is_full_the_poll_was_empty_or_the_interval_passed(monkeypatch):
    clock = FakeClock()
    policy = CommitPolicy(interval_s=5.0, clock=clock)
    pending = PendingPolls()
    monkeypatch.setattr("changelake.connectors.lake.commit_policy.time.monotonic", clock)
    pending.note(1, 1, {"t/0": 1}, {})
    assert not policy.due(pending, buffer_full=False, polled_nothing=False)
    assert policy.due(pending, buffer_full=True, polled_nothing=False)
    assert policy.due(pending, buffer_full=False, polled_nothing=True)
    clock.now += 4.9
    assert not policy.due(pending, buffer_full=False, polled_nothing=False)
    clock.now += 0.1
    assert policy.due(pending, buffer_full=False, polled_nothing=False)
    assert not CommitPolicy(5.0, clock).due(PendingPolls(), buffer_full=False, polled_nothing=False)


def test_commit_interval_option_is_a_flink_duration_with_a_10s_default():
    base = {"type": "iceberg", "catalog.properties.uri": "sqlite:///:memory:", "catalog.properties.warehouse": "file:///tmp/w"}
    assert parse_sink_options(base).commit_interval_s == 10.0
    opts = parse_sink_options({**base, "commit.interval": "500ms"})
    assert opts.commit_interval_s == 0.5
    assert CommitPolicy.of(opts).interval_s == 0.5
    assert opts.describe()["commit.interval"] == "500ms"
    with pytest.raises(OptionValidationError, match="commit.interval"):
        parse_sink_options({**base, "commit.interval": "soon"})
    with pytest.raises(OptionValidationError, match="'commit.interval' must be > 0"):
        parse_sink_options({**base, "commit.interval": "0s"})
    assert IcebergSinkOptions.sql("sqlite:///:memory:", "file:///tmp/w", **{"commit.interval": "2 min"}).commit_interval_s == 120
