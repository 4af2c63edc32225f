"""The changelog model: RowKind, ChangelogRow, TableId, Schema, DataType; operators and key state."""

from changelake.changelog.errors import ChangelogError, KeyStateError, SchemaError, UnsupportedChangelogError
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import ALL_KINDS, INSERT_ONLY, RETRACT, UPSERT, RowKind
from changelake.changelog.schema import Column, Schema, TableId
from changelake.changelog.types import DataType, TypeRoot, parse_data_type

__all__ = [
    "ALL_KINDS",
    "INSERT_ONLY",
    "RETRACT",
    "UPSERT",
    "ChangelogError",
    "ChangelogRow",
    "Column",
    "DataType",
    "KeyStateError",
    "RowKind",
    "Schema",
    "SchemaError",
    "TableId",
    "TypeRoot",
    "UnsupportedChangelogError",
    "parse_data_type",
]

from changelake.changelog.event import DataChangeEvent, Op  # noqa: E402

__all__ += ["DataChangeEvent", "Op"]
