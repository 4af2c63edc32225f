"""Options, factory validation and table selectors of the MySQL CDC source (no server)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.mysql_cdc import MySqlSource, ServerIdRange, StartupMode, validate_options
from changelake.connectors.mysql_cdc.selectors import TableSelectors
from changelake.connectors.registry import ConnectorContext, find_factory

BASE = {"hostname": "db.example", "username": "cdc", "password": "s3cr3t-pw", "tables": "shop.\\.*"}


def test_defaults_and_types():
    opts = validate_options(BASE)
    assert opts.port == 3306
    assert opts.server_id == ServerIdRange(5400, 6400)
    assert opts.scan_startup_mode is StartupMode.INITIAL
    assert opts.snapshot_fetch_size == 1024 and opts.chunk_size == 8096
    assert opts.heartbeat_interval == timedelta(seconds=30) and opts.connect_timeout == timedelta(seconds=30)


def test_all_options_parsed():
    opts = validate_options({
        **BASE, "port": "3307", "tables.exclude": "shop.tmp_\\.*", "server-id": "5400-5408",
        "server-time-zone": "Asia/Shanghai", "scan.startup.mode": "specific-offset",
        "scan.startup.specific-offset.file": "mysql-bin.000003", "scan.startup.specific-offset.pos": "4711",
        "scan.snapshot.fetch.size": "10", "scan.incremental.snapshot.chunk.size": "100",
        "heartbeat.interval": "5 s", "connect.timeout": "1min", "type": "mysql", "name": "MySQL Source",
    })
    assert opts.port == 3307 and opts.server_id == ServerIdRange(5400, 5408)
    assert opts.scan_startup_mode is StartupMode.SPECIFIC_OFFSET
    assert (opts.specific_offset_file, opts.specific_offset_pos) == ("mysql-bin.000003", 4711)
    assert opts.heartbeat_interval == timedelta(seconds=5) and opts.connect_timeout == timedelta(minutes=1)
    assert opts.tables_exclude is not None and opts.tables_exclude.matches(TableId("shop", "tmp_1"))


def test_password_never_in_repr_or_errors():
    opts = validate_options(BASE)
    assert "s3cr3t-pw" not in repr(opts)
    assert "s3cr3t-pw" not in repr(find_factory("mysql").create_source(BASE, ConnectorContext("p")))
    with pytest.raises(OptionValidationError) as err:
        validate_options({**BASE, "port": "abc"})
    assert "s3cr3t-pw" not in str(err.value)


# ---- Negative tests ------------------------------------------------------------------------------
def test_unknown_options_listed_as_flink_cdc_does():
    with pytest.raises(OptionValidationError) as err:
        validate_options({**BASE, "scan.startup.timestamp": "1", "foo": "bar"})
    msg = str(err.value)
    assert msg.startswith("Unsupported options found for 'mysql'.")
    assert "Unsupported options:\n\nfoo\nscan.startup.timestamp" in msg
    assert "Supported options:" in msg and "hostname" in msg and "server-id" in msg


@pytest.mark.parametrize("key", ["hostname", "username", "password", "tables"])
def test_missing_required_option(key):
    raw = {k: v for k, v in BASE.items() if k != key}
    with pytest.raises(OptionValidationError, match=f"Missing required options are:\n\n{key}") as err:
        validate_options(raw)
    assert err.value.option == key


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("server-id", "abc", "The value of option 'server-id' is invalid: 'abc'"),
        ("server-id", "5408-5400", "The value of option 'server-id' is invalid"),
        ("scan.startup.mode", "latest", "Invalid value for option 'scan.startup.mode'. Supported values are [initial, snapshot, latest-offset, specific-offset, earliest-offset, timestamp], but was: latest"),
        ("treat-tinyint1-as-boolean.enabled", "yes", "Could not parse value 'yes' for key 'treat-tinyint1-as-boolean.enabled'"),
        ("scan.incremental.snapshot.chunk.key-column", "db.t", "rule 'db.t' must be '<table selector>:<column>'"),
        ("metadata.list", "op_ts,op_type", "unknown metadata ['op_type']"),
        ("scan.startup.timestamp-millis", "-1", "must larger than -1, but is -1"),
        ("scan.snapshot.fetch.size", "1", "The value of option 'scan.snapshot.fetch.size' must larger than 1, but is 1"),
        ("scan.incremental.snapshot.chunk.size", "0", "must larger than 1, but is 0"),
        ("heartbeat.interval", "soon", "Could not parse value 'soon' for key 'heartbeat.interval'"),
        ("connect.timeout", "3 parsecs", "Could not parse value '3 parsecs' for key 'connect.timeout'"),
        ("port", "70000", "'port' must be <= 65535, but is 70000"),
        ("server-time-zone", "Mars/Olympus", "not a valid time zone id: 'Mars/Olympus'"),
        ("tables", "a.b.c.d", "Invalid table inclusion pattern"),
        ("tables", "db.[unclosed", "Invalid table inclusion pattern"),
    ],
)
def test_invalid_values(key, value, message):
    with pytest.raises(OptionValidationError) as err:
        validate_options({**BASE, key: value})
    assert message in str(err.value)
    assert err.value.option == key


def test_specific_offset_needs_file_and_pos():
    with pytest.raises(OptionValidationError, match="needs 'scan.startup.specific-offset.file'"):
        validate_options({**BASE, "scan.startup.mode": "specific-offset", "scan.startup.specific-offset.file": "f.000001"})


def test_the_factory_validates_raw_options_before_building_the_source():
    from changelake.connectors.registry import ConnectorContext, find_factory

    with pytest.raises(OptionValidationError, match="Unsupported options found for 'mysql'"):
        find_factory("mysql").create_source({**BASE, "nope": "1"}, ConnectorContext("p"))
    assert isinstance(find_factory("mysql").create_source(BASE, ConnectorContext("p")), MySqlSource)


# ---- selectors -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("selector", "table", "matched"),
    [
        ("shop.\\.*", TableId("shop", "orders"), True),
        ("shop.\\.*", TableId("SHOP", "Orders"), True),  # case-insensitive
        ("shop.\\.*", TableId("shopx", "orders"), False),  # full match
        ("bdb.user_table_[0-9]+", TableId("bdb", "user_table_12"), True),
        ("bdb.user_table_[0-9]+", TableId("bdb", "user_table_12a"), False),
        ("[app|web].order_\\.*", TableId("a", "order_1"), True),
        ("orders", TableId("any", "orders"), True),  # one part: table in any database
        ("db.a\\,b", TableId("db", "a,b"), True),  # escaped comma
        ("ns.db.t", TableId("db", "t"), True),  # namespace part ignored for MySQL
        ("db.t1, db.t2", TableId("db", "t2"), True),
    ],
)
def test_selectors(selector, table, matched):
    assert TableSelectors.parse(selector).matches(table) is matched


def test_server_id_range():
    assert list(ServerIdRange.parse("5400-5402").ids()) == [5400, 5401, 5402]
    assert str(ServerIdRange.parse(" 5400 ")) == "5400"
