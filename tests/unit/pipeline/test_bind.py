"""Pipeline files bound to connection options handed in by the caller (the Dagster resources)."""

from __future__ import annotations

import pytest

from changelake.connectors.errors import OptionValidationError
from changelake.pipeline.bind import bind_pipeline

YAML = """\
pipeline: {name: p}
source: {type: mysql, hostname: '${MYSQL_HOST}', port: '${MYSQL_PORT:-3306}', username: root,
         password: '${MYSQL_PASSWORD}', tables: 'db.t', server-id: '${SERVER_ID}'}
sink: {type: kafka, properties.bootstrap.servers: '${KAFKA_BOOTSTRAP_SERVERS}'}
"""


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text(YAML)
    return p


def test_given_options_fill_the_keys_left_to_the_environment_and_literals_win(path):
    defn = bind_pipeline(
        path,
        source={"hostname": "db.internal", "port": "13306", "username": "capture", "password": "s3cret"},
        sink={"properties.bootstrap.servers": "k:9092", "properties.security.protocol": "SSL"},
        env={"SERVER_ID": "5400"},
    )
    assert defn.source["hostname"] == "db.internal" and defn.source["port"] == "13306"
    assert defn.source["username"] == "root"  # a literal in the YAML wins over the resource
    assert defn.source["password"] == "s3cret"
    assert defn.source["server-id"] == "5400"  # the rest resolves from env, as for the CLI
    assert defn.sink["properties.bootstrap.servers"] == "k:9092"
    assert defn.sink["properties.security.protocol"] == "SSL"  # absent in the YAML: filled


def test_given_values_are_verbatim_and_never_looked_up(path):
    defn = bind_pipeline(path, source={"hostname": "h", "password": "${NOT_A_VAR}"},
                         sink={"properties.bootstrap.servers": "k:9092"}, env={"SERVER_ID": "1"})
    assert defn.source["password"] == "${NOT_A_VAR}"
    assert "******" in str(defn) and "NOT_A_VAR" not in str(defn)  # redacted in repr


def test_a_reference_no_option_fills_is_named_when_unset(path):
    with pytest.raises(OptionValidationError, match=r"source.server-id references the environment variable \$\{SERVER_ID\}"):
        bind_pipeline(path, source={"hostname": "h", "password": ""},
                      sink={"properties.bootstrap.servers": "k:9092"}, env={})


def test_without_options_it_is_the_cli_loading(path):
    env = {"MYSQL_HOST": "h", "MYSQL_PASSWORD": "pw", "SERVER_ID": "9", "KAFKA_BOOTSTRAP_SERVERS": "k:1"}
    defn = bind_pipeline(path, env=env)
    assert (defn.source["hostname"], defn.source["port"], defn.sink["properties.bootstrap.servers"]) == ("h", "3306", "k:1")
