"""Pipeline 2's per-record checks: key columns present, inferred tables reported once."""

import pytest

from changelake.changelog import DataChangeEvent, Op, Schema, TableId
from changelake.changelog.types import DataType, TypeRoot
from changelake.connectors.kafka.source import note_inferred as _note_inferred
from changelake.pipeline.stage import MissingKeyError as _MissingKeyError, checked_schema as _checked_schema
from changelake.pipeline.stats import RunStats

T = TableId("shop", "t")
S = Schema.of([("id", DataType(TypeRoot.INT, False)), ("v", DataType(TypeRoot.STRING))], ["id"])


def test_update_whose_after_row_lacks_the_key_is_refused_naming_it():
    event = DataChangeEvent(T, Op.UPDATE, {"id": 1, "v": "a"}, {"id": None, "v": "b"}, S)
    with pytest.raises(_MissingKeyError) as info:
        _checked_schema(event, S)
    assert "['id'] of table shop.t missing or NULL in the 'after' row of a 'u' event" in str(info.value)
    assert _checked_schema(DataChangeEvent(T, Op.DELETE, {"id": 1}, None, S), S) is S


def test_inferred_tables_are_reported_once_and_static_keeps_the_first_schema():
    stats = RunStats("p")
    statics: dict = {}
    first = _note_inferred([DataChangeEvent(T, Op.CREATE, None, {"id": 1})], stats.inferred_schema_tables, statics, True)
    later = _note_inferred([DataChangeEvent(T, Op.CREATE, None, {"id": 2, "extra": 1})], stats.inferred_schema_tables, statics, True)
    assert stats.inferred_schema_tables == ["shop.t"]
    assert first[0].schema is not None and later[0].schema is first[0].schema and "extra" not in later[0].schema
    typed = _note_inferred([DataChangeEvent(TableId("a", "b"), Op.CREATE, None, {"id": 1}, S)], stats.inferred_schema_tables, statics, False)
    assert typed[0].schema is S and stats.inferred_schema_tables == ["shop.t"]
