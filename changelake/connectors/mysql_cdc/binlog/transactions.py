"""Debezium's transaction metadata (``provide.transaction.metadata``) for the binlog phase.

As Debezium's ``TransactionMonitor``: the first change event of a source transaction is preceded
by a ``BEGIN`` record; when the transaction commits, an ``END`` record gives the number of change
events in all (``event_count``) and per table (``data_collections``); every change event gets a
``transaction`` block ``{"id", "total_order", "data_collection_order"}`` (1-based positions in the
transaction and among the transaction's events of its own table). A transaction with no captured
change gets neither record, as in Debezium. The id is the GTID (MariaDB ``domain-server-seq``,
MySQL ``uuid:n``; the binlog reader puts it in each event's position as ``gtid``), else
``file=<binlog file>,pos=<transaction start>`` as Debezium's MySQL connector without GTIDs.

Where a transaction ends is seen from the reader's items: an event of another transaction (its
``file``/``pos`` differ) or a progress item past the transaction's start (the reader sends one
after every commit). Snapshot rows carry no transaction, as in Debezium.

Exactly once across restarts: while a transaction is open, :meth:`TransactionMonitor.state` is
kept in the stored position (``"transaction": {"id", "file", "pos", "total", "ts_ms",
"data_collections": [[table, n], ...]}``); the restarted source re-reads the transaction from its
start, skips the rows already emitted (:class:`~changelake.connectors.mysql_cdc.positions.TransactionTracker`)
and :meth:`restore` continues the counts, so ``BEGIN`` is not written twice and ``END`` counts
every event of the transaction.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Mapping

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.side_records import TransactionRecord
from changelake.connectors.errors import SourceError

__all__ = ["TransactionMonitor", "transaction_id"]

log = logging.getLogger(__name__)


def transaction_id(position: Mapping[str, Any]) -> str:
    """The transaction id of an event's position: its ``gtid``, else ``file=<f>,pos=<p>``."""
    gtid = position.get("gtid")
    if gtid:
        return str(gtid)
    return f"file={position['file']},pos={position['pos']}"


class TransactionMonitor:
    """Annotates binlog change events with their transaction and produces BEGIN/END records.

    Feed it the reader's items in order (:meth:`on_event`, :meth:`on_progress`); take the
    records with :meth:`take`. Not thread-safe.
    """

    def __init__(self) -> None:
        self._key: tuple[str, int] | None = None
        self._id = ""
        self._total = 0
        self._ts_ms = 0
        self._counts: dict[str, int] = {}
        self._records: list[TransactionRecord] = []

    @property
    def in_transaction(self) -> bool:
        """True between a transaction's first event and its end."""
        return self._key is not None

    def on_event(self, event: DataChangeEvent) -> DataChangeEvent:
        """The event with its ``transaction`` block (snapshot rows unchanged); records a BEGIN
        first when it opens a transaction, and the END of the previous one when it belongs to
        another transaction."""
        pos = event.position
        if event.op is Op.READ or pos.get("phase") == "snapshot" or "file" not in pos:
            return event
        key = (str(pos["file"]), int(pos["pos"]))
        if self._key is not None and key != self._key:
            self._end()
        if self._key is None:
            self._key, self._id = key, transaction_id(pos)
            self._total, self._counts = 0, {}
            self._records.append(TransactionRecord("BEGIN", self._id, event.ts_ms))
        table = str(event.table)
        self._total += 1
        n = self._counts[table] = self._counts.get(table, 0) + 1
        self._ts_ms = event.ts_ms
        return replace(event, transaction={"id": self._id, "total_order": self._total, "data_collection_order": n})

    def on_progress(self, file: str, pos: int) -> None:
        """The reader's resume position moved to ``file``/``pos`` outside a transaction: the open
        transaction (if it started elsewhere) has ended."""
        if self._key is not None and (file, pos) != self._key:
            self._end()

    def take(self) -> list[TransactionRecord]:
        """The BEGIN/END records since the last call, in order."""
        out, self._records = self._records, []
        return out

    def state(self) -> dict[str, Any] | None:
        """The open transaction for the stored position, None when none is open."""
        if self._key is None:
            return None
        return {"id": self._id, "file": self._key[0], "pos": self._key[1], "total": self._total,
                "ts_ms": self._ts_ms, "data_collections": [[t, n] for t, n in self._counts.items()]}

    def restore(self, state: Mapping[str, Any] | None, file: str, pos: int, row: int) -> None:
        """Continue the transaction a stored position was in (``row`` > 0: rows of the
        transaction at ``file``/``pos`` were already written, with its BEGIN).

        Raises:
            SourceError: the stored state is malformed.
        """
        if row <= 0:
            return
        if state is None or (str(state.get("file")), _int(state.get("pos"))) != (file, pos):
            # written without provide.transaction.metadata (or by an older version): the events
            # before the restart were not counted, and their BEGIN was not written
            log.warning("provide.transaction.metadata: the stored position %s:%s (+%d rows) holds no transaction "
                        "state; its END record counts only the events from here on", file, pos, row)
            return
        try:
            self._key = (file, pos)
            self._id = str(state["id"])
            self._total = int(state["total"])
            self._ts_ms = int(state.get("ts_ms", 0))
            self._counts = {str(t): int(n) for t, n in state["data_collections"]}
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceError(f"stored transaction state {dict(state)!r} is not valid: {exc}") from exc

    def _end(self) -> None:
        self._records.append(TransactionRecord("END", self._id, self._ts_ms, self._total, tuple(self._counts.items())))
        self._key = None
        self._counts = {}
        self._total = 0


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1
