"""Flink CDC's transform expression language: parsing, Flink types, Flink semantics, errors, UDFs.

Values are computed by the evaluator (pyarrow.compute) on small Arrow batches and compared with
what Flink CDC's documented semantics give for the same input.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.expressions import ExpressionError, Frame, bind, load_udfs, parse_filter, parse_projection
from changelake.changelog.expressions.values import java_double
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.transform import TransformError, TransformRule, parse_transform_rules
from changelake.changelog.types import DataType, TypeRoot

INT = DataType(TypeRoot.INT)
BIGINT = DataType(TypeRoot.BIGINT)
STR = DataType(TypeRoot.VARCHAR, length=20)
DEC = DataType.decimal(10, 2)
DBL = DataType(TypeRoot.DOUBLE)
TS = DataType(TypeRoot.TIMESTAMP, precision=3)
SCOPE = {"i": INT, "j": INT, "b": BIGINT, "s": STR, "d": DEC, "f": DBL, "ts": TS, "flag": DataType(TypeRoot.BOOLEAN)}


def frame(**columns) -> Frame:
    arrays = {}
    n = None
    for name, values in columns.items():
        from changelake.changelog.expressions import to_arrow_array

        arrays[name] = to_arrow_array(values, SCOPE[name])
        n = len(values)
    return Frame(arrays, n or 1, now=dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone.utc))


def ev(text: str, fr: Frame, scope=SCOPE, **kw):
    (item,) = parse_projection(f"{text} AS x")
    bound = bind(item.node, scope, text=text, **kw)
    return bound.dtype, bound.evaluate(fr).to_pylist()


@pytest.mark.parametrize(
    "text, dtype, values",
    [
        ("i + j", "INT", [3, None]),
        ("i * b", "BIGINT", [2, None]),
        ("i / j", "INT", [0, None]),  # integer division, as Java
        ("d * i", "DECIMAL(19, 2)", [Decimal("1.25"), None]),  # DECIMAL(10,2) * DECIMAL(10,0), UP_TO_19
        ("d + i", "DECIMAL(13, 2)", [Decimal("2.25"), None]),
        ("d / 3", "DECIMAL(19, 11)", [Decimal("0.41666666667"), None]),
        ("f * 2", "DOUBLE", [3.0, None]),
        ("1.50 + 1", "DECIMAL(13, 2)", [Decimal("2.50"), Decimal("2.50")]),
        ("-i", "INT", [-1, None]),
    ],
)
def test_arithmetic_types_follow_calcite_and_values_follow_java(text, dtype, values):
    fr = frame(i=[1, None], j=[2, None], b=[2, None], d=[Decimal("1.25"), None], f=[1.5, None])
    got_type, got = ev(text, fr)
    assert got_type.to_sql() == dtype
    assert got == values


def test_integer_overflow_wraps_and_remainder_has_the_dividends_sign():
    fr = frame(i=[2147483647, -7], j=[1, 2])
    assert ev("i + j", fr)[1] == [-2147483648, -5]
    assert ev("i % j", fr)[1] == [0, -1]
    assert ev("MOD(i, j)", fr)[1] == [0, -1]
    assert ev("i / j", fr)[1] == [2147483647, -3]


def test_decimal_precision_mode_up_to_38():
    fr = frame(d=[Decimal("1.25")], i=[3])
    assert ev("d * i", fr, max_precision=38)[0].to_sql() == "DECIMAL(20, 2)"


def test_comparisons_with_null_are_false_and_logic_is_three_valued():
    fr = frame(i=[1, None, 3], flag=[True, None, False])
    assert ev("i = 1", fr)[1] == [True, False, False]
    assert ev("i <> 1", fr)[1] == [False, False, True]
    assert ev("NOT (i = 1)", fr)[1] == [False, True, True]
    assert ev("i IS NULL", fr)[1] == [False, True, False]
    assert ev("flag AND TRUE", fr)[1] == [True, None, False]
    assert ev("flag OR TRUE", fr)[1] == [True, True, True]
    assert ev("flag IS TRUE", fr)[1] == [True, False, False]
    assert ev("flag IS NOT TRUE", fr)[1] == [False, True, True]


def test_in_between_like_and_their_negations():
    fr = frame(i=[1, 5, None], s=["alice", "Bob", None])
    assert ev("i IN (1, 2)", fr)[1] == [True, False, False]
    assert ev("i NOT IN (1, 2)", fr)[1] == [False, True, False]
    assert ev("i BETWEEN 2 AND 5", fr)[1] == [False, True, False]
    assert ev("i NOT BETWEEN 2 AND 5", fr)[1] == [True, False, False]
    assert ev("s LIKE 'a%'", fr)[1] == [True, False, False]
    assert ev("s LIKE '_ob'", fr)[1] == [False, True, False]
    assert ev("s NOT LIKE 'a%'", fr)[1] == [False, True, False]
    assert ev("s IN ('Bob', 'x')", fr)[1] == [False, True, False]


def test_string_literal_compared_with_a_timestamp_or_number_is_coerced():
    fr = frame(ts=[dt.datetime(2024, 1, 1, 10, 0)], d=[Decimal("9.99")])
    assert ev("ts > '2024-01-01 09:00:00'", fr)[1] == [True]
    assert ev("d >= '9.99'", fr)[1] == [True]


def test_case_if_coalesce_nullif():
    fr = frame(i=[1, 2, None], s=["a", None, "c"])
    t, v = ev("CASE WHEN i = 1 THEN 'one' WHEN i = 2 THEN 'two' ELSE 'many' END", fr)
    assert v == ["one", "two", "many"] and t.root is TypeRoot.CHAR and t.length == 4
    assert ev("CASE i WHEN 1 THEN 10 WHEN 2 THEN 20 END", fr)[1] == [10, 20, None]
    assert ev("IF(i > 1, 'big', 'small')", fr)[1] == ["small", "big", "small"]
    t, v = ev("COALESCE(s, 'none')", fr)
    assert v == ["a", "none", "c"] and t.is_string
    assert ev("COALESCE(i, 1.5)", fr)[0].to_sql() == "DECIMAL(11, 1)"
    assert ev("NULLIF(i, 2)", fr)[1] == [1, None, None]


@pytest.mark.parametrize(
    "text, values",
    [
        ("UPPER(s)", [" AB ", None]),
        ("LOWER(s)", [" ab ", None]),
        ("TRIM(s)", ["aB", None]),
        ("TRIM(LEADING ' ' FROM s)", ["aB ", None]),
        ("CHAR_LENGTH(s)", [4, None]),
        ("CONCAT(s, '-', i)", [" aB -7", None]),
        ("s || '!'", [" aB !", None]),
        ("SUBSTR(s, 2)", ["aB ", None]),
        ("SUBSTR(s, 2, 1)", ["a", None]),
        ("SUBSTR(s, -2, 5)", ["B ", None]),
        ("SUBSTR(s, 0, 2)", [" a", None]),
        ("SUBSTRING(s FROM 9)", ["", None]),
        ("REGEXP_REPLACE(s, '[aB]+', 'x')", [" x ", None]),
    ],
)
def test_string_functions(text, values):
    fr = frame(s=[" aB ", None], i=[7, 8])
    assert ev(text, fr)[1] == values


def test_cast_follows_flink_cdcs_conversion_table():
    fr = frame(i=[12, -1], d=[Decimal("2.50"), Decimal("-2.55")], f=[1e10, 0.001], s=["42", "x"],
               ts=[dt.datetime(2024, 1, 2, 3, 4, 5, 120000), dt.datetime(2024, 1, 2, 3, 4, 5)])
    assert ev("CAST(i AS VARCHAR)", fr) == (DataType(TypeRoot.STRING).with_nullable(True), ["12", "-1"])
    assert ev("CAST(d AS STRING)", fr)[1] == ["2.50", "-2.55"]
    assert ev("CAST(f AS STRING)", fr)[1] == ["1.0E10", "0.001"]
    assert ev("CAST(ts AS STRING)", fr)[1] == ["2024-01-02 03:04:05.120", "2024-01-02 03:04:05.000"]
    assert ev("CAST(i AS BOOLEAN)", fr)[1] == [True, True]
    assert ev("CAST(d AS INT)", fr)[1] == [2, -2]  # truncated, as Java's intValue
    assert ev("CAST(d AS DECIMAL(10, 1))", fr)[1] == [Decimal("2.5"), Decimal("-2.6")]  # HALF_UP
    assert ev("CAST(i AS DOUBLE)", fr)[1] == [12.0, -1.0]
    assert ev("CAST('2024-05-06T07:08:09' AS TIMESTAMP)", fr)[1] == [dt.datetime(2024, 5, 6, 7, 8, 9)] * 2
    with pytest.raises(ExpressionError) as info:
        ev("CAST(s AS INT)", fr)
    assert info.value.row == 1 and "'x'" in str(info.value)


def test_java_double_to_string():
    assert [java_double(v) for v in (1.0, 0.1, 1e7, 1.5e-4, 123456.789, -2.5e20)] == [
        "1.0", "0.1", "1.0E7", "1.5E-4", "123456.789", "-2.5E20"]


def test_numeric_functions_round_half_up():
    fr = frame(d=[Decimal("2.45"), Decimal("-2.45")], f=[2.675, -0.5], i=[-3, 4])
    assert ev("ROUND(d, 1)", fr) == (DataType.decimal(10, 1), [Decimal("2.5"), Decimal("-2.5")])
    assert ev("ROUND(f, 2)", fr)[1] == [2.68, -0.5]
    assert ev("ROUND(f)", fr)[1] == [3.0, -1.0]
    assert ev("ABS(i)", fr)[1] == [3, 4]
    assert ev("FLOOR(d)", fr) == (DataType.decimal(10, 0), [Decimal(2), Decimal(-3)])
    assert ev("CEIL(f)", fr)[1] == [3.0, -0.0]


def test_temporal_functions():
    fr = frame(ts=[dt.datetime(2024, 2, 3, 4, 5, 6, 789000)], s=["2024-02-03 04:05:06"])
    assert ev("DATE_FORMAT(ts, 'yyyy/MM/dd HH:mm:ss.SSS')", fr)[1] == ["2024/02/03 04:05:06.789"]
    assert ev("DATE_FORMAT(ts, 'yy-M-d')", fr)[1] == ["24-2-3"]
    assert ev("TO_TIMESTAMP(s)", fr) == (DataType(TypeRoot.TIMESTAMP, precision=3), [dt.datetime(2024, 2, 3, 4, 5, 6)])
    assert ev("TO_TIMESTAMP('03.02.2024', 'dd.MM.yyyy')", fr)[1] == [dt.datetime(2024, 2, 3)]
    assert ev("TO_TIMESTAMP('nonsense')", fr)[1] == [None]
    now_type, now = ev("NOW()", fr)
    assert now_type.to_sql() == "TIMESTAMP_LTZ(3)"
    assert now == [dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)]  # the batch's processing time
    assert ev("CURRENT_TIMESTAMP", fr)[1] == now
    assert ev("LOCALTIMESTAMP", fr)[1] == [dt.datetime(2026, 1, 2, 3, 4, 5, 678000)]
    assert ev("CURRENT_DATE", fr)[1] == [dt.date(2026, 1, 2)]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("nope + 1", "unknown column 'nope'"),
        ("FOO(i)", "unknown function FOO()"),
        ("UPPER(i)", "UPPER needs a string argument, got INT"),
        ("i + s", "'+' needs numeric operands"),
        ("SUBSTR(s)", "SUBSTR takes 2 or 3 argument(s)"),
    ],
)
def test_bind_errors_name_the_problem(text, fragment):
    with pytest.raises(ExpressionError, match=None) as info:
        ev(text, frame(i=[1]))
    assert fragment in str(info.value)


def test_division_by_zero_names_the_row():
    with pytest.raises(ExpressionError) as info:
        ev("i / j", frame(i=[1, 2, 3], j=[1, 1, 0]))
    assert info.value.row == 2 and "division by zero" in str(info.value)


def test_filter_parses_or_and_not():
    node = parse_filter("i > 1 OR NOT (s LIKE 'a%') AND s IS NOT NULL")
    fr = frame(i=[0, 2, 0], s=["abc", "abc", "xyz"])
    assert bind(node, SCOPE).evaluate(fr).to_pylist() == [False, True, True]


def test_projection_parse_errors():
    with pytest.raises(ExpressionError, match="needs a name"):
        parse_projection("i, i + 1")
    with pytest.raises(ExpressionError, match=r"names column\(s\) \['x'\] more than once"):
        parse_projection("i AS x, j AS x")
    items = parse_projection(r"\*, UPPER(s) AS u, s || 'x' sx, `weird col`")
    assert [i.name for i in items] == [None, "u", "sx", "weird col"]


# -- transform rules: metadata columns, filters on computed columns, keys, errors, UDFs, batches --------

T = TableId("app_db", "order_01")
SCHEMA = Schema.of([("id", DataType(TypeRoot.INT, nullable=False)), ("name", STR), ("qty", INT)], ["id"])


def event(op, before=None, after=None, table=T, position=None):
    return DataChangeEvent(table, op, before, after, SCHEMA, 5, position or {"file": "b.1", "pos": 4})


def test_metadata_columns_and_computed_columns_in_a_rule():
    rule = TransformRule(r"app_db.\.*", projection=r"\*, UPPER(name) AS up, __schema_name__ AS db, "
                         r"__table_name__, __namespace_name__ AS ns, __data_event_type__ AS op")
    out = rule.apply(event(Op.UPDATE, {"id": 1, "name": "a", "qty": 1}, {"id": 1, "name": "b", "qty": 2}))
    assert out.before == {"id": 1, "name": "a", "qty": 1, "up": "A", "db": "app_db", "__table_name__": "order_01",
                          "ns": None, "op": "-U"}
    assert out.after["op"] == "+U" and out.after["up"] == "B"
    assert out.schema.names == ["id", "name", "qty", "up", "db", "__table_name__", "ns", "op"]
    assert out.schema.primary_key == ("id",)
    assert out.schema.column("up").type.to_sql() == "VARCHAR(20)"


def test_filter_may_use_a_computed_column_and_turns_updates_into_inserts_or_deletes():
    rule = TransformRule(r"\.*.\.*", projection="id, UPPER(name) AS name, qty * 2 AS q2", filter="name = 'BIG' OR q2 > 10")
    keep = rule.apply(event(Op.CREATE, after={"id": 1, "name": "big", "qty": 1}))
    assert keep.after == {"id": 1, "name": "BIG", "q2": 2}
    assert rule.apply(event(Op.CREATE, after={"id": 2, "name": "small", "qty": 1})) is None
    grown = rule.apply(event(Op.UPDATE, {"id": 2, "name": "x", "qty": 1}, {"id": 2, "name": "x", "qty": 6}))
    assert grown.op is Op.CREATE and grown.after == {"id": 2, "name": "X", "q2": 12}


def test_sharded_tables_keyed_by_table_name_do_not_collide():
    rule = TransformRule(r"app_db.order_\.*", projection=r"\*, __table_name__", primary_keys="__table_name__, id")
    a = rule.apply(event(Op.CREATE, after={"id": 1, "name": "a", "qty": 1}))
    b = rule.apply(event(Op.CREATE, after={"id": 1, "name": "b", "qty": 1}, table=TableId("app_db", "order_02")))
    assert a.schema.primary_key == ("__table_name__", "id")
    assert a.schema.key_of(a.after) != b.schema.key_of(b.after)
    assert a.schema.column("__table_name__").type.nullable is False
    with pytest.raises(TransformError, match="project a metadata column"):
        TransformRule(r"\.*.\.*", primary_keys="__table_name__, id").apply(event(Op.CREATE, after={"id": 1}))


def test_expression_error_names_the_rule_the_column_and_the_row():
    rule = TransformRule(r"app_db.\.*", projection="id, 100 / qty AS per")
    events = [event(Op.CREATE, after={"id": i, "name": "n", "qty": q}, position={"offset": 40 + i})
              for i, q in ((1, 5), (2, 0))]
    with pytest.raises(TransformError) as info:
        rule.apply_events(events)
    err = info.value
    assert err.option == "projection" and err.column == "per" and err.row == 1
    text = str(err)
    assert "source-table 'app_db.\\\\.*'" in text or "app_db" in text
    assert "division by zero" in text and "'offset': 42" in text and "app_db.order_01" in text


def test_bind_error_names_the_rule_and_column():
    rule = TransformRule(r"app_db.\.*", projection="id, missing + 1 AS m")
    with pytest.raises(TransformError) as info:
        rule.apply_schema(SCHEMA)
    assert info.value.column == "m" and "unknown column 'missing'" in str(info.value)


def test_soft_delete_converter():
    rule = TransformRule(r"\.*.\.*", projection=r"\*, __data_event_type__ AS op_type", converter_after_transform="SOFT_DELETE")
    out = rule.apply(event(Op.DELETE, before={"id": 1, "name": "a", "qty": 1}))
    assert out.op is Op.CREATE and out.after["op_type"] == "-D" and out.before is None


def test_udfs_scalar_vectorised_and_class():
    udfs = [{"name": "addone", "classpath": "udfs_for_tests.add_one"},
            {"name": "TIMES_TEN", "classpath": "udfs_for_tests.times_ten"},
            {"name": "prefix", "classpath": "udfs_for_tests.Prefix"},
            {"name": "greet", "classpath": "udfs_for_tests.greet"}]
    (rule,) = parse_transform_rules(
        [{"source-table": r"\.*.\.*", "projection": "id, addone(addone(qty)) AS q2, times_ten(qty) AS q10, "
          "prefix(name) AS p, greet(name, 'hi %s') AS g", "filter": "addone(id) < 10"}], udfs=udfs)
    out = rule.apply(event(Op.CREATE, after={"id": 1, "name": "ann", "qty": 3}))
    assert out.after == {"id": 1, "q2": 5, "q10": 30, "p": "p:ann", "g": "hi ann"}
    assert [out.schema.column(c).type.root for c in ("q2", "q10", "p", "g")] == [
        TypeRoot.INT, TypeRoot.BIGINT, TypeRoot.STRING, TypeRoot.STRING]
    assert rule.apply(event(Op.CREATE, after={"id": 9, "name": "ann", "qty": 3})) is None


def test_udf_errors():
    with pytest.raises(ExpressionError, match="cannot import module"):
        load_udfs([{"name": "x", "classpath": "no_such_module.fn"}])
    with pytest.raises(ExpressionError, match="registered twice"):
        load_udfs([{"name": "a", "classpath": "udfs_for_tests.add_one"},
                   {"name": "A", "classpath": "udfs_for_tests.add_one"}])
    (rule,) = parse_transform_rules([{"source-table": r"\.*.\.*", "projection": "id, broken(id) AS b"}],
                                    udfs=[{"name": "broken", "classpath": "udfs_for_tests.broken"}])
    with pytest.raises(TransformError, match=r"UDF broken .* failed: RuntimeError: boom") as info:
        rule.apply(event(Op.CREATE, after={"id": 1, "name": "a", "qty": 1}))
    assert info.value.column == "b" and info.value.row == 0


def test_apply_batch_filters_rows_and_re_kinds_update_halves():
    rule = TransformRule(r"\.*.\.*", projection="id, UPPER(name) AS up, __data_event_type__ AS k", filter="qty > 1")
    batch = pa.table({"id": pa.array([1, 2, 2, 3, 3], pa.int32()), "name": ["a", "b", "b", "c", "c"],
                      "qty": pa.array([5, 1, 9, 9, 0], pa.int32())})
    out = rule.apply_batch(T, SCHEMA, batch, ["+I", "-U", "+U", "-U", "+U"])
    assert out.table.column("up").to_pylist() == ["A", "B", "C"]
    assert out.row_kinds.to_pylist() == ["+I", "+I", "-D"]  # the update halves whose partner was filtered out
    assert out.indices.to_pylist() == [0, 2, 3]
    assert out.table.column("k").to_pylist() == ["+I", "+U", "-U"]
    assert out.schema.names == ["id", "up", "k"]


def test_pipeline_options_time_zone_and_precision_mode():
    (rule,) = parse_transform_rules([{"source-table": r"\.*.\.*", "projection": "id, qty * 1.5 AS x"}],
                                    pipeline={"local-time-zone": "Asia/Shanghai", "transform.decimal.precision.mode": "UP_TO_38"})
    assert rule.max_precision == 38
    with pytest.raises(TransformError, match="UP_TO_19, UP_TO_38"):
        parse_transform_rules([], pipeline={"transform.decimal.precision.mode": "UP_TO_7"})
    (rule,) = parse_transform_rules([{"source-table": r"\.*.\.*", "projection": "id, LOCALTIMESTAMP AS lt"}],
                                    pipeline={"local-time-zone": "+08:00"})
    now = dt.datetime(2026, 1, 1, 20, 0, tzinfo=dt.timezone.utc)
    out = rule.apply(event(Op.CREATE, after={"id": 1, "name": "a", "qty": 1}), now=now)
    assert out.after["lt"] == dt.datetime(2026, 1, 2, 4, 0)


def test_append_only_turns_every_change_into_an_insert_keyed_by_kind_and_position():
    from changelake.changelog.transform import append_only, event_position

    rule = TransformRule(r"\.*.\.*", projection=r"\*, __data_event_type__ AS op, __event_position__ AS pos",
                         primary_keys="id, op, pos")
    pos = {"phase": "binlog", "file": "mysql-bin.000003", "pos": 4711, "row": 2, "watermarks": None}
    assert event_position(pos) == "binlog:mysql-bin.000003:4711:2"
    events = rule.apply_events([
        event(Op.UPDATE, {"id": 1, "name": "a", "qty": 1}, {"id": 1, "name": "b", "qty": 1}, position=pos),
        event(Op.DELETE, {"id": 1, "name": "b", "qty": 1}, position={"topic": "t", "partition": 0, "offset": 9}),
    ])
    out = append_only(events)
    assert [(e.op, e.after["op"], e.after["name"]) for e in out] == [
        (Op.CREATE, "-U", "a"), (Op.CREATE, "+U", "b"), (Op.CREATE, "-D", "b")]
    keys = {e.schema.key_of(e.after) for e in out}
    assert len(keys) == 3 and ("t:0:9" in {k[2] for k in keys})


def test_apply_batch_without_filter_and_with_soft_delete():
    rule = TransformRule(r"\.*.\.*", projection=r"\*, __table_name__ AS t", converter_after_transform="SOFT_DELETE")
    batch = pa.table({"id": pa.array([1, 2], pa.int32()), "name": ["a", "b"], "qty": pa.array([1, 2], pa.int32())})
    out = rule.apply_batch(T, SCHEMA, batch, pa.array(["+I", "-D"]))
    assert out.row_kinds.to_pylist() == ["+I", "+I"] and out.indices.to_pylist() == [0, 1]
    assert out.table.column("t").to_pylist() == ["order_01", "order_01"]
    plain = TransformRule(r"\.*.\.*", projection=r"\*, qty + 1 AS q").apply_batch(T, SCHEMA, batch, ["+I", "-D"])
    assert plain.row_kinds.to_pylist() == ["+I", "-D"] and plain.table.column("q").to_pylist() == [2, 3]


def test_the_transform_example_binds_on_the_demo_customers_schema():
    from pathlib import Path

    from changelake.pipeline.definition import load_pipeline

    path = Path(__file__).resolve().parents[3] / "pipelines" / "examples" / "kafka-to-iceberg-transform.yaml"
    defn = load_pipeline(path, env={"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092"})
    (rule,) = parse_transform_rules(defn.transform, pipeline=defn.pipeline, udfs=defn.user_defined_functions)
    customers = Schema.of([("id", DataType(TypeRoot.INT, nullable=False)), ("name", DataType(TypeRoot.VARCHAR, length=255)),
                           ("address", DataType(TypeRoot.VARCHAR, length=1024)), ("phone_number", DataType(TypeRoot.VARCHAR, length=512)),
                           ("age", DataType(TypeRoot.INT))], ["id"])
    out = rule.apply(DataChangeEvent(TableId("kafka_test", "customers"), Op.READ, None,
                                     {"id": 1, "name": " Ann ", "address": "Beijing", "phone_number": "123", "age": 70}, customers))
    assert out.schema.primary_key == ("id",)
    assert {k: out.after[k] for k in ("name_upper", "contact", "age_text", "segment", "src_db", "src_table")} == {
        "name_upper": " ANN ", "contact": "Ann <123>", "age_text": "70", "segment": "senior",
        "src_db": "kafka_test", "src_table": "customers"}
    assert out.schema.column("processed_at").type.root is TypeRoot.TIMESTAMP_LTZ
