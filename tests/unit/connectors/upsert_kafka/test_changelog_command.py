"""`changelake changelog` argument handling (the Kafka part is in the integration tests)."""

import argparse

import pytest

from cli import changelog
from changelake.connectors.errors import OptionValidationError


def parse(argv):
    parser = argparse.ArgumentParser()
    changelog.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["changelog", *argv])


def test_from_schema_flags(monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "h:9")
    args = parse(["--schema", "r STRING, pv BIGINT, d DECIMAL(10, 2)", "--primary-key", "r", "--option", "topic=t", "--option", "key.format=json"])
    decl = changelog.build_declaration(args)
    assert decl.schema.names == ["r", "pv", "d"]
    assert decl.schema.primary_key == ("r",)
    assert decl.options["topic"] == "t"
    assert decl.options["connector"] == "upsert-kafka"
    assert decl.options["properties.bootstrap.servers"] == "h:9"
    assert decl.options["scan.bounded.mode"] == "latest-offset"


def test_from_ddl_file_with_override_follow_and_retract(tmp_path):
    ddl = tmp_path / "t.sql"
    ddl.write_text(
        "CREATE TABLE pv (r STRING, pv BIGINT, PRIMARY KEY (r) NOT ENFORCED) WITH ("
        "'connector' = 'upsert-kafka', 'topic' = 'a', 'properties.bootstrap.servers' = 'x:1', "
        "'key.format' = 'json', 'value.format' = 'json')"
    )
    decl = changelog.build_declaration(parse(["--ddl", str(ddl), "--option", "topic=b", "--follow", "--retract"]))
    assert decl.options["topic"] == "b"
    assert decl.options["properties.bootstrap.servers"] == "x:1"
    assert "scan.bounded.mode" not in decl.options
    assert decl.options["scan.changelog-mode"] == "retract"


@pytest.mark.parametrize("argv,match", [([], "--ddl FILE or --schema"), (["--schema", "a INT", "--option", "novalue"], "KEY=VALUE")])
def test_errors(argv, match):
    with pytest.raises(OptionValidationError, match=match):
        changelog.build_declaration(parse(argv))


def test_run_reports_validation_errors(capsys):
    args = parse(["--schema", "a INT", "--option", "topic=t"])  # no primary key, no formats
    assert changelog.run(args) == 1
    assert "error:" in capsys.readouterr().err
