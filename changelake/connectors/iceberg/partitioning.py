"""Partition specs of the Iceberg tables the sink creates: Flink CDC's ``partition.key`` with
Iceberg's transforms, and key-bucketing of upsert tables by default.

``partition.key`` is spelled as Flink CDC's Iceberg pipeline connector (FLINK-38808): tables
separated by ``;``, each ``db.table:<field>[,<field>...]`` where a field is a column (identity)
or an Iceberg transform of one: ``bucket[N](col)``, ``truncate[W](col)``, ``year(col)``,
``month(col)``, ``day(col)``, ``hour(col)``; e.g.
``"shop.orders:bucket[16](id);shop.events:day(created_at),region"``. ``db.table:`` (nothing
after the colon) creates the table unpartitioned.

A table without a ``partition.key`` entry is bucketed by its first primary-key column
(``bucket[N](pk)``, see :func:`default_bucket_count`) unless ``bucket-by-key: false``: pyiceberg
writes copy-on-write only, so an update commit rewrites every data file that holds one of its
keys; with buckets it rewrites only the buckets its keys hash to, and parallel workers' commits
touch disjoint files more often. Only new tables get a spec; an existing table keeps its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError

__all__ = ["PartitionField", "parse_partition_keys", "default_bucket_count", "key_bucket_field", "partition_spec_for", "sort_order_for"]

_OPTION = "partition.key"
_FIELD = re.compile(r"^\s*(?:(?P<fn>bucket|truncate)\[(?P<n>\d+)\]\((?P<c1>[^()]+)\)|"
                    r"(?P<tfn>year|month|day|hour|identity)\((?P<c2>[^()]+)\)|(?P<c3>[^()\[\]]+))\s*$",
                    re.IGNORECASE)
#: Buckets of a default-bucketed table: at least, at most, and rows per bucket aimed at.
MIN_BUCKETS, MAX_BUCKETS, ROWS_PER_BUCKET = 8, 1024, 100_000


@dataclass(frozen=True)
class PartitionField:
    """One partition field: ``transform`` of ``column``.

    Attributes:
        column: the source column.
        transform: Iceberg's transform text: ``identity``, ``bucket[N]``, ``truncate[W]``,
            ``year``, ``month``, ``day`` or ``hour``.
    """

    column: str
    transform: str = "identity"

    @property
    def name(self) -> str:
        """The partition field's name, as Iceberg's Java API names it (``id_bucket``, ``ts_day``)."""
        kind = self.transform.split("[")[0]
        return self.column if kind == "identity" else f"{self.column}_{kind}"


def _parse_field(text: str, entry: str) -> PartitionField:
    match = _FIELD.match(text)
    if match is None or not text.strip():
        raise OptionValidationError(
            f"'{_OPTION}' field {text.strip()!r} in {entry.strip()!r} is not a column or an Iceberg transform "
            "(bucket[N](col), truncate[W](col), year(col), month(col), day(col), hour(col))",
            option=_OPTION,
        )
    if match.group("fn"):
        n = int(match.group("n"))
        if n <= 0:
            raise OptionValidationError(f"'{_OPTION}': {text.strip()!r} needs a positive width", option=_OPTION)
        return PartitionField(match.group("c1").strip(), f"{match.group('fn').lower()}[{n}]")
    if match.group("tfn"):
        return PartitionField(match.group("c2").strip(), match.group("tfn").lower())
    return PartitionField(match.group("c3").strip())


def parse_partition_keys(text: Any) -> Mapping[TableId, tuple[PartitionField, ...]]:
    """Parse ``partition.key``: ``db.table:field[,field...][;db2.table2:...]`` (see the module).

    Returns:
        ``TableId`` -> partition fields (an empty tuple: unpartitioned).

    Raises:
        OptionValidationError: an entry is not ``db.table:fields`` or a field is not a column or
            a known transform (names ``partition.key`` and the entry).
    """
    out: dict[TableId, tuple[PartitionField, ...]] = {}
    if text is None or not str(text).strip():
        return MappingProxyType(out)
    for entry in str(text).split(";"):
        if not entry.strip():
            continue
        table, sep, fields = entry.partition(":")
        if not sep or not table.strip():
            raise OptionValidationError(
                f"'{_OPTION}' entries must look like 'db.table:col1,bucket[16](col2)'; got {entry.strip()!r}",
                option=_OPTION,
            )
        parts = [f for f in _split_fields(fields) if f.strip()]
        out[TableId.parse(table.strip())] = tuple(_parse_field(f, entry) for f in parts)
    return MappingProxyType(out)


def _split_fields(text: str) -> list[str]:
    """Split on commas outside parentheses/brackets."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def default_bucket_count(rows: int, topic_partitions: int) -> int:
    """Buckets of a default-bucketed table: the smallest power of two that is at least
    ``MIN_BUCKETS`` (8), the number of topic partitions feeding the table (so each parallel
    worker can own buckets) and ``rows / ROWS_PER_BUCKET`` (100,000 rows per bucket), at most
    ``MAX_BUCKETS`` (1024). ``rows`` is the table's size as known at creation: the rows of its
    first commit (a snapshot's first ``commit.max-rows``).
    """
    want = max(MIN_BUCKETS, topic_partitions, -(-max(rows, 0) // ROWS_PER_BUCKET))
    n = 1
    while n < want:
        n *= 2
    return min(n, MAX_BUCKETS)


def key_bucket_field(iceberg_schema: Any, primary_key: tuple[str, ...], buckets: int) -> PartitionField | None:
    """``bucket[buckets](first key column)``, or None when there is no key or Iceberg's bucket
    transform does not apply to that column's type (FLOAT, DOUBLE, BOOLEAN)."""
    from pyiceberg.transforms import parse_transform

    if not primary_key:
        return None
    transform = f"bucket[{buckets}]"
    if not parse_transform(transform).can_transform(iceberg_schema.find_field(primary_key[0]).field_type):
        return None
    return PartitionField(primary_key[0], transform)


def partition_spec_for(iceberg_schema: Any, fields: tuple[PartitionField, ...], *, table: str) -> Any:
    """The pyiceberg ``PartitionSpec`` of ``fields`` over ``iceberg_schema`` (field ids from 1000).

    Raises:
        OptionValidationError: a column is not in the table, or the transform does not apply to its
            type (names ``partition.key``, the table and the column).
    """
    from pyiceberg.partitioning import PartitionField as IcebergPartitionField
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.transforms import parse_transform

    out = []
    for i, field in enumerate(fields):
        try:
            source = iceberg_schema.find_field(field.column)
        except ValueError:
            raise OptionValidationError(
                f"'{_OPTION}' of table {table!r} names column {field.column!r}, which the table does not have "
                f"(columns: {[f.name for f in iceberg_schema.fields]})",
                option=_OPTION,
            ) from None
        transform = parse_transform(field.transform)
        if not transform.can_transform(source.field_type):
            raise OptionValidationError(
                f"'{_OPTION}' of table {table!r}: {field.transform}({field.column}) does not apply to column "
                f"{field.column!r} of type {source.field_type}",
                option=_OPTION,
            )
        out.append(IcebergPartitionField(source_id=source.field_id, field_id=1000 + i, transform=transform,
                                         name=field.name))
    return PartitionSpec(*out)


def sort_order_for(iceberg_schema: Any, primary_key: tuple[str, ...]) -> Any:
    """The table's sort order: the primary-key columns ascending (the sink sorts every file it
    writes by key, so a file's key range is narrow and a commit's key filter prunes files)."""
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    return SortOrder(*[SortField(source_id=iceberg_schema.find_field(k).field_id, transform=IdentityTransform())
                       for k in primary_key])
