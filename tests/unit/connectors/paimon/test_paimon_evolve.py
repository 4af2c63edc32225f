"""Schema evolution planning of the Paimon sink (pure logic)."""

from __future__ import annotations

import pytest

from changelake.changelog.schema import Schema
from changelake.changelog.types import parse_data_type
from changelake.connectors.paimon.errors import SchemaEvolutionError
from changelake.connectors.paimon.evolve import SchemaChange, plan_evolution
from changelake.connectors.paimon.options import ROW_KIND_FIELD
from changelake.connectors.paimon.types import to_paimon_type, widening

LAKE = [("id", "INT"), ("v", "SMALLINT"), ("f", "FLOAT"), ("d", "DECIMAL(10, 2)"), (ROW_KIND_FIELD, "STRING")]


def schema(**types: str) -> Schema:
    return Schema.of([(n, parse_data_type(t)) for n, t in types.items()], ["id"])


def test_add_and_widen():
    incoming = schema(id="INT NOT NULL", v="BIGINT", f="DOUBLE", d="DECIMAL(12, 2)", extra="VARCHAR(3)")
    assert plan_evolution(LAKE, ["id"], incoming, table="db.t") == [
        SchemaChange("widen", "v", "BIGINT"),
        SchemaChange("widen", "f", "DOUBLE"),
        SchemaChange("widen", "d", "DECIMAL(12, 2)"),
        SchemaChange("add", "extra", "STRING"),
    ]


def test_narrower_incoming_types_and_dropped_columns_need_no_change():
    assert plan_evolution(LAKE, ["id"], schema(id="TINYINT NOT NULL", v="TINYINT", d="DECIMAL(5, 2)"), table="db.t") == []


@pytest.mark.parametrize(("column", "new", "old_type", "new_type"), [
    ("v", "VARCHAR(4)", "SMALLINT", "STRING"),
    ("d", "DECIMAL(12, 3)", "DECIMAL(10, 2)", "DECIMAL(12, 3)"),
    ("f", "INT", "FLOAT", "INT"),
])
def test_incompatible_change_is_an_error_naming_table_column_and_types(column, new, old_type, new_type):
    with pytest.raises(SchemaEvolutionError) as info:
        plan_evolution(LAKE, ["id"], schema(id="INT NOT NULL", **{column: new}), table="db.t")
    err = info.value
    assert (err.table, err.column, err.old_type, err.new_type) == ("db.t", column, old_type, new_type)
    assert f"column {column!r} of Paimon table 'db.t' changed type from {old_type} to {new_type}" in str(err)


def test_mapping_and_widening_table():
    assert to_paimon_type(parse_data_type("DECIMAL(39, 0)")) == "STRING"
    assert to_paimon_type(parse_data_type("TIME(3)")) == "STRING"
    assert to_paimon_type(parse_data_type("TIMESTAMP(3)")) == "TIMESTAMP(6)"
    assert widening("INT", "INT") == "same" and widening("BIGINT", "INT") == "keep" and widening("STRING", "INT") == "bad"
