"""The pipelines folder: unique names, and one writing pipeline per lake table."""

from __future__ import annotations

import pytest

from changelake.connectors.errors import OptionValidationError
from changelake.pipeline.files import load_pipelines

ICEBERG = """
sink:
  type: iceberg
  catalog.properties.type: sql
  catalog.properties.uri: ${ICEBERG_CATALOG_URI}
  catalog.properties.warehouse: ${ICEBERG_WAREHOUSE}
"""


def _write(folder, name: str, source: str, sink: str = ICEBERG) -> None:
    (folder / f"{name}.yaml").write_text(f"pipeline:\n  name: {name}\n{source}{sink}")


FROM_KAFKA = "source:\n  type: kafka\n  properties.bootstrap.servers: k:9092\n  topic: shop.orders;shop.items\n"
FROM_MYSQL = ("source:\n  type: mysql\n  hostname: h\n  port: 3306\n  username: u\n  password: p\n"
              "  tables: shop.orders\n")


def test_two_pipelines_writing_one_lake_table_are_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(tmp_path))
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    _write(tmp_path, "kafka-to-lake", FROM_KAFKA)
    _write(tmp_path, "mysql-to-lake", FROM_MYSQL)
    with pytest.raises(OptionValidationError, match=r"kafka-to-lake.yaml and .*mysql-to-lake.yaml both write lake "
                                                    r"table shop.orders"):
        load_pipelines()


def test_a_catalog_given_by_another_variable_is_still_the_deployments_catalog(tmp_path, monkeypatch):
    # the lake resource fills every ${...} catalog key (pipeline/bind.py), whatever the variable's name
    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(tmp_path))
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    _write(tmp_path, "kafka-to-lake", FROM_KAFKA)
    _write(tmp_path, "kafka-to-lake-pg", FROM_KAFKA,
           ICEBERG.replace("${ICEBERG_CATALOG_URI}", "${CHANGELAKE_POSTGRES_CATALOG_URI}"))
    with pytest.raises(OptionValidationError, match=r"both write lake table shop.orders.*filled by the deployment"):
        load_pipelines()


@pytest.mark.parametrize("other", [
    ICEBERG.replace("${ICEBERG_CATALOG_URI}", "sqlite:////tmp/other.db"),  # another catalog, written out
    ICEBERG + "  namespace: mirror\n",                                   # another namespace
    "sink:\n  type: kafka\n  properties.bootstrap.servers: k:9092\n",    # not a lake
])
def test_pipelines_on_other_lakes_or_namespaces_load(tmp_path, monkeypatch, other):
    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(tmp_path))
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    _write(tmp_path, "kafka-to-lake", FROM_KAFKA)
    _write(tmp_path, "mysql-to-lake", FROM_MYSQL, other)
    assert [s.name for _, s in load_pipelines()] == ["kafka-to-lake", "mysql-to-lake"]


@pytest.mark.parametrize("outside", [False, True])
def test_cli_pipeline_run_refuses_a_file_sharing_a_lake_table_with_the_folder(tmp_path, monkeypatch, capsys,
                                                                              outside):
    """``changelake pipeline run FILE`` refuses before starting (no services needed) when FILE and
    another file of the pipelines folder write the same lake table, FILE in the folder or not."""
    from cli.main import main

    folder = tmp_path / "pipelines"
    folder.mkdir()
    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(folder))
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    _write(folder, "kafka-to-lake", FROM_KAFKA)
    _write(tmp_path if outside else folder, "mysql-to-lake", FROM_MYSQL)
    (folder / "broken.yaml").write_text("pipeline: [\n")  # another file's problem is not this run's
    mine = (tmp_path if outside else folder) / "mysql-to-lake.yaml"
    assert main(["pipeline", "run", str(mine), "--until-caught-up"]) == 1
    err = capsys.readouterr().err
    assert "both write lake table shop.orders" in err and "kafka-to-lake.yaml" in err and "mysql-to-lake.yaml" in err


# -- the run-time half: tables a pipeline finds as it runs -----------------------------------------

@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The pipelines folder (and the state directory below it)."""
    monkeypatch.setenv("CHANGELAKE_PIPELINES_DIR", str(tmp_path))
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


PATTERN = ("source:\n  type: mysql\n  hostname: h\n  port: 3306\n  username: u\n  password: p\n"
           "  tables: shop.\\.*\n")


def test_a_found_table_another_pipeline_lists_is_refused_naming_both_and_not_recorded(folder):
    from changelake.changelog import TableId
    from changelake.pipeline.discovery import discovered_tables
    from changelake.pipeline.files import lake_table_claim, load_structure

    _write(folder, "kafka-to-lake", FROM_KAFKA)
    _write(folder, "direct", PATTERN)
    claim = lake_table_claim(load_structure(folder / "direct.yaml"))
    with pytest.raises(OptionValidationError, match=r"pipeline 'direct' found lake table shop.orders, which pipeline "
                                                    r"'kafka-to-lake' \(file .*kafka-to-lake.yaml\) writes"):
        claim(TableId("shop", "orders"))
    assert discovered_tables("direct") == []
    claim(TableId("shop", "payments"))  # nobody else's: recorded at once, before its first commit
    assert discovered_tables("direct") == [TableId("shop", "payments")]
    # ... so that a second pattern pipeline on the same lake is refused it in turn
    _write(folder, "direct-2", PATTERN)
    with pytest.raises(OptionValidationError, match=r"pipeline 'direct-2' found lake table shop.payments, which "
                                                    r"pipeline 'direct'"):
        lake_table_claim(load_structure(folder / "direct-2.yaml"))(TableId("shop", "payments"))


@pytest.mark.parametrize("other", [
    ICEBERG + "  namespace: mirror\n",                                   # another namespace
    "sink:\n  type: kafka\n  properties.bootstrap.servers: k:9092\n",    # not a lake
])
def test_a_found_table_of_another_lake_is_not_refused(folder, other):
    from changelake.changelog import TableId
    from changelake.pipeline.discovery import discovered_tables
    from changelake.pipeline.files import lake_table_claim, load_structure

    _write(folder, "kafka-to-lake", FROM_KAFKA, other)
    _write(folder, "direct", PATTERN)
    lake_table_claim(load_structure(folder / "direct.yaml"))(TableId("shop", "orders"))  # no error
    assert discovered_tables("direct") == [TableId("shop", "orders")]
