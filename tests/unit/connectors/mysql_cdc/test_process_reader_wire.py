"""The process reader's pipe form of a batch (reader._to_wire / _from_wire): the same items back."""

from __future__ import annotations

import pickle

from changelake.changelog.event import DROP_TABLE, DataChangeEvent, Op
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import parse_data_type
from changelake.connectors.mysql_cdc.binlog.event_handler import Progress
from changelake.connectors.mysql_cdc.binlog.reader import _from_wire, _to_wire
from changelake.connectors.mysql_cdc.positions import BinlogPosition, SourcePosition


def test_a_batch_through_the_wire_form_and_pickle_is_the_same_batch():
    t = TableId("d", "t")
    schema = Schema.of([("id", parse_data_type("INT NOT NULL")), ("v", parse_data_type("STRING"))], ["id"])
    batch = [
        ("schemas", ()),
        ("event", DataChangeEvent(t, Op.UPDATE, {"id": 1, "v": "a"}, {"id": 1, "v": "b"}, schema, 1_700_000_000_000,
                                  {"phase": "binlog", "file": "mysql-bin.000002", "pos": 120, "row": 1, "gtid": "0-1-7"})),
        ("event", DataChangeEvent(t, Op.TRUNCATE, None, None, None, 5, {"file": "f", "pos": 4, "row": 2},
                                  transaction={"id": "0-1-7", "total_order": 2, "data_collection_order": 2},
                                  schema_change=DROP_TABLE)),
        ("progress", Progress(SourcePosition(BinlogPosition("mysql-bin.000002", 400)), "mysql-bin.000002", 400)),
        ("resnapshot", t),
    ]
    wire = _to_wire(batch)
    assert [w[0] for w in wire] == ["schemas", "ev", "ev", "progress", "resnapshot"]
    back = _from_wire(pickle.loads(pickle.dumps(wire)))
    assert back == batch
    assert all(type(e) is DataChangeEvent for k, e in back if k == "event")
    assert back[1][1].schema is not None and back[1][1].schema == schema
    assert back[1][1].is_drop is False and back[2][1].is_drop is True
