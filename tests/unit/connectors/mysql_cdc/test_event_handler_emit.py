"""EventHandler._emit builds its DataChangeEvent without the frozen __init__: the same object."""

from __future__ import annotations

import pickle

from changelake.changelog.event import DROP_TABLE, DataChangeEvent, Op
from changelake.changelog.schema import TableId
from changelake.connectors.mysql_cdc.binlog.event_handler import EventHandler
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SourcePosition
from changelake.connectors.mysql_cdc.schema.tracker import SchemaTracker


def _handler() -> tuple[EventHandler, list]:
    out: list = []
    h = EventHandler(SourcePosition(BinlogPosition("mysql-bin.000002", 4)), lambda t: True,
                     SchemaTracker(lambda t: None), out.append)
    return h, out


def test_emitted_events_equal_the_constructed_ones_field_by_field_and_after_pickling():
    h, out = _handler()
    h._begin(120, explicit=True, xa=False)
    h._gtid = "0-1-7"
    t = TableId("d", "t")
    h._tx.emit()
    h._emit(t, Op.UPDATE, {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, None, 1_700_000_000_000)
    h._tx.emit()
    h._emit(t, Op.TRUNCATE, None, None, None, 5, schema_change=DROP_TABLE)
    events = [e for kind, e in out if kind == "event"]
    expected = [
        DataChangeEvent(t, Op.UPDATE, {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, None, 1_700_000_000_000,
                        {"phase": "binlog", "file": "mysql-bin.000002", "pos": 120, "row": 1, "gtid": "0-1-7"}),
        DataChangeEvent(t, Op.TRUNCATE, None, None, None, 5,
                        {"phase": "binlog", "file": "mysql-bin.000002", "pos": 120, "row": 2, "gtid": "0-1-7"},
                        schema_change=DROP_TABLE),
    ]
    assert events == expected
    for got, want in zip(events, expected):
        assert type(got) is DataChangeEvent
        assert list(vars(got).items()) == list(vars(want).items())  # same fields, same order
        assert repr(got) == repr(want)
        again = pickle.loads(pickle.dumps(got))
        assert again == want and list(vars(again)) == list(vars(want))
    assert events[1].is_drop and events[0].key_row == {"id": 1, "v": "b"}
