"""Which changed keys can be in the lake table at all, from the data files' column bounds.

pyiceberg's copy-on-write ``Transaction.delete(In(pk, keys))`` binds one literal per key and
evaluates the set against every data file's metrics, even when no file can hold the keys (new
inserts). The lower/upper bounds Iceberg keeps per data file and column (``lower_bounds`` /
``upper_bounds`` of the manifest entries, Iceberg spec "Manifests") answer that question for a
whole batch with one vectorized range test: a key outside every file's ``[lower, upper]`` range
of the first key column is not in the table, so it needs no delete. The test is conservative: a
file without bounds, or a key type other than integer/string, keeps every key.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import pyarrow as pa
from pyiceberg.conversions import from_bytes
from pyiceberg.table import Table
from pyiceberg.types import IntegerType, LongType, StringType

__all__ = ["key_ranges", "possibly_present"]

_RANGED = (IntegerType, LongType, StringType)


def key_ranges(table: Table, column: str) -> list[tuple[Any, Any]] | None:
    """``[lower, upper]`` of ``column`` per live data file of the current snapshot, merged into
    sorted disjoint ranges; ``[]`` for a table without data; None when some file has no bounds or
    the column's type is not integer or string (then every key may be present).

    Reads the current snapshot's manifests (no data files). Upper bounds of strings may be
    truncated upwards by the writer, which only widens a range.
    """
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    field = table.schema().find_field(column)
    if not isinstance(field.field_type, _RANGED):
        return None
    ranges: list[tuple[Any, Any]] = []
    for manifest in snapshot.manifests(table.io):
        if manifest.content != 0:  # delete manifests: pyiceberg writes none; be safe
            return None
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            data_file = entry.data_file
            if data_file.record_count == 0:
                continue
            lower = (data_file.lower_bounds or {}).get(field.field_id)
            upper = (data_file.upper_bounds or {}).get(field.field_id)
            if lower is None or upper is None:
                return None
            ranges.append((from_bytes(field.field_type, lower), from_bytes(field.field_type, upper)))
    ranges.sort()
    merged: list[tuple[Any, Any]] = []
    for lo, hi in ranges:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def possibly_present(keys: pa.Array, ranges: list[tuple[Any, Any]] | None) -> pa.Array:
    """A boolean mask over ``keys`` (one key column, no nulls): True where a key falls in one of
    ``ranges`` (from :func:`key_ranges`), so it may be in the table; all True when ``ranges`` is None."""
    if ranges is None:
        return pa.array([True] * len(keys), type=pa.bool_())
    starts = [lo for lo, _ in ranges]
    ends = [hi for _, hi in ranges]
    mask = []
    for key in keys.to_pylist():
        i = bisect_right(starts, key) - 1
        mask.append(i >= 0 and key <= ends[i])
    return pa.array(mask, type=pa.bool_())
