"""Where the pipeline YAML files live, and reading one for its structure only.

The Dagster layer (jobs, lake assets, checks, sensors) and the CLI find the pipelines here: every
``*.yaml`` of ``$CHANGELAKE_PIPELINES_DIR``, else the repository's ``pipelines/`` folder, sorted
by file name. :func:`load_structure` keeps ``${VAR}`` references unresolved, so listing pipelines
needs no secret and touches no network (loading Dagster definitions with the services down).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable

from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError
from changelake.pipeline.definition import PipelineDefinition, load_pipeline

__all__ = ["REPO_ROOT", "pipelines_dir", "pipeline_files", "load_structure", "load_pipelines", "lake_pipeline_files",
           "refuse_shared_lake_tables_of", "lake_table_claim"]

REPO_ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger(__name__)


def pipelines_dir() -> Path:
    """``$CHANGELAKE_PIPELINES_DIR``, else ``<repository>/pipelines``."""
    return Path(os.environ.get("CHANGELAKE_PIPELINES_DIR", REPO_ROOT / "pipelines"))


def pipeline_files() -> list[Path]:
    """The pipeline YAML files (``*.yaml`` of :func:`pipelines_dir`), sorted by name."""
    return sorted(pipelines_dir().glob("*.yaml"))


def load_structure(path: Path) -> PipelineDefinition:
    """The definition of ``path`` with ``${VAR}`` references unresolved (no secrets needed).

    Raises:
        OptionValidationError: the file is malformed; the message starts with the file's path.
        OSError: the file cannot be read.
    """
    try:
        return load_pipeline(path, resolve=False)
    except OptionValidationError as exc:
        raise OptionValidationError(f"pipeline file {path}: {exc}", option=exc.option) from exc


def lake_pipeline_files() -> list[tuple[Path, PipelineDefinition]]:
    """(path, structure) of every pipeline file whose sink is a lake (``iceberg``, ``paimon``),
    whatever its source (``kafka`` or ``mysql`` directly)."""
    from changelake.connectors.registry import lake_sink_types

    return [(p, s) for p in pipeline_files() for s in [load_structure(p)] if s.sink_type in lake_sink_types()]


def load_pipelines() -> list[tuple[Path, PipelineDefinition]]:
    """(path, structure) of every pipeline file, checking that ``pipeline.name`` is unique (names
    identify stored positions, consumer groups and jobs; ``a-b`` and ``a_b`` collide as job names).

    Raises:
        OptionValidationError: a malformed file, or two files with the same name (both named).
    """
    import re

    seen: dict[str, Path] = {}
    out = []
    for path in pipeline_files():
        structure = load_structure(path)
        key = re.sub(r"\W", "_", structure.name)
        if key in seen:
            raise OptionValidationError(
                f"pipeline files {seen[key]} and {path} both define pipeline.name '{structure.name}'; names must be "
                "unique (they identify stored positions and jobs)",
                option="pipeline.name",
            )
        seen[key] = path
        out.append((path, structure))
    _refuse_shared_lake_tables(out)
    return out


def refuse_shared_lake_tables_of(path: Path) -> None:
    """Refuse to run ``path`` when a file of the pipelines folder (``path`` itself excepted, also
    when ``path`` lies outside the folder) writes one of its lake tables, as :func:`load_pipelines`
    refuses the folder. ``changelake pipeline run`` calls it before starting: the folder's
    pipelines are what Dagster runs beside it. Other files of the folder that are malformed are
    not this run's concern and are skipped (loading Dagster definitions reports them).

    Raises:
        OptionValidationError: ``path`` is malformed, or it and a file of the folder write the
            same lake table (both files and the table named).
    """
    mine = load_structure(path)
    others = []
    for other in pipeline_files():
        if other.resolve() == path.resolve():
            continue
        try:
            others.append((other, load_structure(other)))
        except (OptionValidationError, OSError):
            continue
    _refuse_shared_lake_tables([*others, (path, mine)])


def _refuse_shared_lake_tables(pipelines: list[tuple[Path, PipelineDefinition]]) -> None:
    """Two pipelines writing one lake table would interleave their commits, each with its own
    checkpoint (Kafka offsets against a binlog position): refuse, naming both files and the table.

    The same lake = the same sink type with the same ``catalog.*`` and ``namespace`` options as
    written, where every value referencing the environment (``${...}``) counts as one: the
    deployment's lake resource fills such keys whatever the variable is called
    (:mod:`changelake.pipeline.bind`), so ``${ICEBERG_CATALOG_URI}`` and ``${OTHER_URI}`` are the
    same catalog once bound. Tables as :func:`~changelake.pipeline.lake_tables.lake_tables` lists
    them (after ``route``).

    Raises:
        OptionValidationError: two files' pipelines write the same lake table.
    """
    from changelake.pipeline.lake_tables import is_lake, lake_tables

    owner: dict[tuple[object, ...], Path] = {}
    for path, structure in pipelines:
        if not is_lake(structure):
            continue
        lake = _same_lake(structure)
        for table in lake_tables(structure):
            first = owner.setdefault((lake, str(table)), path)
            if first != path:
                raise OptionValidationError(
                    f"pipeline files {first} and {path} both write lake table {table} of the same "
                    f"{structure.sink_type} catalog; each lake table must have one writing pipeline ({_FIX})",
                    option="sink",
                )


#: how to resolve two pipelines writing one lake table (both refusals end with it)
_FIX = ("give one of them another catalog, 'namespace' or route, or move one file out of the pipelines folder; a "
        "catalog option written as ${...} is filled by the deployment's lake resource, whatever the variable is "
        "called")


def _same_lake(structure: PipelineDefinition) -> tuple[object, ...]:
    """What makes two lake sinks the same lake: the sink type and the ``catalog.*`` and
    ``namespace`` options as written, every ``${...}`` value counting as one (the deployment's)."""
    return (structure.sink_type, tuple(sorted(
        (k, "${deployment}" if "${" in str(v) else str(v))
        for k, v in structure.sink.items() if k.startswith("catalog.") or k == "namespace")))


def lake_table_claim(defn: PipelineDefinition) -> Callable[[TableId], None]:
    """The run-time half of the one-writer rule, for the lake tables a pipeline finds as it runs
    (``topic-pattern``, a distributed topic, ``tables`` patterns), which loading the pipelines
    folder cannot see: ``claim(table)`` is called before the run first buffers rows of ``table``
    (so before its first commit; :attr:`~changelake.connectors.lake.changelog_sink.LakeChangelogSink.claim`).

    It refuses the table when another pipeline file of the folder (another ``pipeline.name``)
    whose sink is the same lake (as :func:`load_pipelines` compares them) lists it or has already
    written it (its discovered tables, :mod:`changelake.pipeline.discovery`); otherwise it records
    the table in this pipeline's discovery file at once, before the commit, so that the other
    pipeline's run refuses it in turn. Other files that are malformed are skipped (loading the
    folder reports them). The folder is read once per new table; its files' structure is cached.

    Raises (from ``claim``):
        OptionValidationError: the table belongs to another pipeline; names both pipelines, the
            other's file and the table.
    """
    from changelake.pipeline.discovery import record_tables
    from changelake.pipeline.lake_tables import is_lake, lake_tables

    mine = defn
    if defn.path is not None:  # compare the file as written, as the folder's load does
        try:
            mine = load_structure(defn.path)
        except (OptionValidationError, OSError):
            mine = defn
    lake = _same_lake(mine)
    others: dict[Path, PipelineDefinition | None] = {}

    def claim(table: TableId) -> None:
        for path in pipeline_files():
            if path not in others:
                try:
                    others[path] = load_structure(path)
                except (OptionValidationError, OSError):
                    others[path] = None
            other = others[path]
            if other is None or other.name == defn.name or not is_lake(other) or _same_lake(other) != lake:
                continue
            if table in lake_tables(other):
                raise OptionValidationError(
                    f"pipeline '{defn.name}' found lake table {table}, which pipeline '{other.name}' (file {path}) "
                    f"writes in the same {defn.sink_type} catalog; each lake table must have one writing pipeline, "
                    f"so '{defn.name}' stops before its first commit of {table} ({_FIX})",
                    option="sink",
                )
        try:
            record_tables(defn.name, [str(table)])
        except OSError as exc:
            log.warning("cannot record lake table %s of pipeline %s: %s", table, defn.name, exc)

    return claim
