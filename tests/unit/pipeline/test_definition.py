"""Pipeline YAML: Flink CDC blocks, ${VAR} resolution, secrets masked, clear errors."""

from __future__ import annotations

import pytest

from changelake.connectors.errors import OptionValidationError
from changelake.pipeline.definition import load_pipeline, parse_pipeline

YAML = """
pipeline:
  name: ${PIPE:-p1}
source:
  type: mysql
  hostname: ${MYSQL_HOST}
  port: 3306
  password: ${MYSQL_PASSWORD}
  tables: kafka_test.\\.*
sink:
  type: kafka
  properties.bootstrap.servers: ${KAFKA_BOOTSTRAP_SERVERS}
  sink.add-tableId-to-header-enabled: true
transform:
  - source-table: \\.*.\\.*
    projection: \\*
    primary-keys: id,region
"""

ENV = {"MYSQL_HOST": "db.internal", "MYSQL_PASSWORD": "s3cret!", "KAFKA_BOOTSTRAP_SERVERS": "k:9092"}


def test_blocks_are_parsed_with_values_as_strings(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(YAML)
    d = load_pipeline(path, env=ENV)
    assert d.name == "p1"
    assert d.source == {"type": "mysql", "hostname": "db.internal", "port": "3306", "password": "s3cret!",
                        "tables": "kafka_test.\\.*"}
    assert d.options("sink") == {"properties.bootstrap.servers": "k:9092", "sink.add-tableId-to-header-enabled": "true"}
    assert d.transform == [{"source-table": "\\.*.\\.*", "projection": "\\*", "primary-keys": "id,region"}]


def test_secrets_never_appear_in_repr_or_redacted(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(YAML)
    d = load_pipeline(path, env=ENV)
    assert "s3cret!" not in repr(d)
    assert "s3cret!" not in str(d.redacted())
    assert d.redacted()["source"]["password"] == "******"


def test_unset_variable_is_a_clear_error():
    import yaml

    with pytest.raises(OptionValidationError, match=r"source.hostname references the environment variable \$\{MYSQL_HOST\}"):
        parse_pipeline(yaml.safe_load(YAML), env={})


def test_structure_only_keeps_references():
    import yaml

    d = parse_pipeline(yaml.safe_load(YAML), resolve=False)
    assert d.source["password"] == "${MYSQL_PASSWORD}"


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"sink": {"type": "kafka"}}, "no 'source' block"),
        ({"source": {"type": "mysql"}, "sink": {"name": "x"}}, "'sink.type' is required"),
        ({"source": {"type": "mysql"}, "sink": {"type": "kafka"}, "sources": {}}, "unknown top-level block"),
        ({"source": {"type": "mysql"}, "sink": {"type": "kafka"}, "route": [{"source-table": "a.b"}]}, "sink-table' is required"),
        ({"source": {"type": "mysql"}, "sink": {"type": "kafka"}, "pipeline": {}}, "must not be empty"),
    ],
)
def test_malformed_definitions(doc, message):
    with pytest.raises(OptionValidationError, match=message):
        parse_pipeline(doc, env={})


@pytest.mark.parametrize(
    "block, message",
    [
        ({"name": "p", "foo": "bar"}, "(?s)Unsupported options found for 'pipeline'.*Unsupported options:\\n\\nfoo\\n"),
        ({"name": "p", "parallelism": "abc"}, "'pipeline.parallelism' must be a positive integer, but is 'abc'"),
        ({"name": "p", "parallelism": 0}, "must be a positive integer, but is '0'"),
        ({"name": "p", "route-mode": "SOME"}, r"Expected one of: \[ALL_MATCH, FIRST_MATCH\]"),
    ],
)
def test_pipeline_block_is_validated(block, message):
    with pytest.raises(OptionValidationError, match=message):
        parse_pipeline({"pipeline": block, "source": {"type": "mysql"}, "sink": {"type": "kafka"}}, env={})


def test_flink_cdc_pipeline_keys_are_accepted():
    d = parse_pipeline(
        {"pipeline": {"name": "p", "parallelism": 4, "local-time-zone": "UTC", "route-mode": "first_match"},
         "source": {"type": "mysql"}, "sink": {"type": "kafka"}},
        env={},
    )
    assert d.pipeline["parallelism"] == "4"
