"""Progress lines of a long run: events per table, position or lag, snapshot rows of the estimate
with percent and ETA, at a steady interval; plain lines where no terminal is attached."""

from __future__ import annotations

import io

from changelake.pipeline.progress import ProgressPrinter, RunProgress, describe_position


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_per_interval_with_tables_position_and_snapshot_eta():
    clock = Clock()
    p = RunProgress(interval_s=10, snapshot_estimate=1000, clock=clock)
    assert not p.due()
    p.add({"events": 250, "tables": {"db.a": 200, "db.b": 50}, "ops": {"db.a": {"r": 200}, "db.b": {"r": 50}},
           "position": {"phase": "snapshot", "file": "mysql-bin.000003", "pos": 4567}})
    clock.now += 10
    assert p.due()
    line = p.line()
    assert line == ("progress: 250 events in 10 s (25/s); db.a 200, db.b 50; position snapshot mysql-bin.000003:4567; "
                    "snapshot 250 of ~1,000 rows (25%, ETA 30s)")
    assert not p.due()  # the interval restarts
    p.add({"events": 5, "tables": {"db.b": 5}, "ops": {"db.b": {"u": 5}}, "position": {"phase": "binlog",
                                                                                      "file": "mysql-bin.000003", "pos": 9000}})
    clock.now += 10
    assert p.line() == "progress: 255 events in 20 s (13/s); db.a 200, db.b 55; position binlog mysql-bin.000003:9000"


def test_idle_run_and_kafka_lag():
    clock = Clock()
    p = RunProgress(interval_s=5, clock=clock)
    clock.now += 5
    p.lag = 42
    assert p.line() == "progress: 0 events in 5 s (0/s); no changes yet; lag 42"


def test_positions_are_described_briefly():
    assert describe_position({"phase": "binlog", "file": "f.000001", "pos": 4}) == "binlog f.000001:4"
    assert describe_position({"t/0": 5, "t/1": 7}) == "offsets of 2 partition(s)"
    assert describe_position(None) == ""


def test_plain_lines_without_a_terminal():
    out = io.StringIO()
    printer = ProgressPrinter(out)
    printer.show("progress: 1 events", 0.5)
    printer.close()
    assert out.getvalue() == "progress: 1 events\n"


def test_a_rich_status_line_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    printer = ProgressPrinter(out)
    printer.show("progress: 7 events", 0.25)
    printer.close()
    assert "progress: 7 events" in out.getvalue()
