"""SourceMetrics / SinkMetrics snapshots with a fake clock."""

from changelake.connectors.metrics import Meter, SinkMetrics, SourceMetrics


class Clock:
    def __init__(self, t=0.0):
        self.t = t

    def __call__(self):
        return self.t


def test_meter_rate_over_window():
    c = Clock(0.0)
    m = Meter(window_s=10, clock=c)
    c.t = 10.0
    m.mark(50)
    assert m.rate() == 5.0
    c.t = 25.0  # the mark left the window
    assert m.rate() == 0.0
    assert m.count == 50


def test_source_metrics_snapshot():
    c, wall = Clock(0.0), Clock(1000.0)
    s = SourceMetrics(window_s=10, clock=c, wall_clock=wall)
    c.t = 10.0
    s.record_fetch(20, 2000, event_ts_ms=999_000)
    s.record_emit(998_500)
    s.set_pending_records(7)
    c.t = 10.5
    snap = s.snapshot()
    assert snap["numRecordsIn"] == 20
    assert snap["numBytesIn"] == 2000
    assert snap["numRecordsInPerSecond"] == 2.0
    assert snap["numBytesInPerSecond"] == 200.0
    assert snap["currentFetchEventTimeLag"] == 1000.0
    assert snap["currentEmitEventTimeLag"] == 1500.0
    assert snap["sourceIdleTime"] == 500.0
    assert snap["pendingRecords"] == 7


def test_sink_metrics_snapshot():
    c = Clock(0.0)
    s = SinkMetrics(window_s=10, clock=c)
    c.t = 10.0
    s.record_out(4, 400)
    s.record_send_time(12.5)
    s.record_error()
    snap = s.snapshot()
    assert snap == {
        "numRecordsOut": 4,
        "numRecordsOutPerSecond": 0.4,
        "numBytesOut": 400,
        "numBytesOutPerSecond": 40.0,
        "currentSendTime": 12.5,
        "numRecordsOutErrors": 1,
    }
