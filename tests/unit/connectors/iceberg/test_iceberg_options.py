"""Validation of the iceberg sink options (messages asserted, as Flink's factory tests do)."""

from __future__ import annotations

import pytest

from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.iceberg.options import NamespaceMapping, parse_sink_options

BASE = {
    "type": "iceberg",
    "catalog.properties.uri": "sqlite:////tmp/x/catalog.db",
    "catalog.properties.warehouse": "file:///tmp/x/wh",
}


def test_parse_full_options() -> None:
    opts = parse_sink_options(
        {
            **BASE,
            "catalog.properties.pool_size": "3",
            "table.properties.write.target-file-size-bytes": "1024",
            "namespace": "shop:lake; crm:lake_crm",
            "commit.max-rows": "500",
            "name": "lake",
        }
    )
    assert dict(opts.catalog_properties) == {
        "type": "sql",
        "uri": "sqlite:////tmp/x/catalog.db",
        "warehouse": "file:///tmp/x/wh",
        "pool_size": "3",
    }
    assert dict(opts.table_properties) == {"write.target-file-size-bytes": "1024"}
    assert opts.commit_max_rows == 500
    assert opts.name == "lake"
    assert opts.namespace.identifier(TableId("shop", "orders")) == ("lake", "orders")
    assert opts.namespace.identifier(TableId("crm", "users")) == ("lake_crm", "users")
    assert opts.namespace.identifier(TableId("other", "t")) == ("other", "t")


def test_defaults_map_database_to_namespace() -> None:
    opts = parse_sink_options(BASE)
    assert opts.commit_max_rows == 100_000
    assert opts.namespace.identifier(TableId("kafka_test", "customers")) == ("kafka_test", "customers")
    assert opts.namespace.identifier(TableId(None, "t")) == ("default", "t")


def test_fixed_namespace() -> None:
    assert NamespaceMapping.parse("lake").identifier(TableId("a", "b")) == ("lake", "b")


# -- Negative tests ------------------------------------------------------------------------------


def test_unknown_option_lists_supported_keys() -> None:
    with pytest.raises(OptionValidationError) as info:
        parse_sink_options({**BASE, "sink.buffer": "1", "bogus": "x"})
    message = str(info.value)
    assert message.startswith("Unsupported options found for 'iceberg'.")
    assert "bogus\nsink.buffer" in message
    assert "commit.max-rows" in message and "catalog.properties.*" in message and "table.properties.*" in message
    assert info.value.option == "bogus"


def test_wrong_type() -> None:
    with pytest.raises(OptionValidationError, match="'type' must be 'iceberg' for this sink; got 'kafka'"):
        parse_sink_options({**BASE, "type": "kafka"})


@pytest.mark.parametrize("missing", ["uri", "warehouse"])
def test_sql_catalog_requires_uri_and_warehouse(missing: str) -> None:
    raw = {k: v for k, v in BASE.items() if not k.endswith(missing)}
    with pytest.raises(OptionValidationError) as info:
        parse_sink_options(raw)
    assert str(info.value) == (
        f"'catalog.properties.{missing}' is required when 'catalog.properties.type' is 'sql'"
    )
    assert info.value.option == f"catalog.properties.{missing}"


def test_other_catalog_type_needs_no_uri() -> None:
    opts = parse_sink_options({"type": "iceberg", "catalog.properties.type": "rest", "catalog.properties.uri": "http://x"})
    assert opts.catalog_properties["type"] == "rest"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "'commit.max-rows' must be > 0; got 0"),
        ("-5", "'commit.max-rows' must be > 0; got -5"),
        ("many", "'commit.max-rows' must be an integer > 0; got 'many'"),
    ],
)
def test_commit_max_rows_range(value: str, message: str) -> None:
    with pytest.raises(OptionValidationError) as info:
        parse_sink_options({**BASE, "commit.max-rows": value})
    assert str(info.value) == message


def test_bad_namespace_mapping() -> None:
    with pytest.raises(OptionValidationError, match="'namespace' entries must look like 'database:namespace'; got 'b:'"):
        parse_sink_options({**BASE, "namespace": "a:x;b:"})


def test_describe_masks_secrets() -> None:
    opts = parse_sink_options({**BASE, "catalog.properties.s3.secret-access-key": "hunter2"})
    described = opts.describe()
    assert described["catalog.properties.s3.secret-access-key"] == "******"
    assert "hunter2" not in repr(described)
