"""Full scans of lake tables into Arrow (for asset checks and tests)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pyarrow as pa

from changelake.changelog.schema import TableId
from changelake.connectors.iceberg.errors import IcebergSinkError
from changelake.connectors.iceberg.options import IcebergSinkOptions, parse_sink_options
from changelake.connectors.iceberg.catalog import open_catalog

__all__ = ["read_table"]


def read_table(
    catalog_options: IcebergSinkOptions | Mapping[str, Any],
    table_id: TableId,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Read every current row of the lake table of ``table_id`` (a full scan) into Arrow.

    Args:
        catalog_options: the sink's options, typed or raw (``type: iceberg``, ``catalog.properties.*``,
            ``namespace`` ...); ``namespace`` maps ``table_id`` to the lake table as the sink does.
        table_id: the source table.
        columns: columns to read, in that order; None reads all (in the lake's column order).

    Returns:
        A ``pyarrow.Table`` with the lake's Arrow types (``large_string``, ``decimal128(p, s)``,
        ``timestamp[us]``, ``timestamp[us, tz=UTC]`` ...).

    Raises:
        IcebergSinkError: the table does not exist, or a column is unknown (names both).
        OptionValidationError: raw options are invalid.
    """
    options = catalog_options if isinstance(catalog_options, IcebergSinkOptions) else parse_sink_options(catalog_options)
    ident = options.namespace.identifier(table_id)
    name = ".".join(ident)
    catalog = open_catalog(options)
    if not catalog.table_exists(ident):
        raise IcebergSinkError(f"Iceberg table {name!r} (for {table_id}) does not exist", table=name)
    table = catalog.load_table(ident)
    if columns is None:
        return table.scan().to_arrow()
    lake_columns = set(table.schema().column_names)
    unknown = [c for c in columns if c not in lake_columns]
    if unknown:
        raise IcebergSinkError(
            f"column(s) {unknown} not in Iceberg table {name!r}; it has {table.schema().column_names}",
            table=name,
            column=unknown[0],
        )
    return table.scan(selected_fields=tuple(columns)).to_arrow().select(list(columns))
