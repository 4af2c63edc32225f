"""The connector registry: factories by Flink CDC identifier, their option keys, and the contract."""

from __future__ import annotations

import pytest

from changelake.connectors.base import ChangelogSink, ChangelogSource, LakeSink
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.registry import ConnectorContext, find_factory, identifiers

CTX = ConnectorContext("orders")
MYSQL = {"hostname": "127.0.0.1", "username": "cdc", "password": "", "tables": "shop.orders"}
KAFKA = {"properties.bootstrap.servers": "127.0.0.1:9092", "topic": "orders"}
ICEBERG = {"catalog.properties.uri": "sqlite:///:memory:", "catalog.properties.warehouse": "file:///tmp/lake"}


def test_registered_identifiers_are_flink_cdc_names() -> None:
    assert identifiers() == ["iceberg", "kafka", "mysql", "paimon", "upsert-kafka"]
    assert identifiers("source") == ["kafka", "mysql"]
    assert identifiers("sink") == ["iceberg", "kafka", "paimon", "upsert-kafka"]


def test_unknown_identifier_lists_the_registered_ones() -> None:
    with pytest.raises(OptionValidationError) as err:
        find_factory("postgres")
    assert str(err.value) == (
        "Could not find any factory for identifier 'postgres'. "
        "Registered identifiers: iceberg, kafka, mysql, paimon, upsert-kafka"
    )
    assert err.value.option == "type"


def test_a_sink_only_connector_is_refused_as_source() -> None:
    with pytest.raises(OptionValidationError, match="connector 'iceberg' cannot be used as a source; it is a sink only. "
                       "Source connectors: kafka, mysql"):
        find_factory("iceberg").create_source(ICEBERG, CTX)


@pytest.mark.parametrize(
    ("identifier", "role", "raw"),
    [
        ("mysql", "source", MYSQL),
        ("kafka", "source", KAFKA),
        ("kafka", "sink", {"properties.bootstrap.servers": "127.0.0.1:9092"}),
        ("upsert-kafka", "sink", {"properties.bootstrap.servers": "127.0.0.1:9092"}),
        ("iceberg", "sink", ICEBERG),
        ("paimon", "sink", {}),
    ],
)
def test_unknown_option_lists_the_supported_ones(identifier: str, role: str, raw: dict[str, str]) -> None:
    endpoint = find_factory(identifier).endpoint(role)  # type: ignore[arg-type]
    with pytest.raises(OptionValidationError) as err:
        endpoint.create({**raw, "no-such.option": "1"}, CTX)
    msg = str(err.value)
    assert msg.startswith(f"Unsupported options found for '{identifier}'.")
    unsupported, _, supported = msg.partition("Supported options:")
    assert "no-such.option" in unsupported
    # every declared key outside the declared prefixes (``properties.*``) shows up in the supported list
    keys = (*endpoint.required, *endpoint.optional)
    prefixes = tuple(k.rstrip("*") for k in keys if k.endswith("*"))
    declared = [k for k in keys if not k.endswith("*") and not k.startswith(prefixes)]
    assert declared and all(k in supported for k in declared), (declared, supported)


@pytest.mark.parametrize(
    ("identifier", "role", "raw", "contract"),
    [
        ("mysql", "source", MYSQL, ChangelogSource),
        ("kafka", "sink", {"properties.bootstrap.servers": "127.0.0.1:9092"}, ChangelogSink),
        ("upsert-kafka", "sink", {"properties.bootstrap.servers": "127.0.0.1:9092"}, ChangelogSink),
        ("iceberg", "sink", ICEBERG, LakeSink),
        ("paimon", "sink", {}, LakeSink),
    ],
)
def test_factories_build_unopened_connectors_of_the_contract(
    identifier: str, role: str, raw: dict[str, str], contract: type
) -> None:
    connector = find_factory(identifier).endpoint(role).create(raw, CTX)  # type: ignore[arg-type]
    assert isinstance(connector, contract)
    connector.close()  # idempotent and harmless before open()


def test_supported_pairs_any_positioned_source_with_any_sink_and_kafka_into_lakes() -> None:
    from changelake.connectors.registry import supported_pairs

    assert supported_pairs() == [
        ("kafka", "iceberg"), ("kafka", "paimon"),
        ("mysql", "iceberg"), ("mysql", "kafka"), ("mysql", "paimon"), ("mysql", "upsert-kafka"),
    ]


def test_kafka_factories_declare_their_options_as_config_options() -> None:
    from changelake.connectors.kafka.sink_options import SINK_OPTIONS
    from changelake.connectors.kafka.source_options import SOURCE_OPTIONS
    from changelake.connectors.upsert_kafka.ingestion_options import INGESTION_OPTIONS

    for identifier, role, declared in (("kafka", "sink", SINK_OPTIONS), ("kafka", "source", SOURCE_OPTIONS),
                                       ("upsert-kafka", "sink", INGESTION_OPTIONS)):
        endpoint = find_factory(identifier).endpoint(role)  # type: ignore[arg-type]
        assert endpoint.required == ("properties.bootstrap.servers",)
        assert {o.key for o in declared} <= set(endpoint.optional)
        assert "properties.*" in endpoint.optional


def test_each_factory_answers_what_the_layers_above_would_branch_on() -> None:
    from changelake.connectors.registry import (
        connection_of, is_partitioned_source, lake_sink_types, maintenance_of, maintenance_sink_types, progress_of,
    )

    assert {i: (connection_of(i, "source"), connection_of(i, "sink")) for i in identifiers()} == {
        "iceberg": (None, "lake"), "kafka": ("kafka", "kafka"), "mysql": ("mysql", None),
        "paimon": (None, "lake"), "upsert-kafka": (None, "kafka"),
    }
    assert connection_of("no-such", "sink") is None
    assert {i: progress_of(i) for i in identifiers("sink")} == {
        "iceberg": "tables", "kafka": "topics", "paimon": "tables", "upsert-kafka": "topics"}
    assert {i: is_partitioned_source(i) for i in identifiers("source")} == {"kafka": True, "mysql": False}
    assert lake_sink_types() == ("iceberg", "paimon")
    assert maintenance_sink_types() == ("iceberg",)
    from changelake.connectors.iceberg.maintenance import maintain_lake

    assert maintenance_of("iceberg") is maintain_lake
    assert maintenance_of("paimon") is None and maintenance_of("kafka") is None
    with pytest.raises(OptionValidationError, match="cannot be used as a sink"):
        progress_of("mysql")


def test_the_runner_abilities_are_declared_by_the_adapters_and_sinks() -> None:
    from changelake.connectors.base import (
        BufferedSink, PartitionedChangelogSource, RejectsRecords, ReportsBadRecords, ReportsMetrics,
    )
    from changelake.connectors.lake.changelog_sink import LakeOffsetsSink
    from changelake.connectors.kafka.source import PartitionedSource
    from changelake.connectors.lake.changelog_sink import LakePositionSink

    lake = find_factory("paimon").create_sink({}, CTX)
    for adapter in (LakeOffsetsSink(lake, "p"), LakePositionSink(lake, "p")):
        assert isinstance(adapter, ChangelogSink) and isinstance(adapter, BufferedSink) and adapter.buffers_commits
        assert isinstance(adapter, ReportsMetrics)
    kafka = find_factory("kafka").create_source(KAFKA, CTX)  # unopened: no I/O
    source = PartitionedSource(kafka)
    assert isinstance(source, PartitionedChangelogSource) and source.partitioned
    assert isinstance(source, RejectsRecords) and isinstance(source, ReportsBadRecords)
    mysql = find_factory("mysql").create_source(MYSQL, CTX)
    assert isinstance(mysql, ChangelogSource)
    assert not isinstance(mysql, (PartitionedChangelogSource, RejectsRecords, BufferedSink))
    kafka_sink = find_factory("kafka").create_sink({"properties.bootstrap.servers": "127.0.0.1:9092"}, CTX)
    assert isinstance(kafka_sink, ReportsMetrics) and not isinstance(kafka_sink, BufferedSink)
