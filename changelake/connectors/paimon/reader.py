"""Full scans of Paimon lake tables into Arrow (for the DuckDB key-state checks and tests)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pyarrow as pa

from changelake.changelog.schema import TableId
from changelake.connectors.paimon.catalog import READ_OPTIONS, identifier, load_table, open_catalog
from changelake.connectors.paimon.errors import PaimonSinkError
from changelake.connectors.paimon.options import ROW_KIND_FIELD, PaimonSinkOptions, parse_sink_options

__all__ = ["read_table", "scan_table"]


def scan_table(table: Any, columns: Sequence[str] | None = None, *, first_key_in: Sequence[Any] | None = None) -> pa.Table:
    """Every current row of a pypaimon table (merged on read), without the row-kind column.

    Args:
        table: a pypaimon ``FileStoreTable``.
        columns: columns to read, in that order; None reads all but
            :data:`~changelake.connectors.paimon.options.ROW_KIND_FIELD`.
        first_key_in: when given, only rows whose first primary-key column is one of these values
            (pushed down to pypaimon as ``IN``, files pruned by their key statistics).

    Level-0 files of a deletion-vector table are merged here (``deletion-vectors.merge-on-read``),
    since pypaimon writes but never compacts them.
    """
    names = [f.name for f in table.table_schema.fields if f.name != ROW_KIND_FIELD]
    builder = table.copy(READ_OPTIONS).new_read_builder()
    wanted = list(columns) if columns is not None else names
    push_down = first_key_in is not None and bool(names) and names[0] == table.primary_keys[0]
    extra = [table.primary_keys[0]] if first_key_in is not None and not push_down and table.primary_keys[0] not in wanted else []
    builder = builder.with_projection(wanted + extra)
    # pypaimon 2.1 tests a key predicate against the key statistics at the column's position in the
    # *table*, so it is pushed down only when the first key column is the table's first column (a
    # key such as ``src_db, src_table, id`` after ``\*`` would otherwise compare the wrong field).
    if push_down:
        predicates = builder.new_predicate_builder()
        builder = builder.with_filter(predicates.is_in(table.primary_keys[0], list(first_key_in or ())))
    arrow = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    if arrow is None:  # no splits
        fields = {f.name: f for f in _arrow_schema(table)}
        return pa.Table.from_pylist([], schema=pa.schema([fields[c] for c in wanted]))
    if first_key_in is not None and not push_down:
        import pyarrow.compute as pc

        key = table.primary_keys[0]
        column = arrow.column(key)
        arrow = arrow.filter(pc.is_in(column, value_set=pa.array(list(first_key_in), type=column.type)))
    return arrow.select(wanted)


def _arrow_schema(table: Any) -> pa.Schema:
    from pypaimon.schema.data_types import PyarrowFieldParser

    return PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)


def read_table(
    sink_options: PaimonSinkOptions | Mapping[str, Any],
    table_id: TableId,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Read every current row of the Paimon table of ``table_id`` (a full scan) into Arrow.

    Args:
        sink_options: the sink's options, typed or raw (``type: paimon``, ``catalog.properties.*``).
        table_id: the source table (the Paimon table ``database.table``).
        columns: columns to read, in that order; None reads all (lake order, no row-kind column).

    Returns:
        A ``pyarrow.Table`` with pypaimon's Arrow types (``string``, ``decimal128(p, s)``,
        ``timestamp[us]``, ``timestamp[us, tz=UTC]`` ...).

    Raises:
        PaimonSinkError: the table does not exist, or a column is unknown (names both).
        OptionValidationError: raw options are invalid.
    """
    options = sink_options if isinstance(sink_options, PaimonSinkOptions) else parse_sink_options(sink_options)
    name = identifier(table_id)
    table = load_table(open_catalog(options), table_id)
    if table is None:
        raise PaimonSinkError(f"Paimon table {name!r} (for {table_id}) does not exist", table=name)
    lake_columns = [f.name for f in table.table_schema.fields if f.name != ROW_KIND_FIELD]
    unknown = [c for c in columns or () if c not in lake_columns]
    if unknown:
        raise PaimonSinkError(
            f"column(s) {unknown} not in Paimon table {name!r}; it has {lake_columns}",
            table=name,
            column=unknown[0],
        )
    return scan_table(table, columns)
