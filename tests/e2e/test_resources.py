"""The resources build their connectors through the registry (no service needed: an Iceberg SQL
catalog on SQLite; Kafka connectors are built unopened)."""

from __future__ import annotations

import pytest

from changelake.connectors.errors import OptionValidationError
from resources import IcebergCatalogResource, KafkaResource


def test_iceberg_resource_gives_the_catalog_and_an_iceberg_sink_on_it(tmp_path):
    (tmp_path / "wh").mkdir()
    lake = IcebergCatalogResource(uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{tmp_path / 'wh'}")
    lake.catalog().create_namespace("shop")
    assert ("shop",) in lake.catalog().list_namespaces()
    sink = lake.sink({"table.properties.format-version": "2"}, pipeline="p")
    assert type(sink).__name__ == "IcebergSink"
    assert sink.options.catalog_name == "changelake"
    assert sink.options.catalog_properties["uri"] == lake.uri
    assert sink.options.table_properties == {"format-version": "2"}


def test_kafka_resource_builds_the_pipeline_source_and_refuses_unknown_options():
    kafka = KafkaResource(bootstrap_servers="127.0.0.1:1", properties={"client.id": "it"})
    source = kafka.source({"topic": "db.t", "value.format": "debezium-json"}, pipeline="p")  # not opened: no I/O
    assert type(source).__name__ == "KafkaPipelineSource"
    with pytest.raises(OptionValidationError, match=r"(?s)Unsupported options.*no\.such"):
        kafka.sink({"no.such": "1"}, pipeline="p")


def test_both_lake_catalog_resources_are_one_resource_type_filling_only_their_own_lake(tmp_path):
    from resources import IcebergCatalogResource, LakeCatalogResource, PaimonCatalogResource

    iceberg = IcebergCatalogResource(uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{tmp_path / 'wh'}")
    paimon = PaimonCatalogResource(warehouse=str(tmp_path / "paimon"))
    assert isinstance(iceberg, LakeCatalogResource) and isinstance(paimon, LakeCatalogResource)
    assert paimon.options_for("paimon") == {"catalog.properties.metastore": "filesystem",
                                            "catalog.properties.warehouse": str(tmp_path / "paimon")}
    assert paimon.options_for("iceberg") == {} and iceberg.options_for("paimon") == {}
    assert iceberg.options_for("iceberg")["catalog.properties.uri"] == iceberg.uri
    sink = paimon.sink({"commit.user": "job"}, pipeline="p")
    assert type(sink).__name__ == "PaimonSink"
    assert sink.options.catalog_properties["warehouse"] == str(tmp_path / "paimon")
    assert sink.options.commit_user == "job"
    assert PaimonCatalogResource().options_for("paimon") == {"catalog.properties.metastore": "filesystem"}


def test_the_deployment_picks_its_lake_catalog_with_LAKE(monkeypatch):
    from resources import IcebergCatalogResource, PaimonCatalogResource
    from resources.definitions import defs

    monkeypatch.delenv("LAKE", raising=False)
    resources = defs().resources
    assert isinstance(resources["lake"], IcebergCatalogResource)
    monkeypatch.setenv("LAKE", "paimon")
    monkeypatch.setenv("PAIMON_WAREHOUSE", "/data/paimon")
    resources = defs().resources
    assert isinstance(resources["lake"], PaimonCatalogResource) and resources["lake"].warehouse == "/data/paimon"
    assert resources["lake_io_manager"].lake is resources["lake"]  # the IO manager reads the same lake
    monkeypatch.setenv("LAKE", "hudi")
    with pytest.raises(ValueError, match="LAKE='hudi': no lake catalog resource for it; choose one of iceberg, paimon"):
        defs()
