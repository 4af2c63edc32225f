"""Debezium's heartbeat.action.query and Flink CDC's scan.read-changelog-as-append-only.enabled as
mysql source options; the heartbeat's interval gate and its error (no server needed)."""

import pytest

from changelake.connectors.errors import SourceError
from changelake.connectors.mysql_cdc.factory import validate_options
from changelake.connectors.mysql_cdc.binlog.heartbeat import HeartbeatAction

BASE = {"hostname": "h", "username": "u", "password": "p", "tables": "db.t"}


def test_options_parse():
    opts = validate_options({**BASE, "heartbeat.action.query": " UPDATE hb.t SET n = n + 1 ",
                             "scan.read-changelog-as-append-only.enabled": "true"})
    assert opts.heartbeat_action_query == "UPDATE hb.t SET n = n + 1"
    assert opts.read_changelog_as_append_only is True
    defaults = validate_options(BASE)
    assert defaults.heartbeat_action_query is None and defaults.read_changelog_as_append_only is False


def test_heartbeat_runs_once_per_interval_and_names_the_option_on_failure():
    now = [100.0]
    beat = HeartbeatAction("SELECT 1", 5.0, {"host": "127.0.0.1", "port": 1, "user": "u", "password": "secret",
                                              "connect_timeout": 1}, clock=lambda: now[0])
    with pytest.raises(SourceError) as info:
        beat.maybe_run()  # nothing listens on port 1
    assert "heartbeat.action.query 'SELECT 1' failed" in str(info.value) and "secret" not in str(info.value)
    assert beat.maybe_run() is False  # within the interval: not retried
    now[0] += 5.0
    with pytest.raises(SourceError):
        beat.maybe_run()
    beat.close()
