"""Flink CDC transform rules: projection, primary keys, simple filters, first match wins."""

import decimal

import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.transform import Transformer, TransformError, TransformRule, infer_schema, parse_transform_rules
from changelake.changelog.types import DataType, TypeRoot

T = TableId("kafka_test", "customers")
SCHEMA = Schema.of(
    [("id", DataType(TypeRoot.INT)), ("name", DataType(TypeRoot.STRING)), ("age", DataType(TypeRoot.INT))]
)


def ev(op, before=None, after=None, schema=SCHEMA, table=T):
    return DataChangeEvent(table, op, before, after, schema)


def test_seed_rule_sets_primary_key_and_keeps_columns():
    rule = TransformRule(r"\.*.\.*", projection=r"\*", primary_keys="id")
    out = Transformer([rule]).apply(ev(Op.CREATE, after={"id": 1, "name": "a", "age": 3}))
    assert out.schema.primary_key == ("id",)
    assert out.schema.names == ["id", "name", "age"]
    assert out.schema.column("id").type.nullable is False
    assert out.after == {"id": 1, "name": "a", "age": 3}


def test_composite_primary_key_and_projection():
    rule = TransformRule("kafka_test.customers", projection="name, `id`", primary_keys="name, id")
    out = rule.apply(ev(Op.UPDATE, before={"id": 1, "name": "a", "age": 3}, after={"id": 1, "name": "a", "age": 4}))
    assert out.schema.primary_key == ("name", "id")
    assert out.before == {"name": "a", "id": 1}
    assert out.after == {"name": "a", "id": 1}


def test_first_matching_rule_wins():
    t = Transformer([TransformRule("kafka_test.customers", primary_keys="name"), TransformRule(r"\.*.\.*", primary_keys="id")])
    assert t.apply(ev(Op.CREATE, after={"id": 1, "name": "a", "age": 3})).schema.primary_key == ("name",)
    other = ev(Op.CREATE, after={"id": 1, "name": "a", "age": 3}, table=TableId("kafka_test", "products"))
    assert t.apply(other).schema.primary_key == ("id",)


def test_unmatched_event_passes_unchanged():
    e = ev(Op.CREATE, after={"id": 1, "name": "a", "age": 3})
    assert Transformer([TransformRule("x.y", primary_keys="id")]).apply(e) is e


@pytest.mark.parametrize(
    "flt, row, keep",
    [
        ("age > 10", {"id": 1, "name": "a", "age": 11}, True),
        ("age > 10", {"id": 1, "name": "a", "age": 10}, False),
        ("age >= 10 AND name = 'a'", {"id": 1, "name": "a", "age": 10}, True),
        ("name <> 'it''s'", {"id": 1, "name": "it's", "age": 10}, False),
        ("age = 3", {"id": 1, "name": "a", "age": None}, False),
        ("age IS NULL", {"id": 1, "name": "a", "age": None}, True),
        ("age is not null", {"id": 1, "name": "a", "age": None}, False),
        ("name = 'x AND y'", {"id": 1, "name": "x AND y", "age": 1}, True),
    ],
)
def test_filter_on_inserts(flt, row, keep):
    out = TransformRule(r"\.*.\.*", filter=flt).apply(ev(Op.CREATE, after=row))
    assert (out is not None) is keep


def test_filter_turns_updates_into_inserts_or_deletes():
    rule = TransformRule(r"\.*.\.*", filter="age > 10")
    young, old = {"id": 1, "name": "a", "age": 5}, {"id": 1, "name": "a", "age": 50}
    grown = rule.apply(ev(Op.UPDATE, before=young, after=old))
    assert (grown.op, grown.before, grown.after) == (Op.CREATE, None, old)
    shrunk = rule.apply(ev(Op.UPDATE, before=old, after=young))
    assert (shrunk.op, shrunk.before, shrunk.after) == (Op.DELETE, old, None)
    assert rule.apply(ev(Op.UPDATE, before=young, after=young)) is None
    assert rule.apply(ev(Op.DELETE, before=young)) is None
    assert rule.apply(ev(Op.DELETE, before=old)).op is Op.DELETE


def test_filter_on_decimal_column():
    schema = Schema.of([("id", DataType(TypeRoot.INT)), ("price", DataType.decimal(10, 2))])
    rule = TransformRule(r"\.*.\.*", filter="price > 9.99")
    assert rule.apply(ev(Op.CREATE, after={"id": 1, "price": decimal.Decimal("10.00")}, schema=schema))
    assert rule.apply(ev(Op.CREATE, after={"id": 1, "price": decimal.Decimal("9.99")}, schema=schema)) is None


@pytest.mark.parametrize(
    "kwargs, option, fragment",
    [
        # Flink CDC's language is accepted now (issue 20); what is outside it is still refused, naming the rule key.
        ({"projection": "id, UPPER(name)"}, "projection", "needs a name: write 'UPPER(name) AS <name>'"),
        ({"filter": "age > (SELECT 1)"}, "filter", "is not supported"),
        ({"filter": "age > 1 OR"}, "filter", "cannot parse"),
        ({"converter-after-transform": "HARD_DELETE"}, "converter-after-transform", "SOFT_DELETE"),
    ],
)
def test_unsupported_expressions_are_rejected(kwargs, option, fragment):
    with pytest.raises(TransformError) as info:
        TransformRule.from_mapping({"source-table": r"\.*.\.*", **kwargs})
    assert info.value.option == option
    assert fragment in str(info.value)


def test_unknown_primary_key_column_names_the_columns():
    rule = TransformRule(r"\.*.\.*", primary_keys="uid")
    with pytest.raises(TransformError, match=r"column\(s\) \['uid'\] not found; columns are \['id', 'name', 'age'\]"):
        rule.apply(ev(Op.CREATE, after={"id": 1, "name": "a", "age": 3}))


def test_schema_inferred_when_event_has_none():
    rule = TransformRule(r"\.*.\.*", primary_keys="id")
    out = rule.apply(ev(Op.DELETE, before={"id": 7, "price": decimal.Decimal("1.50"), "name": "x"}, schema=None))
    assert out.schema.primary_key == ("id",)
    assert out.schema.column("price").type == DataType.decimal(38, 2)
    assert infer_schema({"a": None}).column("a").type.root is TypeRoot.STRING


def test_parse_transform_rules_rejects_unknown_keys():
    rules = parse_transform_rules([{"source-table": r"\.*.\.*", "projection": r"\*", "primary-keys": "id"}])
    assert rules[0].primary_keys == ("id",)
    with pytest.raises(TransformError, match=r"Unsupported keys \['primary-key'\]"):
        parse_transform_rules([{"source-table": "a.b", "primary-key": "id"}])


def test_inferred_and_transformed_schemas_are_cached_by_value():
    import decimal

    from changelake.changelog.transform import Transformer, TransformRule, infer_schema

    a = infer_schema({"id": 1, "name": "x", "note": None})
    assert infer_schema({"id": 2, "name": "y", "note": None}) is a
    assert infer_schema({"id": 2, "name": "y", "note": "z"}) == a  # None and str both infer STRING
    assert infer_schema({"id": 2, "name": 3, "note": None}) != a
    d1 = infer_schema({"id": 1, "amount": decimal.Decimal("1.5")})
    d2 = infer_schema({"id": 1, "amount": decimal.Decimal("1.25")})
    assert d1 != d2  # the DECIMAL scale follows the value: never served from the cache
    t = Transformer([TransformRule(r"\.*.\.*", projection=r"\*", primary_keys="id")])
    from changelake.changelog import TableId

    out = t.apply_schema(TableId("db", "t"), a)
    assert out.primary_key == ("id",)
    assert t.apply_schema(TableId("db", "t"), infer_schema({"id": 3, "name": "w", "note": None})) is out
