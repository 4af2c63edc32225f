"""The Iceberg catalog of an ``iceberg`` sink: opening it, validating a SQL catalog's URI, and the
namespace properties that hold a lake's pipeline properties (the checkpoints).

A pipeline's checkpoint (the next Kafka offset per ``topic/partition`` after the last completed
batch) is the property :data:`CHECKPOINT_KEY` of the namespace :data:`PIPELINE_NAMESPACE`
(``changelake``), as the Iceberg Kafka Connect sink keeps its control state beside the tables.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Mapping
from urllib.parse import urlparse

from pyiceberg.catalog import Catalog, load_catalog

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.iceberg.errors import IcebergSinkError
from changelake.connectors.iceberg.options import IcebergSinkOptions
from changelake.connectors.lake.sink import LakeTableSink

__all__ = [
    "validate_sql_catalog_uri",
    "open_catalog",
    "ensure_namespace",
    "PIPELINE_NAMESPACE",
    "read_namespace_properties",
    "write_namespace_properties",
    "CHECKPOINT_KEY",
    "read_namespace_property",
    "write_namespace_property",
]

#: Namespace property holding a Kafka -> lake pipeline's checkpoint; ``{pipeline}`` is its name.
CHECKPOINT_KEY = LakeTableSink.CHECKPOINT_KEY


def validate_sql_catalog_uri(uri: str) -> None:
    """Check a SQL catalog's ``catalog.properties.uri`` before the catalog is loaded.

    A misspelt scheme (``sqlit:``) or a SQLite file whose folder does not exist is refused: loading
    it would silently create a new, empty catalog beside the real lake (and re-ingest every topic
    into it). Creating a catalog is an explicit act: create the folder first.

    Raises:
        OptionValidationError: names ``catalog.properties.uri`` and the value (password hidden).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    key = "catalog.properties.uri"
    try:
        url = make_url(uri)
    except ArgumentError as exc:
        raise OptionValidationError(f"'{key}' = '{uri}' is not a SQLAlchemy database URL: {exc}", option=key) from exc
    shown = url.render_as_string(hide_password=True)
    try:
        url.get_dialect()
    except NoSuchModuleError as exc:
        raise OptionValidationError(
            f"'{key}' = '{shown}': unknown database scheme '{url.drivername}' (e.g. 'sqlite:////abs/path/catalog.db', "
            f"'postgresql+psycopg2://user@host/db')",
            option=key,
        ) from exc
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            folder = Path(database).parent
            if not folder.is_dir():
                raise OptionValidationError(
                    f"'{key}' = '{shown}': the folder '{folder}' does not exist; a catalog is not created there "
                    "implicitly (check the path, or create the folder to start a new catalog)",
                    option=key,
                )


#: Tries to load a catalog that answers with a (transient) database OperationalError.
_OPEN_ATTEMPTS = 4


def open_catalog(options: IcebergSinkOptions) -> Catalog:
    """Load the pyiceberg catalog of ``options``; a ``file://`` warehouse folder is created.

    Raises:
        OptionValidationError: a SQL catalog's URI has an unknown scheme or names a SQLite file in a
            folder that does not exist (see :func:`validate_sql_catalog_uri`).
        IcebergSinkError: the catalog cannot be loaded (the message names the catalog type and
            never carries the properties, which may hold secrets).
    """
    props = dict(options.catalog_properties)
    if props.get("type", "sql") == "sql" and props.get("uri"):
        validate_sql_catalog_uri(props["uri"])
    warehouse = props.get("warehouse", "")
    if warehouse.startswith("file://"):
        Path(urlparse(warehouse).path).mkdir(parents=True, exist_ok=True)
    for attempt in range(_OPEN_ATTEMPTS):
        try:
            return load_catalog(options.catalog_name, **props)
        except Exception as exc:  # pyiceberg raises many types (ValueError, SQLAlchemy errors, ...)
            # A SQL catalog creates its tables at load; beside another process doing the same (parallel
            # workers on one SQLite file) that can meet "database is locked": transient, so retried.
            if type(exc).__name__ == "OperationalError" and attempt + 1 < _OPEN_ATTEMPTS:
                time.sleep(0.5 * 2**attempt)
                continue
            raise IcebergSinkError(
                f"cannot load Iceberg catalog {options.catalog_name!r} of type {props.get('type')!r}: "
                f"{type(exc).__name__}"
            ) from exc
    raise AssertionError("unreachable")


def ensure_namespace(catalog: Catalog, namespace: str) -> None:
    """Create ``namespace`` unless it exists, tolerating a concurrent creator (parallel workers:
    a SQL catalog then raises its driver's integrity error instead of NamespaceAlreadyExistsError)."""
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:
        if not catalog.namespace_exists(namespace):
            raise


#: Catalog namespace whose properties hold the pipeline checkpoints of an Iceberg lake (the
#: maintenance of a lake leaves it alone).
PIPELINE_NAMESPACE = "changelake"


def read_namespace_property(catalog: Catalog, key: str) -> str | None:
    """Property ``key`` of namespace :data:`PIPELINE_NAMESPACE`; None when it or the namespace is absent."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    try:
        props = catalog.load_namespace_properties(PIPELINE_NAMESPACE)
    except NoSuchNamespaceError:  # first run
        return None
    value = props.get(key)
    return str(value) if value is not None else None


def write_namespace_property(catalog: Catalog, key: str, value: str) -> None:
    """Set property ``key`` of namespace :data:`PIPELINE_NAMESPACE` (created if missing)."""
    write_namespace_properties(catalog, {key: value})


def read_namespace_properties(catalog: Catalog, prefix: str) -> dict[str, str]:
    """The properties of namespace :data:`PIPELINE_NAMESPACE` whose key starts with ``prefix``."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    try:
        props = catalog.load_namespace_properties(PIPELINE_NAMESPACE)
    except NoSuchNamespaceError:
        return {}
    return {str(k): str(v) for k, v in props.items() if str(k).startswith(prefix)}


def write_namespace_properties(catalog: Catalog, values: Mapping[str, str]) -> None:
    """Set several properties of namespace :data:`PIPELINE_NAMESPACE` in one catalog call; each
    key is set on its own (the catalog updates the given keys only). Retried a few times when a
    concurrent writer of the same key or the catalog's database makes it fail (parallel workers)."""
    ensure_namespace(catalog, PIPELINE_NAMESPACE)
    for attempt in range(_OPEN_ATTEMPTS):
        try:
            catalog.update_namespace_properties(PIPELINE_NAMESPACE, updates=dict(values))
            return
        except Exception as exc:  # SQL catalogs raise their driver's IntegrityError / OperationalError
            if attempt + 1 == _OPEN_ATTEMPTS or type(exc).__name__ not in ("IntegrityError", "OperationalError"):
                raise
            time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))

