"""Options of the paimon sink: Flink CDC names, defaults, and every negative path's message."""

from __future__ import annotations

import pytest

from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.paimon import IDENTIFIER, create_sink, parse_sink_options
from changelake.connectors.paimon.options import ROW_KIND_FIELD, default_warehouse


def test_filesystem_is_the_default_metastore_on_a_warehouse_under_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path))
    opts = parse_sink_options({"type": "paimon"})
    assert dict(opts.catalog_properties) == {"metastore": "filesystem", "warehouse": str(tmp_path / "lake" / "paimon")}
    assert default_warehouse() == tmp_path / "lake" / "paimon"
    assert opts.commit_user == "admin" and opts.commit_max_rows == 100_000


def test_seed_options_are_accepted_and_rest_is_passed_through():
    opts = parse_sink_options(
        {
            "type": "paimon",
            "catalog.properties.metastore": "rest",
            "catalog.properties.uri": "http://dlf",
            "catalog.properties.warehouse": "your_warehouse",
            "catalog.properties.token.provider": "dlf",
            "commit.user": "your_job_name",
            "table.properties.deletion-vectors.enabled": True,
            "table.properties.bucket": 4,
            "partition.key": "db.a:k1,k2; db.b:day",
        }
    )
    assert dict(opts.catalog_properties) == {
        "metastore": "rest", "uri": "http://dlf", "warehouse": "your_warehouse", "token.provider": "dlf",
    }
    assert dict(opts.table_properties) == {"deletion-vectors.enabled": "true", "bucket": "4"}
    assert opts.commit_user == "your_job_name"
    assert dict(opts.partition_keys) == {TableId("db", "a"): ("k1", "k2"), TableId("db", "b"): ("day",)}
    assert opts.describe()["catalog.properties.token.provider"] == "******"
    assert create_sink({"type": IDENTIFIER, "catalog.properties.warehouse": "/x"}).options.metastore == "filesystem"


def test_unknown_key_lists_the_supported_ones():
    with pytest.raises(OptionValidationError) as info:
        parse_sink_options({"type": "paimon", "catalog.type": "x", "sink.parallelism": 2})
    text = str(info.value)
    assert text.startswith("Unsupported options found for 'paimon'.")
    assert "Unsupported options:\n\ncatalog.type\nsink.parallelism" in text
    for key in ("commit.user", "partition.key", "catalog.properties.*", "table.properties.*"):
        assert key in text
    assert info.value.option == "catalog.type"


@pytest.mark.parametrize(
    ("raw", "message", "option"),
    [
        ({"type": "iceberg"}, "'type' must be 'paimon' for this sink; got 'iceberg'", "type"),
        ({"catalog.properties.metastore": "hive"}, "'catalog.properties.metastore' must be one of filesystem, rest; got 'hive'",
         "catalog.properties.metastore"),
        ({"catalog.properties.metastore": "rest", "catalog.properties.warehouse": "w"},
         "'catalog.properties.uri' is required when 'catalog.properties.metastore' is 'rest'", "catalog.properties.uri"),
        ({"table.properties.rowkind.field": "op"}, f"row kinds in column '{ROW_KIND_FIELD}'); got 'op'",
         "table.properties.rowkind.field"),
        ({"partition.key": "orders:day"}, "'partition.key' entries must look like 'db.table:col1,col2'; got 'orders:day'",
         "partition.key"),
        ({"commit.max-rows": 0}, "'commit.max-rows' must be > 0; got 0", "commit.max-rows"),
        ({"commit.max-rows": "many"}, "'commit.max-rows' must be an integer > 0; got 'many'", "commit.max-rows"),
    ],
)
def test_negative_paths_name_the_key_the_rule_and_the_value(raw, message, option):
    with pytest.raises(OptionValidationError) as info:
        parse_sink_options({"catalog.properties.warehouse": "/tmp/x", **raw})
    assert message in str(info.value)
    assert info.value.option == option


def test_rest_catalog_options_reach_pypaimon_and_its_failure_hides_the_token():
    import socket

    from changelake.connectors.paimon import PaimonSinkError

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = create_sink({"type": "paimon", "catalog.properties.metastore": "rest",
                        "catalog.properties.uri": f"http://127.0.0.1:{port}", "catalog.properties.warehouse": "w",
                        "catalog.properties.token.provider": "bear", "catalog.properties.token": "s3cr3t"})
    with pytest.raises(PaimonSinkError) as info:
        sink.open()
    assert "metastore 'rest'" in str(info.value) and "s3cr3t" not in str(info.value)
    assert info.value.__cause__ is not None
