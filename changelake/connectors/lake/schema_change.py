"""Flink CDC's schema-change model at the lake sink: ``pipeline.schema.change.behavior`` and the
sink options ``include.schema.changes`` / ``exclude.schema.changes``.

changelake carries schemas with the data, so a schema change is what differs between the schema a
batch is written with and the lake table's: the lake sink classifies each column
(:meth:`LakeTableSink.column_changes`) into Flink CDC's event types and applies them as the mode
says (Flink CDC ``SchemaChangeBehavior``, ``docs/content/docs/core-concept/schema-evolution.md``):

============  =================================================================================
mode          what the lake does
============  =================================================================================
(unset)       changelake's default: ``add.column`` added (nullable), ``drop.column`` kept (NULL
              from then on), types widened, a type the lake cannot widen stops the pipeline,
              ``truncate.table`` and ``drop.table`` applied: the lake equals MySQL.
``exception`` the first schema change (any type below, after the include/exclude filter) stops
              the pipeline with :class:`SchemaChangeError` naming table and change; the lake
              table holds every change before it (committed first, offsets up to it) and
              none after. A new table (``create.table``) is created.
``evolve``    every change applied: columns added, dropped, widened; a change the lake cannot
              apply stops the pipeline.
``try_evolve`` as ``evolve``, but a change the lake cannot apply is skipped: the column keeps its
              lake type and gets NULL (a warning names table and column).
``lenient``   Flink's default: ``add.column`` nullable, ``drop.column`` kept nullable, a
              ``rename.column`` is a kept column plus a new one, an incompatible
              ``alter.column.type`` keeps the old column and adds ``<column>_<type>`` (e.g.
              ``v_int``); ``truncate.table`` and ``drop.table`` are ignored unless
              ``exclude.schema.changes`` is given (FLINK-36514).
``ignore``    the lake schema is kept: new columns are not written, dropped ones get NULL, an
              incompatible type gets NULL; truncates and drops are ignored; rows keep flowing.
============  =================================================================================

``include.schema.changes`` / ``exclude.schema.changes``: event types (``add.column``,
``alter.column.type``, ``drop.column``, ``rename.column``, ``create.table``, ``truncate.table``,
``drop.table``, ``alter.column.comment``) or parts of them (``drop`` = ``drop.column`` and
``drop.table``; ``column``, ``table``); a change not included, or excluded, is ignored (as under
``ignore``). A rename reaches the lake as ``drop.column`` + ``add.column`` (the binlog carries
schemas, not the statement's intent).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import Column, Schema
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.lake.compaction import BatchItem, TruncateMarker
from changelake.errors import PipelineDataError

__all__ = ["SchemaChangeBehavior", "SchemaChangePolicy", "SchemaChangeError", "ColumnChange", "EVENT_TYPES",
           "INCLUDE_KEY", "EXCLUDE_KEY"]

log = logging.getLogger(__name__)

INCLUDE_KEY = "include.schema.changes"
EXCLUDE_KEY = "exclude.schema.changes"

#: Flink CDC's schema change event type names (``SchemaChangeEventType`` tags).
EVENT_TYPES = ("add.column", "alter.column.type", "alter.column.comment", "create.table", "drop.column",
               "drop.table", "rename.column", "truncate.table")


class SchemaChangeBehavior(enum.Enum):
    """``pipeline.schema.change.behavior`` (Flink CDC's ``SchemaChangeBehavior``)."""

    EXCEPTION = "exception"
    EVOLVE = "evolve"
    TRY_EVOLVE = "try_evolve"
    LENIENT = "lenient"
    IGNORE = "ignore"


class SchemaChangeError(PipelineDataError):
    """A schema change refused under ``pipeline.schema.change.behavior: exception`` (names the
    table, the first refused change and the column). The lake table holds every change before it
    and nothing after: the lake sink commits the part of the batch before it, with the offsets up
    to the refused record, then raises (a restart stops at the same change)."""


@dataclass(frozen=True)
class ColumnChange:
    """One column's difference between the lake table and the incoming schema.

    Attributes:
        kind: ``add`` (new column), ``drop`` (lake column the incoming schema lacks), ``widen``
            (the lake widens to the incoming type), ``keep`` (narrower incoming type, written into
            the wider lake column), ``bad`` (a type the lake cannot take), ``comment``.
        column: the column.
        detail: e.g. ``"string -> int"``.
    """

    kind: str
    column: str
    detail: str = ""

    @property
    def event_type(self) -> str:
        return {"add": "add.column", "drop": "drop.column", "comment": "alter.column.comment"}.get(
            self.kind, "alter.column.type")


def _parse_types(key: str, value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    items = value if isinstance(value, (list, tuple)) else str(value).strip("[]").split(",")
    out = tuple(str(i).strip().strip("'\"").lower() for i in items if str(i).strip())
    parts = {p for t in EVENT_TYPES for p in t.split(".")} | set(EVENT_TYPES) | {"alter.column"}
    bad = [t for t in out if t not in parts]
    if bad:
        raise OptionValidationError(
            f"'{key}' names unknown schema change types {bad}; supported: {list(EVENT_TYPES)} or their parts "
            "(e.g. 'drop', 'column')", option=key)
    return out


def _matches(tag: str, event_type: str) -> bool:
    return tag == event_type or event_type.startswith(tag + ".") or tag in event_type.split(".")


@dataclass(frozen=True)
class SchemaChangePolicy:
    """What the lake does with schema changes (see module doc). The default (all None/empty) is
    changelake's default.

    Raises (from :meth:`of`): OptionValidationError naming the key and the allowed values.
    """

    behavior: SchemaChangeBehavior | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = field(default=())
    exclude_given: bool = False

    @classmethod
    def of(cls, behavior: str | None, include: Any = None, exclude: Any = None) -> "SchemaChangePolicy":
        mode = None
        if behavior not in (None, ""):
            try:
                mode = SchemaChangeBehavior(str(behavior).strip().lower())
            except ValueError:
                raise OptionValidationError(
                    f"Could not parse value '{behavior}' for key 'pipeline.schema.change.behavior'. Expected one of: "
                    f"[{', '.join(m.value for m in SchemaChangeBehavior)}]", option="schema.change.behavior") from None
        return cls(mode, _parse_types(INCLUDE_KEY, include), _parse_types(EXCLUDE_KEY, exclude),
                   exclude_given=exclude not in (None, ""))

    @property
    def is_default(self) -> bool:
        return self.behavior is None and not self.include and not self.exclude

    def applies(self, event_type: str) -> bool:
        """The sink applies (or, under ``exception``, refuses) this event type."""
        if self.behavior is SchemaChangeBehavior.IGNORE and event_type != "create.table":
            return False
        if self.include and not any(_matches(t, event_type) for t in self.include):
            return False
        excluded = self.exclude
        if self.behavior is SchemaChangeBehavior.LENIENT and not self.exclude_given:
            excluded = ("drop.table", "truncate.table")  # Flink's lenient default (FLINK-36514)
        return not any(_matches(t, event_type) for t in excluded)

    # -- truncate and drop markers -------------------------------------------------------------
    def first_refused_marker(self, table: str, items: Sequence[BatchItem]) -> tuple[int, SchemaChangeError] | None:
        """Under ``exception``: the index in ``items`` of the first truncate / drop the policy
        applies, with the error refusing it; None when there is none (or another mode)."""
        if self.behavior is not SchemaChangeBehavior.EXCEPTION:
            return None
        for at, item in enumerate(items):
            if isinstance(item, TruncateMarker):
                event_type = "drop.table" if item.drop else "truncate.table"
                if self.applies(event_type):
                    return at, self._refuse(table, event_type, None, "")
        return None

    def filter_markers(self, table: str, items: Sequence[BatchItem]) -> list[BatchItem]:
        """The items without the truncates / drops the policy ignores. Raises SchemaChangeError
        for one under ``exception`` (:meth:`first_refused_marker` says where, so the lake sink
        can commit the items before it first)."""
        refused = self.first_refused_marker(table, items)
        if refused is not None:
            raise refused[1]
        return [item for item in items if not isinstance(item, TruncateMarker)
                or self.applies("drop.table" if item.drop else "truncate.table")]

    def _refuse(self, table: str, event_type: str, column: str | None, detail: str) -> SchemaChangeError:
        what = f"{event_type} of column {column!r}" + (f" ({detail})" if detail else "") if column else event_type
        return SchemaChangeError(
            f"table {table}: schema change {what} refused: 'pipeline.schema.change.behavior' is 'exception'; the "
            "lake holds every change before it. Set another behavior (evolve, try_evolve, lenient, ignore) or "
            "exclude the change type with 'exclude.schema.changes' to go on",
            table=table, column=column,
        )

    # -- columns -----------------------------------------------------------------------------
    def plan(self, table: str, changes: Sequence[ColumnChange], incoming: Schema) -> "Plan":
        """What to write for a batch of schema ``incoming`` into a lake table differing by ``changes``.

        Raises:
            SchemaChangeError: ``exception`` and an applicable change.
        """
        schema_cols = list(incoming.columns)
        renames: dict[str, str] = {}
        drop_columns: list[str] = []
        remove: set[str] = set()
        mode = self.behavior
        for change in changes:
            applies = self.applies(change.event_type)
            if change.kind == "keep":  # a narrower type (MODIFY ... SMALLINT): it fits the lake column
                if applies and mode is SchemaChangeBehavior.EXCEPTION:
                    raise self._refuse(table, change.event_type, change.column, change.detail)
                log.info("table %s: column %r narrowed (%s); values are written into the wider lake column",
                         table, change.column, change.detail)
                continue
            if not applies or mode is SchemaChangeBehavior.IGNORE:
                if change.kind == "add":
                    remove.add(change.column)  # not written: the lake schema is kept
                elif change.kind in ("bad", "widen"):
                    remove.add(change.column)
                    log.warning("table %s: column %r changed type (%s); the change is ignored and the column is "
                                "written as NULL", table, change.column, change.detail)
                continue
            if mode is SchemaChangeBehavior.EXCEPTION:
                raise self._refuse(table, change.event_type, change.column, change.detail)
            if change.kind == "drop" and mode is SchemaChangeBehavior.EVOLVE or (
                    change.kind == "drop" and mode is SchemaChangeBehavior.TRY_EVOLVE):
                drop_columns.append(change.column)
            elif change.kind == "bad" and mode is SchemaChangeBehavior.TRY_EVOLVE:
                remove.add(change.column)
                log.warning("table %s: column %r cannot change type (%s) in the lake; try_evolve keeps the lake "
                            "type and writes NULL", table, change.column, change.detail)
            elif change.kind == "bad" and mode is SchemaChangeBehavior.LENIENT:
                col = incoming.column(change.column)
                base = f"{change.column}_{col.type.root.value.lower()}"
                renames[change.column] = base
        cols: list[Column] = []
        for c in schema_cols:
            if c.name in remove and c.name not in incoming.primary_key:
                continue
            cols.append(Column(renames.get(c.name, c.name), c.type, c.comment))
        schema = Schema(tuple(cols), incoming.primary_key, comment=incoming.comment)
        return Plan(schema, renames, drop_columns, remove)


@dataclass(frozen=True)
class Plan:
    """The schema to write with, columns renamed in the rows, lake columns to drop first."""

    schema: Schema
    renames: dict[str, str]
    drop_columns: list[str]
    removed: set[str]

    def apply(self, items: Sequence[BatchItem]) -> list[BatchItem]:
        """The rows with renamed columns and without the removed ones."""
        if not self.renames and not self.removed:
            return list(items)
        out: list[BatchItem] = []
        for item in items:
            if isinstance(item, ChangelogRow):
                values = {self.renames.get(k, k): v for k, v in item.values.items() if k not in self.removed
                          or k in self.schema.primary_key}
                out.append(ChangelogRow(item.kind, values, item.table, item.metadata))
            else:
                out.append(item)
        return out
