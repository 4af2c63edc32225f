"""The Dagster home the CLI and ``make dev`` share follows CHANGELAKE_STATE_DIR, and its generated
instance config allows one run per pipeline (pools + run-tag limit) with run monitoring on."""

from __future__ import annotations

import dagster as dg


def test_dagster_home_follows_the_state_dir_and_the_config_loads(tmp_path, monkeypatch):
    from cli._env import apply_local_service_env

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("CHANGELAKE_STATE_DIR", str(tmp_path / "moved"))
    apply_local_service_env()
    import os

    home = tmp_path / "moved" / "dagster"
    assert os.environ["DAGSTER_HOME"] == str(home)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.run_monitoring_enabled
        settings = instance.get_concurrency_config()
        assert settings.pool_config.default_pool_limit == 1
        assert settings.pool_config.pool_granularity.value == "run"
        limits = settings.run_queue_config.tag_concurrency_limits
        assert limits == [{"key": "changelake/pipeline", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]


def test_a_users_own_instance_config_is_kept(tmp_path):
    from cli._env import INSTANCE_YAML, write_instance_config

    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    write_instance_config(str(tmp_path))
    assert (tmp_path / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\nrun_monitoring:\n  enabled: true\n")
    write_instance_config(str(tmp_path))  # the file older changelake versions wrote is upgraded
    assert (tmp_path / "dagster.yaml").read_text() == INSTANCE_YAML
