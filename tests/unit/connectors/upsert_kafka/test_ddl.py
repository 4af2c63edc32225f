"""parse_create_table: Flink CREATE TABLE ... WITH (...) text -> TableDeclaration."""

import pytest

from changelake.changelog import TypeRoot
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.upsert_kafka.ddl import parse_create_table

SEED_DDL = """
CREATE TABLE pageviews_per_region (
  user_region STRING,
  pv          BIGINT,
  uv          BIGINT,
  PRIMARY KEY (user_region) NOT ENFORCED
) WITH (
  'connector'                  = 'upsert-kafka',
  'topic'                      = 'pv_per_region',
  'properties.bootstrap.servers' = 'localhost:9092',
  'key.format'                 = 'avro',
  'value.format'               = 'avro'
);
"""


def test_seed_ddl():
    decl = parse_create_table(SEED_DDL)
    assert decl.name == "pageviews_per_region"
    assert decl.schema.names == ["user_region", "pv", "uv"]
    assert decl.schema.primary_key == ("user_region",)
    assert decl.schema.column("user_region").type.nullable is False  # PK columns are NOT NULL
    assert decl.schema.column("pv").type.root is TypeRoot.BIGINT
    assert decl.options == {
        "connector": "upsert-kafka",
        "topic": "pv_per_region",
        "properties.bootstrap.servers": "localhost:9092",
        "key.format": "avro",
        "value.format": "avro",
    }


def test_flink_types_backticks_and_pk_order():
    decl = parse_create_table(
        "CREATE TABLE `t` (`b` INT, a STRING, d DECIMAL(10, 2) NOT NULL, ts TIMESTAMP_LTZ(3), "
        "t2 TIMESTAMP(3) WITH LOCAL TIME ZONE, raw BYTES, tm TIME(3), dt TIMESTAMP(3), "
        "PRIMARY KEY (a, `b`) NOT ENFORCED) WITH ('topic' = 'x;`y`')"
    )
    s = decl.schema
    assert decl.name == "t"
    assert s.primary_key == ("a", "b")  # PK order, not column order
    assert str(s.column("d").type) == "DECIMAL(10, 2) NOT NULL"
    assert str(s.column("ts").type) == "TIMESTAMP_LTZ(3)"
    assert str(s.column("t2").type) == "TIMESTAMP_LTZ(3)"
    assert s.column("raw").type.root is TypeRoot.BYTES
    assert str(s.column("tm").type) == "TIME(3)"
    assert str(s.column("dt").type) == "TIMESTAMP(3)"
    assert decl.options["topic"] == "x;`y`"  # backticks inside strings kept


def test_inline_primary_key():
    decl = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY NOT ENFORCED, v STRING) WITH ('a' = 'b')")
    assert decl.schema.primary_key == ("id",)


def test_no_primary_key_gives_empty_key():
    assert parse_create_table("CREATE TABLE t (id INT) WITH ('a' = 'b')").schema.primary_key == ()


@pytest.mark.parametrize(
    "text,match",
    [
        ("SELECT 1", "exactly one CREATE TABLE"),
        ("CREATE TABLE t (a INT) WITH ('a'='b'); CREATE TABLE u (a INT)", "exactly one CREATE TABLE"),
        ("CREATE TABLE t (a GEOMETRY) WITH ('a'='b')", "column 'a'"),
        ("CREATE TABLE t (a INT, PRIMARY KEY (zz) NOT ENFORCED) WITH ('a'='b')", "primary key column"),
    ],
)
def test_errors(text, match):
    with pytest.raises(OptionValidationError, match=match):
        parse_create_table(text)


def test_watermark_clause_of_the_seed_is_recorded():
    decl = parse_create_table(
        """CREATE TABLE pageviews (
          user_id    BIGINT,
          page_id    BIGINT,
          viewtime   TIMESTAMP,
          user_region STRING,
          WATERMARK FOR viewtime AS viewtime - INTERVAL '2' SECOND
        ) WITH ('connector' = 'kafka', 'topic' = 'pv', 'format' = 'json')"""
    )
    assert decl.schema.names == ["user_id", "page_id", "viewtime", "user_region"]
    assert decl.watermark == ("viewtime", "viewtime - INTERVAL '2' SECOND")
    assert decl.options["format"] == "json"


def test_watermark_between_columns():
    decl = parse_create_table(
        "CREATE TABLE p (a BIGINT, WATERMARK FOR `ts` AS ts - INTERVAL '1' SECOND, ts TIMESTAMP(3), "
        "PRIMARY KEY (a) NOT ENFORCED) WITH ('x' = 'y')"
    )
    assert decl.schema.names == ["a", "ts"]
    assert decl.watermark == ("ts", "ts - INTERVAL '1' SECOND")
    assert decl.schema.primary_key == ("a",)
