"""Debezium's signals on the MySQL source: ``signal.data.collection`` and ``execute-snapshot``.

As Debezium's source signaling channel: a table in MySQL (``signal.data.collection`` =
``db.table``) with Debezium's columns ``id`` (VARCHAR(42), primary key), ``type`` (VARCHAR(32)) and
``data`` (VARCHAR(2048)). An INSERT into it is read from the binlog (the table need not match
``tables``; its rows are change events only if it does) and acted on at that point of the binlog::

    INSERT INTO ops.debezium_signal (id, type, data) VALUES
      ('ad-hoc-1', 'execute-snapshot', '{"data-collections": ["shop.orders"], "type": "incremental"}');

``execute-snapshot`` snapshots the named captured tables again (``r`` events); see
:meth:`changelake.connectors.mysql_cdc.source.MySqlSource` for how the snapshot joins the binlog.
``data-collections`` entries are ``db.table`` names or regular expressions over them (Debezium's); tables
that are not captured are skipped with a warning, as Debezium does. ``additional-conditions`` are parsed by
:mod:`~changelake.connectors.mysql_cdc.snapshot.conditions`; ``stop-snapshot`` stops a running ad-hoc
snapshot for the tables it names (all when none). Signals may also come from Kafka
(:mod:`~changelake.connectors.mysql_cdc.snapshot.kafka_signals`).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.schema import TableId

__all__ = ["Signal", "SignalCaptured", "collections_shape_error", "log_signal", "parse_signal", "snapshot_tables"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Signal:
    """One signal row: Debezium's ``id``, ``type`` and parsed ``data`` (``{}`` when empty)."""

    id: str
    type: str
    data: dict[str, Any]


class SignalCaptured:
    """The binlog reader's table predicate: the captured tables plus the signal table (picklable)."""

    def __init__(self, captured: Callable[[TableId], bool], signal_table: TableId) -> None:
        self.captured = captured
        self.signal_table = signal_table

    def __call__(self, table_id: TableId) -> bool:
        return table_id == self.signal_table or self.captured(table_id)


def parse_signal(event: DataChangeEvent) -> Signal | None:
    """The signal an event of the signal table carries: inserts only (as Debezium), None for other
    operations. A row whose ``data`` is not a JSON object is logged and ignored (as Debezium)."""
    if event.op is not Op.CREATE or event.after is None:
        return None
    row = event.after
    sid, kind, text = row.get("id"), row.get("type"), row.get("data")
    if sid is None or kind is None:
        log.warning("signal row %r of %s has no id or type; ignored", dict(row), event.table)
        return None
    data: dict[str, Any] = {}
    if text not in (None, ""):
        try:
            parsed = json.loads(str(text))
        except ValueError as exc:
            log.warning("signal %r: data %r is not JSON (%s); ignored", sid, text, exc)
            return None
        if not isinstance(parsed, dict):
            log.warning("signal %r: data %r is not a JSON object; ignored", sid, text)
            return None
        data = parsed
    return Signal(str(sid), str(kind), data)


def snapshot_tables(signal: Signal, captured: Sequence[TableId]) -> list[str]:
    """The captured tables an ``execute-snapshot`` names (``db.table`` text, in capture order).

    Each ``data-collections`` entry is, as in Debezium, a regular expression matched against the
    whole ``db.table`` name (an exact name matches itself); entries that match no captured table
    are logged. ``[]`` when nothing is left.
    """
    names = signal.data.get("data-collections")
    wrong = collections_shape_error(signal)
    if wrong is not None:
        log.warning("%s; ignored", wrong)
        return []
    if not isinstance(names, list) or not names:
        log.warning("signal %r: %s without 'data-collections'; ignored", signal.id, signal.type)
        return []
    chosen: list[str] = []
    for name in names:
        try:
            pattern = re.compile(str(name))
        except re.error as exc:
            log.warning("signal %r: data-collection %r is not a regular expression (%s); skipped", signal.id, name, exc)
            continue
        hits = [str(t) for t in captured if str(t) == str(name) or pattern.fullmatch(str(t))]
        if not hits:
            log.warning("signal %r: %r matches no captured table; skipped", signal.id, name)
        chosen.extend(h for h in hits if h not in chosen)
    return chosen


def collections_shape_error(signal: Signal) -> str | None:
    """The message for a ``data-collections`` that is present but not a list (e.g. the string
    ``"shop.orders"``), None when it is a list or absent. Debezium's shape is a JSON array of
    ``db.table`` names or regular expressions: ``"data-collections": ["shop.orders"]``."""
    names = signal.data.get("data-collections")
    if names is None or isinstance(names, list):
        return None
    example = json.dumps([names] if isinstance(names, str) else ["db.table"])
    return (f"signal {signal.id!r}: {signal.type} 'data-collections' must be a list of table names or regular "
            f"expressions (Debezium's shape: \"data-collections\": {example}), not {type(names).__name__} {names!r}")


def log_signal(signal: Signal, offset: Any) -> None:
    """Debezium's ``log`` signal: its ``message`` logged at INFO on this module's logger (the
    pipeline's log; ``changelake pipeline run`` shows it on stderr). As Debezium's ``Log`` action
    (SLF4J), a ``{}`` in the message is replaced by the offset the signal arrived at; a missing or
    empty ``message`` is a warning.

    Args:
        signal: a signal of type ``log``.
        offset: the source position at the signal (a JSON-able mapping, e.g. the binlog
            position of the signal row), or None (shown as ``<none>``, as Debezium).
    """
    message = signal.data.get("message")
    if not isinstance(message, str) or not message:
        log.warning("signal %r: log signal without a 'message' in its data %s; nothing to log", signal.id,
                    json.dumps(signal.data, default=str))
        return
    where = json.dumps(offset, sort_keys=True, default=str) if offset is not None else "<none>"
    log.info("signal %r: %s", signal.id, message.replace("{}", where, 1))
