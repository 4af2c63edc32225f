"""Changelog-mode check between a producing node and a sink, as Flink's planner does it.

Every source, operator and sink declares its changelog mode as a ``frozenset[RowKind]``
(:data:`~changelake.changelog.rowkind.INSERT_ONLY`, ``UPSERT`` = {+I, +U, -D}, ``RETRACT`` = all
four). Before anything runs, :func:`check_changelog_mode` refuses a producer whose changes the
sink cannot consume, with the message of Flink's ``FlinkChangelogModeInferenceProgram``:

    Table sink 'default_catalog.default_database.pageviews_sink' doesn't support consuming update
    changes which is produced by node GroupAggregate(groupBy=[user_region], select=[...])

An upsert sink ({+I, +U, -D}) consuming a retract stream is fine: the planner simply does not
send ``-U`` (Flink's producer stops generating update-before); the function returns the kinds
the caller must drop before the sink.
"""

from __future__ import annotations

from changelake.changelog.errors import UnsupportedChangelogError
from changelake.changelog.rowkind import RowKind

__all__ = ["check_changelog_mode", "describe_mode", "CHANGELOG_FORMATS"]

#: Formats that carry every row kind on the ``kafka`` connector (Flink's CDC formats).
CHANGELOG_FORMATS: tuple[str, ...] = ("debezium-json", "canal-json", "maxwell-json")

_SHORT = {
    RowKind.INSERT: "I",
    RowKind.UPDATE_BEFORE: "UB",
    RowKind.UPDATE_AFTER: "UA",
    RowKind.DELETE: "D",
}
_ORDER = [RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE]


def describe_mode(kinds: frozenset[RowKind]) -> str:
    """Flink's plan spelling of a changelog mode, e.g. ``[I,UB,UA,D]`` or ``[I]``."""
    return "[" + ",".join(_SHORT[k] for k in _ORDER if k in kinds) + "]"


def check_changelog_mode(
    produced: frozenset[RowKind],
    accepted: frozenset[RowKind],
    sink_description: str,
    *,
    node_description: str | None = None,
) -> frozenset[RowKind]:
    """Refuse a changelog that a sink cannot consume; return the kinds to drop before the sink.

    Args:
        produced: kinds the upstream node emits (e.g. ``GroupAggregate.changelog_mode``).
        accepted: kinds the sink consumes (e.g. ``KafkaTableSink.changelog_mode``).
        sink_description: the sink's table name, e.g.
            ``default_catalog.default_database.pageviews_sink``.
        node_description: the producing node as a plan prints it, e.g.
            ``GroupAggregate(groupBy=[user_region], select=[...])``.

    Returns:
        The kinds the caller must filter out: ``{-U}`` when an upsert sink (accepting +U but not
        -U) consumes a retract stream, else the empty set.

    Raises:
        UnsupportedChangelogError: the producer emits updates (``-U``/``+U``) or deletes (``-D``)
            the sink does not accept. Attributes ``sink``, ``node``, ``unsupported`` (kinds).
            Semantics and wording follow Flink's planner.
    """
    drop: set[RowKind] = set()
    produced_eff = set(produced)
    # An upsert sink needs no update-before: the planner stops the producer from sending it.
    if RowKind.UPDATE_AFTER in accepted and RowKind.UPDATE_BEFORE not in accepted:
        if RowKind.UPDATE_BEFORE in produced_eff:
            drop.add(RowKind.UPDATE_BEFORE)
            produced_eff.discard(RowKind.UPDATE_BEFORE)
    unsupported = frozenset(produced_eff - set(accepted))
    if not unsupported:
        return frozenset(drop)
    updates = bool(unsupported & {RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER})
    deletes = RowKind.DELETE in unsupported
    if updates and deletes:
        what = "update and delete"
    elif updates:
        what = "update"
    elif deletes:
        what = "delete"
    else:
        what = "insert"
    node = f"node {node_description}" if node_description else "an upstream node"
    msg = (
        f"Table sink '{sink_description}' doesn't support consuming {what} changes which is produced by "
        f"{node}. The sink accepts {describe_mode(accepted)} but the input is {describe_mode(produced)}. "
        f"Use the 'upsert-kafka' connector (with a PRIMARY KEY) for an updating result, or a changelog "
        f"format ({', '.join(CHANGELOG_FORMATS)}) with the 'kafka' connector."
    )
    err = UnsupportedChangelogError(msg)
    err.sink = sink_description  # type: ignore[attr-defined]
    err.node = node_description  # type: ignore[attr-defined]
    err.unsupported = unsupported  # type: ignore[attr-defined]
    raise err
