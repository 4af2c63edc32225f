"""What happens to change events between source and sink: transform, route, and the key check.

As Flink CDC: ``transform`` rules match the source table's name, ``route`` then re-addresses the
transformed event to its sink table(s). An event without schema (a Kafka record with no schema
header or wrapper) gets the schema inferred from its row, with the transform's primary key; a
truncate without one takes the table's last known schema. Every event's key row(s) must hold each
primary-key column.

The events of one source record share one ``position`` object (a Kafka record may carry several);
they pass or fail together: a record whose events cannot be transformed, routed or keyed is handed
to the source's ``reject`` (``kafka``: skipped with ``<format>.ignore-parse-errors`` and copied to
``dead-letter.topic``, else raised as ``RecordError``), or, for a source without ``reject``, raised.

Without transform, route and append-only reading, the stage has no work for the events of a poll
its source vouches for (:meth:`Stage.passes_through`,
:class:`~changelake.connectors.base.GuaranteesKeys`): the loop writes them as they are.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import pyarrow as pa

from changelake.changelog import DataChangeEvent, Op, Schema, TableId
from changelake.changelog.change_batch import ChangeBatch, batch_arrow_schema, op_counts
from changelake.changelog.errors import ChangelogError
from changelake.changelog.modes import CHANGELOG_FORMATS, describe_mode
from changelake.changelog.route import Router, parse_route_rules
from changelake.changelog.transform import (
    TransformError,
    TransformRule,
    Transformer,
    append_only,
    infer_schema,
    parse_transform_rules,
)
from changelake.changelog.rowkind import RowKind
from changelake.changelog.types import TypeRoot
from changelake.connectors.base import GuaranteesKeys
from changelake.errors import PipelineDataError
from changelake.pipeline.definition import PipelineDefinition

__all__ = ["Stage", "MissingKeyError", "checked_schema", "Reject"]

#: ``reject(first event of the record, error, source table)``: skip the record or raise.
Reject = Callable[[DataChangeEvent, BaseException, str], None]


class MissingKeyError(ValueError):
    """A change event's row has no value for a primary-key column.

    Attributes:
        column: the first missing key column.
    """

    def __init__(self, message: str, column: str) -> None:
        super().__init__(message)
        self.column = column


class Stage:
    """Transform, route and key-check the events of one pipeline (state: the last schema per table)."""

    def __init__(self, defn: PipelineDefinition) -> None:
        self.pipeline = defn.name
        self.router = Router(parse_route_rules(defn.route), mode=defn.pipeline.get("route-mode", "ALL_MATCH"))
        self.transformer = Transformer(parse_transform_rules(
            defn.transform, pipeline=defn.pipeline, udfs=defn.user_defined_functions))
        self._known: dict[TableId, Schema] = {}
        #: ``pipeline.schema.change.behavior`` (None: changelake's default).
        self.behavior = str(defn.pipeline.get("schema.change.behavior") or "").lower() or None
        #: Flink CDC's ``scan.read-changelog-as-append-only.enabled`` (a source option): every change an insert.
        self.append_only = str(defn.source.get("scan.read-changelog-as-append-only.enabled", "false")).lower() == "true"

    def passes_through(self, source: object) -> bool:
        """True when this stage has nothing to do on the events of a poll of ``source`` after which
        it says ``last_poll_keyed`` (asked once, before the source's first poll; a stage that
        has seen no event yet).

        So when there is no ``transform`` rule, no ``route`` rule, no
        ``scan.read-changelog-as-append-only.enabled``, and ``source`` is a
        :class:`~changelake.connectors.base.GuaranteesKeys`. :meth:`apply` would then return the
        events themselves, in order: no rule transforms an event (``Transformer.apply_events``
        gives each back) nor routes it (``Router.route_event`` gives ``[event]``); each carries its
        schema with its key columns non-NULL, so :func:`checked_schema` passes and returns that
        schema (the event is kept as it is, nothing is rejected); a TRUNCATE without schema would
        take the table's last schema in ``_known``, but the source gives it that schema itself, or
        has emitted no event of the table with one (so ``_known``, only ever filled from the
        source's events, has none). ``_known`` is read by nothing else: a poll that skips the
        stage leaves nothing a later :meth:`apply` would read differently.
        """
        return (not self.transformer.rules and not self.router.rules and not self.append_only
                and not self._known and isinstance(source, GuaranteesKeys))

    def check_source(self, produced: frozenset[RowKind]) -> None:
        """Refuse a ``filter`` on an upsert changelog: a source whose updates come as +U without
        -U (Flink's upsert mode, e.g. a ``value.format: json`` topic: a record is its key's row, a
        tombstone its delete, no before image). An update that moves a row out of the filter, or a
        delete (its non-key columns unknown), would be dropped instead of deleting the lake row.
        Flink's planner normalizes an upsert source against its state (ChangelogNormalize) before
        a filter; this pipeline does not, so it refuses before anything runs.

        Args:
            produced: the source's ``changelog_mode``.

        Raises:
            TransformError: names the rule's ``source-table`` and the source's changelog mode.
        """
        if RowKind.UPDATE_AFTER not in produced or RowKind.UPDATE_BEFORE in produced:
            return
        for rule in self.transformer.rules:
            if rule.filter and rule.filter.strip():
                raise TransformError(
                    f"pipeline '{self.pipeline}': transform rule for source-table {rule.source_table!r}: a filter on "
                    f"an upsert changelog {describe_mode(produced)} (no before images, e.g. a value.format 'json' "
                    "topic) would keep rows whose update leaves the filter or whose key was deleted; read a changelog "
                    f"format with before images ({', '.join(CHANGELOG_FORMATS[:2])}), or drop the filter",
                    source_table=rule.source_table, option="filter")

    def apply(self, events: Sequence[DataChangeEvent], reject: Reject | None = None) -> list[DataChangeEvent]:
        """The sink's events for ``events``, each with its schema where one is known.

        Raises:
            ChangelogError: a transform or route failed and the source has no ``reject``.
            PipelineDataError: a key column is missing or NULL and the source has no ``reject``
                (names the table and the column).
            whatever ``reject`` raises (``RecordError`` with topic, partition, offset, table).
        """
        out: list[DataChangeEvent] = []
        transformed = self._transform_all(events)
        start = 0
        for record in _records(events):
            done = transformed[start:start + len(record)] if transformed is not None else None
            start += len(record)
            try:
                checked = [self._checked(e) for e in self._route_and_transform(record, done)]
            except (ChangelogError, MissingKeyError) as exc:
                if reject is None:
                    if isinstance(exc, MissingKeyError):
                        raise PipelineDataError(f"pipeline '{self.pipeline}': {exc}", pipeline=self.pipeline,
                                                table=str(record[0].table), column=exc.column) from exc
                    raise
                reject(record[0], exc, str(record[0].table))
                continue
            for event in checked:
                if event.schema is not None:
                    self._known[event.table] = event.schema
            out.extend(checked)
        return out

    def apply_batch(self, batch: ChangeBatch) -> list[ChangeBatch] | None:
        """The sink's batches for ``batch``: transformed (one Arrow evaluation,
        :meth:`~changelake.changelog.transform.Transformer.apply_batch`), then routed; None when
        the batch needs the per-record path (:meth:`apply` on ``batch.fallback()``), which then
        decides exactly as without batches: a key column missing or NULL in some row, a transform
        that fails on some row (the failing record is rejected alone), a rule reading
        ``__event_position__`` or a TIME column, a computed TIME column, append-only reading.
        """
        if self.append_only:
            return None
        rule = self.transformer.rule_for(batch.table)
        if rule is not None:
            transformed = self._transform_batch(rule, batch)
            if transformed is None:
                return None
            batch = transformed
        if batch.null_key_rows():
            return None
        out = []
        for target in self.router.route(batch.table):
            routed = batch if target == batch.table else batch.retarget(target)
            self._known[routed.table] = routed.schema
            out.append(routed)
        return out

    def _transform_batch(self, rule: TransformRule, batch: ChangeBatch) -> ChangeBatch | None:
        schema = batch.schema
        try:
            # TIME is text in a batch and a duration in expressions: an output TIME column takes
            # the per-record path, and an expression reading one finds it missing (and so does)
            if _has_time(rule.apply_schema(schema)) or "__event_position__" in rule.metadata_read(schema):
                return None
            rows = batch.rows
            if _has_time(schema):
                rows = rows.select([c.name for c in schema.columns if c.type.root is not TypeRoot.TIME])
            result = rule.apply_batch(batch.table, schema, rows, batch.kinds)
        except ChangelogError:
            return None  # the per-record path names (or rejects) the record it fails on
        target = batch_arrow_schema(result.schema)
        if target is None or _has_time(result.schema):
            return None
        try:
            columns = [result.table.column(f.name).cast(f.type) for f in target]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None  # a computed value the batch layout cannot hold as the per-record path does
        rows = pa.Table.from_arrays(columns, schema=target)
        kinds = result.row_kinds
        changed = replace(batch.with_rows(result.schema, rows, kinds, result.indices), ops=op_counts(kinds))
        return changed

    def _transform_all(self, events: Sequence[DataChangeEvent]) -> list[DataChangeEvent | None] | None:
        """Every event transformed in one Arrow evaluation per rule and schema; None when that fails,
        so that each record is transformed alone and the failing one is rejected by itself."""
        try:
            return self.transformer.apply_events(events)
        except ChangelogError:
            return None

    def _route_and_transform(self, events: list[DataChangeEvent],
                             transformed: Sequence[DataChangeEvent | None] | None = None) -> list[DataChangeEvent]:
        out: list[DataChangeEvent] = []
        for i, event in enumerate(events):
            result = transformed[i] if transformed is not None else self.transformer.apply(event)
            if result is not None:
                for converted in (append_only([result]) if self.append_only else [result]):
                    routed = self.router.route_event(converted)
                    if converted.op is Op.TRUNCATE and routed != [converted]:
                        routed = [e for e in routed if self._truncate_routed(converted.table, e)]
                    out.extend(routed)
        return out

    def _truncate_routed(self, source: TableId, event: DataChangeEvent) -> bool:
        """True to pass a routed TRUNCATE / DROP TABLE of ``source`` on to ``event.table``.

        A sink table that a ``route`` merges from several source tables holds rows of the others
        too, and a truncate cannot tell them apart (the lake keeps no source table per row): under
        ``lenient`` / ``ignore`` it is dropped (those modes ignore truncates anyway); otherwise the
        run stops here, before anything is written past it.

        Raises:
            PipelineDataError: names the source table, the sink table and the merging rule. To go
                on, route the table to a sink table of its own, or set
                ``pipeline.schema.change.behavior: lenient`` / ``ignore`` to keep the lake's rows.
        """
        rule = self.router.merged_into(source, event.table)
        if rule is None:
            return True
        if self.behavior in ("lenient", "ignore"):
            return False
        what = "DROP TABLE" if event.is_drop else "TRUNCATE TABLE"
        raise PipelineDataError(
            f"pipeline '{self.pipeline}': {what} of {source} cannot be applied to {event.table}: the route "
            f"{rule.source_table!r} -> {rule.sink_table!r} merges other source tables into it, whose rows it would "
            f"delete too. Route {source} to a sink table of its own, or set 'pipeline.schema.change.behavior' to "
            "'lenient' or 'ignore' to ignore truncates (the sink table then keeps the truncated table's rows)",
            pipeline=self.pipeline, table=str(source),
        )

    def _checked(self, event: DataChangeEvent) -> DataChangeEvent:
        schema = checked_schema(event, self._schema(event))
        return event if schema is event.schema else replace(event, schema=schema)

    def _schema(self, event: DataChangeEvent) -> Schema | None:
        """The event's own schema, else inferred from its row (with the transform's primary key);
        a truncate without one takes the table's last known schema (or None)."""
        if event.schema is not None:
            return event.schema
        if event.op is Op.TRUNCATE:
            return self._known.get(event.table)
        values = event.after if event.after is not None else (event.before or {})
        return self.transformer.apply_schema(event.table, infer_schema(values))


def _has_time(schema: Schema) -> bool:
    return any(c.type.root is TypeRoot.TIME for c in schema.columns)


def checked_schema(event: DataChangeEvent, schema: Schema | None) -> Schema | None:
    """``schema`` after checking that the event's key row(s) hold every primary-key column.

    Raises:
        MissingKeyError: names the image (``before``/``after``), the missing columns and the
            columns present (``column``: the first missing one).
    """
    if schema is None or not schema.primary_key or event.op is Op.TRUNCATE:
        return schema
    images = {"before": event.before} if event.op is Op.DELETE else {"after": event.after}
    if event.op is Op.UPDATE:
        images["before"] = event.before
    for name, row in images.items():
        if row is None:
            continue
        missing = [k for k in schema.primary_key if row.get(k) is None]
        if missing:
            present = sorted(k for k, v in row.items() if v is not None)
            raise MissingKeyError(
                f"primary-key column(s) {missing} of table {event.table} missing or NULL in the '{name}' row of "
                f"a '{event.op.value}' event; columns with values are {present}",
                missing[0],
            )
    return schema


def _records(events: Sequence[DataChangeEvent]) -> list[list[DataChangeEvent]]:
    """Consecutive events sharing one ``position`` object (one source record) grouped together."""
    groups: list[list[DataChangeEvent]] = []
    for event in events:
        if groups and groups[-1][-1].position is event.position:
            groups[-1].append(event)
        else:
            groups.append([event])
    return groups
