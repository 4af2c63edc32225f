"""A pipeline file with its connection options handed in by the caller instead of the environment.

The CLI resolves a YAML's ``${VAR}`` references from the process environment
(:func:`~changelake.pipeline.definition.load_pipeline`). An orchestrator that holds the
connections itself (the Dagster resources ``MySqlResource``, ``KafkaResource``,
``LakeCatalogResource``) hands them to :func:`bind_pipeline` as connector options, with
Flink CDC's keys (``hostname``, ``port``, ``username``, ``password``;
``properties.bootstrap.servers``; ``catalog.properties.uri``, ...). Rule: a given option fills the
key when the YAML leaves it to the deployment -- the key is absent, or its value references the
environment (``${...}``); a literal value in the YAML wins (the file is explicit about that
endpoint). Given values are used verbatim (a password holding ``${`` is not substituted); the
other ``${VAR}`` references still resolve from ``env`` as for the CLI.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from changelake.pipeline.definition import PipelineDefinition, parse_pipeline, read_pipeline_yaml

__all__ = ["bind_pipeline", "filled_keys"]


def filled_keys(block: Mapping[str, Any] | None, given: Mapping[str, str]) -> list[str]:
    """The keys of ``given`` that fill ``block`` (a raw YAML block): absent there, or ``${...}``."""
    block = block if isinstance(block, Mapping) else {}
    return [k for k in given if k not in block or block[k] is None or "${" in str(block[k])]


def bind_pipeline(
    path: str | Path,
    *,
    source: Mapping[str, str] | None = None,
    sink: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> PipelineDefinition:
    """Read the pipeline file ``path`` with ``source``/``sink`` connection options filled in.

    Args:
        path: a pipeline YAML file.
        source, sink: connector options (Flink CDC keys -> strings) for the keys the YAML leaves
            to the deployment (see the module docstring); None gives nothing.
        env: resolves the remaining ``${VAR}`` references (default: the process environment).

    Raises:
        OptionValidationError: malformed file, or a remaining ``${VAR}`` is not set (named).
        OSError: the file cannot be read.
    """
    p = Path(path)
    data = read_pipeline_yaml(p)
    given = {"source": dict(source or {}), "sink": dict(sink or {})}
    fills: dict[str, dict[str, str]] = {"source": {}, "sink": {}}
    if isinstance(data, Mapping):
        data = dict(data)
        for block, options in given.items():
            raw = data.get(block)
            keys = filled_keys(raw, options)
            fills[block] = {k: str(options[k]) for k in keys}
            if isinstance(raw, Mapping):  # resolved by the caller's values: never looked up in env
                data[block] = {k: v for k, v in raw.items() if k not in keys}
    defn = parse_pipeline(data, env=env, path=p)
    return replace(defn, source={**defn.source, **fills["source"]}, sink={**defn.sink, **fills["sink"]})
