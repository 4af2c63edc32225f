"""The Paimon catalog of a ``paimon`` sink: opening it, a source table's Paimon identifier, and
loading a table (pypaimon).

The pipeline checkpoints of a Paimon lake are rows of the table ``changelake.pipeline_checkpoints``
(see :class:`~changelake.connectors.paimon.writer.PaimonSink`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from changelake.changelog.schema import TableId
from changelake.connectors.paimon.errors import PaimonSinkError
from changelake.connectors.paimon.options import PaimonSinkOptions

__all__ = ["DEFAULT_DATABASE", "READ_OPTIONS", "open_catalog", "identifier", "load_table"]

#: Paimon database of a TableId without a database.
DEFAULT_DATABASE = "default"
# pypaimon never compacts: with deletion vectors, batch reads must merge level-0 files themselves.
READ_OPTIONS = {"deletion-vectors.merge-on-read": "true"}


def open_catalog(options: PaimonSinkOptions) -> Any:
    """The pypaimon catalog of ``options`` (creates a local filesystem warehouse's directory).

    Raises:
        PaimonSinkError: the catalog cannot be created (the message names the metastore and never
            carries the properties, which may hold tokens).
    """
    from pypaimon import CatalogFactory

    props = dict(options.catalog_properties)
    warehouse = props.get("warehouse", "")
    if options.metastore == "filesystem" and "://" not in warehouse:
        Path(warehouse).mkdir(parents=True, exist_ok=True)
    try:
        return CatalogFactory.create(props)
    except Exception as exc:
        raise PaimonSinkError(
            f"cannot create Paimon catalog with metastore {options.metastore!r}: {type(exc).__name__}"
        ) from exc


def identifier(table_id: TableId) -> str:
    """The Paimon identifier ``database.table`` of a source table (:data:`DEFAULT_DATABASE` when
    it has no database)."""
    return f"{table_id.database or DEFAULT_DATABASE}.{table_id.table}"


def load_table(catalog: Any, table_id: TableId) -> Any | None:
    """The Paimon table of ``table_id`` in the open ``catalog`` (a pypaimon ``FileStoreTable``,
    freshly loaded), or None when it or its database does not exist."""
    from pypaimon.catalog.catalog_exception import DatabaseNotExistException, TableNotExistException

    try:
        return catalog.get_table(identifier(table_id))
    except (TableNotExistException, DatabaseNotExistException):
        return None
