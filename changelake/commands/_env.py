"""Environment defaults for commands: the local services' values fill what the user did not set."""

from __future__ import annotations

import os

from changelake.services import Services, default_state_dir

__all__ = ["apply_local_service_env"]


def apply_local_service_env() -> dict[str, str]:
    """Put the local services' ``KAFKA_BOOTSTRAP_SERVERS``, ``MYSQL_*`` and ``ICEBERG_*`` into
    ``os.environ`` where unset (variables already set win: a user's own clusters). Also sets
    ``DAGSTER_HOME`` to ``<state>/dagster`` if unset. Returns the resulting values."""
    services = Services.local()
    if (default_state_dir() / "mariadb").exists() or (default_state_dir() / "kafka").exists():
        for key, value in services.env().items():
            os.environ.setdefault(key, value)
    dagster_home = os.environ.setdefault("DAGSTER_HOME", str(default_state_dir() / "dagster"))
    os.makedirs(dagster_home, exist_ok=True)
    instance_yaml = os.path.join(dagster_home, "dagster.yaml")
    if not os.path.exists(instance_yaml):
        with open(instance_yaml, "w") as f:
            f.write("telemetry:\n  enabled: false\nrun_monitoring:\n  enabled: true\n")
    lake = default_state_dir() / "lake"
    (lake / "warehouse").mkdir(parents=True, exist_ok=True)
    return {k: os.environ.get(k, "") for k in services.env()}
