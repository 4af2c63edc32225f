"""Services.local finds services again on the ports their last ``up`` recorded (services.json)."""

import json

import pytest

from changelake.services import Services

PORT_VARS = ("CHANGELAKE_KAFKA_PORT", "CHANGELAKE_KAFKA_CONTROLLER_PORT", "CHANGELAKE_MYSQL_PORT",
             "CHANGELAKE_POSTGRES_PORT", "CHANGELAKE_ICEBERG_REST_PORT")


@pytest.fixture(autouse=True)
def _no_port_vars(monkeypatch):
    for var in PORT_VARS:
        monkeypatch.delenv(var, raising=False)
    for var in ("KAFKA_BOOTSTRAP_SERVERS", "MYSQL_PORT"):
        monkeypatch.delenv(var, raising=False)


def _ports(services: Services) -> tuple[int, int, int]:
    return services.kafka.port, services.kafka.controller_port, services.mariadb.port


def test_defaults_without_a_record(tmp_path):
    assert _ports(Services.local(tmp_path)) == (19092, 19093, 13306)


def test_recorded_ports_are_used_by_later_commands(tmp_path):
    (tmp_path / "services.json").write_text(
        json.dumps({"kafka_port": 29092, "kafka_controller_port": 29093, "mysql_port": 23306})
    )
    services = Services.local(tmp_path)
    assert _ports(services) == (29092, 29093, 23306)
    env = services.env()
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:29092"
    assert env["MYSQL_PORT"] == "23306"


def test_recorded_catalog_ports_are_used_too(tmp_path):
    (tmp_path / "services.json").write_text(
        json.dumps({"kafka_port": 29092, "mysql_port": 23306, "postgres_port": 25432, "iceberg_rest_port": 28181,
                    "catalogs": ["postgres"]})
    )
    services = Services.local(tmp_path)
    assert services.postgres is not None and services.postgres.port == 25432
    assert services.rest is not None and services.rest.port == 28181


def test_a_record_of_an_older_version_without_the_controller_port(tmp_path):
    (tmp_path / "services.json").write_text(json.dumps({"kafka_port": 29092, "mysql_port": 23306}))
    assert _ports(Services.local(tmp_path)) == (29092, 19093, 23306)


def test_the_variables_win_over_the_record(tmp_path, monkeypatch):
    (tmp_path / "services.json").write_text(
        json.dumps({"kafka_port": 29092, "kafka_controller_port": 29093, "mysql_port": 23306})
    )
    monkeypatch.setenv("CHANGELAKE_KAFKA_PORT", "39092")
    monkeypatch.setenv("CHANGELAKE_MYSQL_PORT", "33306")
    assert _ports(Services.local(tmp_path)) == (39092, 29093, 33306)


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"kafka_port": "x", "mysql_port": true}'])
def test_an_unreadable_record_falls_back_to_the_defaults(tmp_path, text):
    (tmp_path / "services.json").write_text(text)
    assert _ports(Services.local(tmp_path)) == (19092, 19093, 13306)
