"""Pipeline definitions in Flink CDC's YAML: ``pipeline``, ``source``, ``sink``, ``route``, ``transform``.

Example (Pipeline 1, as Flink CDC's ``flink-cdc.sh mysql-to-kafka.yaml``)::

    pipeline: {name: mysql-to-kafka}
    source: {type: mysql, hostname: ${MYSQL_HOST}, port: ${MYSQL_PORT}, username: ${MYSQL_USER},
             password: ${MYSQL_PASSWORD}, tables: kafka_test.\\.*, server-id: 8601-8604}
    sink: {type: kafka, properties.bootstrap.servers: ${KAFKA_BOOTSTRAP_SERVERS}}

Values may reference the environment as ``${VAR}`` (``${VAR:-default}`` gives a default). Option
values are kept as strings, as Flink's ``Configuration`` keeps them. Secrets (any key containing
``password``, ``secret``, ``sasl.jaas.config`` or ``basic-auth``) are masked by :meth:`redacted`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import validate_unsupported_options
from changelake.options import ConfigOption, key

__all__ = ["PipelineDefinition", "load_pipeline", "parse_pipeline", "validate_pipeline_block", "PIPELINE_OPTIONS", "PIPELINE_KEYS", "SECRET_MARKERS"]

SECRET_MARKERS = ("password", "secret", "sasl.jaas.config", "basic-auth", "accesskey")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.]*)(?::-([^}]*))?\}")


def _substitute(value: str, where: str, env: Mapping[str, str] | None) -> str:
    def repl(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if env is None:  # structure only: keep the reference for later resolution
            return m.group(0)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise OptionValidationError(
            f"{where} references the environment variable ${{{name}}}, which is not set", option=where
        )

    return _VAR.sub(repl, value)


def _options(block: Any, where: str, env: Mapping[str, str] | None) -> dict[str, str]:
    if block is None:
        return {}
    if not isinstance(block, Mapping):
        raise OptionValidationError(f"'{where}' must be a mapping of options, got {type(block).__name__}", option=where)
    out: dict[str, str] = {}
    for key, value in block.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif value is None:
            text = ""
        elif isinstance(value, (Mapping, list)):
            raise OptionValidationError(f"option '{where}.{key}' must be a scalar, got {type(value).__name__}", option=str(key))
        else:
            text = str(value)
        out[str(key)] = _substitute(text, f"{where}.{key}", env)
    return out


def is_secret(key: str) -> bool:
    """True for option keys whose values must never be printed or logged."""
    lowered = key.lower()
    return any(marker in lowered for marker in SECRET_MARKERS)


@dataclass(frozen=True)
class PipelineDefinition:
    """A parsed pipeline.

    Attributes:
        name: ``pipeline.name``; the identity from which stored positions, the consumer group and
            transactional ids derive.
        pipeline: the whole ``pipeline`` block (strings).
        source, sink: option mappings including ``type``.
        route: list of rules (``source-table``, ``sink-table``, optional ``replace-symbol``, ``description``).
        transform: list of rules (``source-table``, ``projection``, ``filter``, ``primary-keys``, ...).
        user_defined_functions: ``pipeline.user-defined-function`` entries (``name``, ``classpath``).
        path: the file it came from, if any.
    """

    name: str
    source: dict[str, str]
    sink: dict[str, str]
    pipeline: dict[str, str] = field(default_factory=dict)
    route: list[dict[str, str]] = field(default_factory=list)
    transform: list[dict[str, str]] = field(default_factory=list)
    path: Path | None = None
    #: ``pipeline.user-defined-function``: ``{name, classpath}`` entries (Python dotted paths).
    user_defined_functions: list[dict[str, str]] = field(default_factory=list)

    @property
    def source_type(self) -> str:
        return self.source["type"]

    @property
    def sink_type(self) -> str:
        return self.sink["type"]

    def options(self, block: str) -> dict[str, str]:
        """A block's options without ``type`` and ``name`` (what the connector factory validates)."""
        return {k: v for k, v in getattr(self, block).items() if k not in ("type", "name")}

    def redacted(self) -> dict[str, Any]:
        """The definition as a dict with every secret value replaced by ``******``."""

        def mask(block: Mapping[str, str]) -> dict[str, str]:
            return {k: ("******" if is_secret(k) else v) for k, v in block.items()}

        return {
            "pipeline": mask(self.pipeline),
            "source": mask(self.source),
            "sink": mask(self.sink),
            "route": [mask(r) for r in self.route],
            "transform": [mask(t) for t in self.transform],
            **({"user-defined-function": [dict(u) for u in self.user_defined_functions]}
               if self.user_defined_functions else {}),
        }

    def __repr__(self) -> str:
        return f"PipelineDefinition({self.redacted()!r})"


#: Options of Flink CDC's ``pipeline`` block, in the engine's one option idiom. Only ``name``,
#: ``parallelism``, ``route-mode``, ``local-time-zone``, ``schema.change.behavior``,
#: ``transform.decimal.precision.mode``, ``user-defined-function`` and ``columnar.enabled`` change
#: changelake's behaviour; the others are accepted (and type-checked) so Flink CDC definitions load
#: unchanged. Checked by :func:`validate_pipeline_block`.
PIPELINE_OPTIONS: tuple[ConfigOption[Any], ...] = (
    key("name").string_type().no_default_value().with_description(
        "identity of the pipeline: stored positions, consumer group and transactional ids derive from it"),
    key("parallelism").int_type(minimum=1).default_value(1).with_description(
        "positive integer; N > 1 runs a Kafka -> Iceberg pipeline as N worker processes in one consumer group"),
    key("route-mode").string_type().default_value("ALL_MATCH").with_description("ALL_MATCH (default) or FIRST_MATCH"),
    key("local-time-zone").string_type().default_value("UTC").with_description(
        "time zone of transform expressions (LOCALTIMESTAMP, CURRENT_DATE, TIMESTAMP <-> TIMESTAMP_LTZ); default UTC. "
        "TIMESTAMP values are always UTC"),
    key("execution.runtime-mode").string_type().default_value("STREAMING").with_description(
        "STREAMING or BATCH (accepted; bounded runs use --until-caught-up)"),
    key("schema.change.behavior").string_type().no_default_value().with_description(
        "exception | evolve | try_evolve | lenient | ignore (Flink CDC's meanings, applied by "
        "lake sinks); unset: changelake's default, the lake equals MySQL (README)"),
    key("schema-operator.rpc-timeout").string_type().no_default_value().with_description("accepted, unused"),
    key("operator.uid.prefix").string_type().no_default_value().with_description("accepted, unused"),
    key("sink.partitioning.strategy").string_type().no_default_value().with_description("accepted, unused"),
    key("transform.decimal.precision.mode").string_type().default_value("UP_TO_19").with_description(
        "UP_TO_19 (default) or UP_TO_38: the largest DECIMAL precision of computed columns"),
    key("user-defined-function").custom_type("List<Map>", str).no_default_value().with_description(
        "list of {name, classpath}: Python functions or classes usable in transform expressions"),
    key("columnar.enabled").bool_type().default_value(True).with_description(
        "true (default) or false: a Kafka -> lake pipeline decodes, routes, transforms and writes the "
        "records of one schema header in Arrow batches; false: record by record (README 'Performance')"),
)
#: key -> description of :data:`PIPELINE_OPTIONS`.
PIPELINE_KEYS = {o.key: o.description for o in PIPELINE_OPTIONS}


def validate_pipeline_block(block: Mapping[str, str], *, resolved: bool = True) -> None:
    """Check the ``pipeline`` block: known keys only, ``parallelism`` a positive integer and
    ``route-mode`` one of ALL_MATCH / FIRST_MATCH.

    Raises:
        OptionValidationError: naming the key, the value and the rule.
    """
    validate_unsupported_options("pipeline", block, PIPELINE_OPTIONS)
    if not resolved:
        return  # values may still hold ${VAR} references
    value = block.get("parallelism")
    if value is not None and not (value.isdigit() and int(value) >= 1):
        raise OptionValidationError(
            f"'pipeline.parallelism' must be a positive integer, but is '{value}'", option="parallelism"
        )
    behavior = block.get("schema.change.behavior")
    allowed = ("exception", "evolve", "try_evolve", "lenient", "ignore")
    if behavior is not None and str(behavior).strip().lower() not in allowed:
        raise OptionValidationError(
            f"Could not parse value '{behavior}' for key 'pipeline.schema.change.behavior'. Expected one of: "
            f"[{', '.join(allowed)}]", option="schema.change.behavior",
        )
    mode = block.get("route-mode")
    if mode is not None and mode.upper() not in ("ALL_MATCH", "FIRST_MATCH"):
        raise OptionValidationError(
            f"Could not parse value '{mode}' for key 'pipeline.route-mode'. Expected one of: [ALL_MATCH, FIRST_MATCH]",
            option="route-mode",
        )


def parse_pipeline(
    data: Mapping[str, Any], *, env: Mapping[str, str] | None = None, path: Path | None = None, resolve: bool = True
) -> PipelineDefinition:
    """Build a PipelineDefinition from parsed YAML.

    ``env`` (default: ``os.environ``) resolves ``${VAR}`` references; with ``resolve=False`` they are
    kept verbatim (to read a definition's structure without its secrets, e.g. at Dagster load time).

    Raises:
        OptionValidationError: a block is missing or malformed, an env var is unset, or ``type`` is absent.
    """
    env = (dict(os.environ) if env is None else dict(env)) if resolve else None
    if not isinstance(data, Mapping):
        raise OptionValidationError("a pipeline definition must be a YAML mapping with 'source' and 'sink'")
    unknown = set(data) - {"pipeline", "source", "sink", "route", "transform"}
    if unknown:
        raise OptionValidationError(
            f"unknown top-level block(s) {sorted(unknown)}; supported: pipeline, source, sink, route, transform"
        )
    for block in ("source", "sink"):
        if block not in data:
            raise OptionValidationError(f"the pipeline definition has no '{block}' block", option=block)
    source = _options(data["source"], "source", env)
    sink = _options(data["sink"], "sink", env)
    for block, opts in (("source", source), ("sink", sink)):
        if not opts.get("type"):
            raise OptionValidationError(f"'{block}.type' is required (e.g. mysql, kafka, iceberg)", option=f"{block}.type")
    raw_pipeline = data.get("pipeline")
    udfs: list[dict[str, str]] = []
    if isinstance(raw_pipeline, Mapping) and "user-defined-function" in raw_pipeline:
        raw_udfs = raw_pipeline["user-defined-function"] or []
        if not isinstance(raw_udfs, list):
            raise OptionValidationError("'pipeline.user-defined-function' must be a list of {name, classpath}",
                                        option="user-defined-function")
        udfs = [_options(u, f"pipeline.user-defined-function[{i}]", env) for i, u in enumerate(raw_udfs)]
        for i, u in enumerate(udfs):
            if not u.get("name") or not u.get("classpath"):
                raise OptionValidationError(f"'pipeline.user-defined-function[{i}]' needs 'name' and 'classpath'",
                                            option="user-defined-function")
        raw_pipeline = {k: v for k, v in raw_pipeline.items() if k != "user-defined-function"}
    pipeline = _options(raw_pipeline, "pipeline", env)
    if "pipeline" in data and not pipeline and not udfs:
        raise OptionValidationError("the 'pipeline' block must not be empty", option="pipeline")
    validate_pipeline_block(pipeline, resolved=env is not None)

    def rules(block: str) -> list[dict[str, str]]:
        raw = data.get(block) or []
        if not isinstance(raw, list):
            raise OptionValidationError(f"'{block}' must be a list of rules", option=block)
        out = [_options(r, f"{block}[{i}]", env) for i, r in enumerate(raw)]
        for i, rule in enumerate(out):
            if "source-table" not in rule:
                raise OptionValidationError(f"'{block}[{i}].source-table' is required", option="source-table")
        return out

    route = rules("route")
    for i, rule in enumerate(route):
        if "sink-table" not in rule:
            raise OptionValidationError(f"'route[{i}].sink-table' is required", option="sink-table")
    name = pipeline.get("name") or (path.stem if path else f"{source['type']}-to-{sink['type']}")
    return PipelineDefinition(
        name=name, source=source, sink=sink, pipeline=pipeline, route=route, transform=rules("transform"), path=path,
        user_defined_functions=udfs,
    )


def load_pipeline(path: str | Path, *, env: Mapping[str, str] | None = None, resolve: bool = True) -> PipelineDefinition:
    """Read and parse a pipeline YAML file (see :func:`parse_pipeline`).

    Raises:
        OptionValidationError: bad content or an unset ``${VAR}``.
        OSError: the file cannot be read.
    """
    p = Path(path)
    return parse_pipeline(read_pipeline_yaml(p), env=env, path=p, resolve=resolve)


def read_pipeline_yaml(path: Path) -> Any:
    """The YAML document of the pipeline file ``path``, unparsed.

    Raises:
        OptionValidationError: not valid YAML (names the file).
        OSError: the file cannot be read.
    """
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise OptionValidationError(f"{path}: not valid YAML: {exc}") from exc
