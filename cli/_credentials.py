"""Where a pipeline's credentials come from, named (never their values) when authentication
fails: a literal in the YAML wins over the environment, which surprises users who exported
``MYSQL_PASSWORD`` and left an old literal in the file."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["CREDENTIAL_KEYS", "AUTH_FAILURE", "credential_sources", "auth_hint"]

#: option keys that carry credentials, per block
CREDENTIAL_KEYS = ("username", "password", "properties.sasl.username", "properties.sasl.password",
                   "properties.sasl.jaas.config")
#: error texts of a refused login: MySQL/MariaDB 1045, Kafka's SASL failure
AUTH_FAILURE = re.compile(r"Access denied for user|\b1045\b|SASL authentication|Authentication failed", re.I)
_VAR = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_.]*)(?::-[^}]*)?\}$")


def credential_sources(path: Path) -> list[str]:
    """One line per credential key of the pipeline file: ``source.password: a literal in the YAML
    (it wins over the environment)`` or ``source.password: ${MYSQL_PASSWORD} from the
    environment (set)``. Values are never read out."""
    import os

    from changelake.pipeline.definition import read_pipeline_yaml

    data = read_pipeline_yaml(path)
    lines = []
    for block in ("source", "sink"):
        options = (data or {}).get(block) or {}
        for key in CREDENTIAL_KEYS:
            if key not in options:
                continue
            value = "" if options[key] is None else str(options[key])
            m = _VAR.match(value.strip())
            if m:
                state = "set" if m.group(1) in os.environ else "not set"
                lines.append(f"{block}.{key}: ${{{m.group(1)}}} from the environment ({state})")
            else:
                lines.append(f"{block}.{key}: a literal in the YAML (it wins over the environment and the resources)")
    return lines


def auth_hint(path: Path, messages: list[str]) -> list[str]:
    """Lines to print after ``messages`` when one of them is a refused login: where each
    credential came from, and what to do. Empty otherwise."""
    if not any(AUTH_FAILURE.search(m) for m in messages):
        return []
    sources = credential_sources(path)
    if not sources:
        return ["authentication failed; the YAML sets no credential key, so they come from the environment"]
    return ["authentication failed; where the credentials came from:", *(f"  {s}" for s in sources),
            "  to use the environment's value, replace a literal by ${VAR} (e.g. password: ${MYSQL_PASSWORD})"]
