"""Kafka offsets stored in Paimon snapshot properties (the exactly-once bookkeeping).

Every commit of the sink is one Paimon snapshot whose ``properties`` hold
:data:`~changelake.connectors.lake.offsets.OFFSETS_PROPERTY` (the next Kafka offset per
``"topic/partition"`` the table has absorbed, compact JSON) and whose ``commitIdentifier`` is
the table's previous snapshot id + 1 (increasing, as Paimon's stream commits require). A restart
walks the snapshots from the latest back to the first one carrying the property (snapshots of
other writers, e.g. a compaction job, carry none) and resumes there.
"""

from __future__ import annotations

from typing import Any

from changelake.connectors.lake.offsets import OFFSETS_PROPERTY, decode_offsets

__all__ = ["read_committed_offsets", "next_commit_identifier"]


def read_committed_offsets(table: Any) -> dict[str, int]:
    """Offsets stored by the latest snapshot of ``table`` (a pypaimon ``FileStoreTable``) that
    has them, walking back to the earliest snapshot; ``{}`` when none has."""
    manager = table.snapshot_manager()
    latest = manager.get_latest_snapshot()
    if latest is None:
        return {}
    for snapshot_id in range(latest.id, 0, -1):
        snapshot = latest if snapshot_id == latest.id else manager.get_snapshot_by_id(snapshot_id)
        if snapshot is None:  # expired: nothing older is left either
            break
        raw = (snapshot.properties or {}).get(OFFSETS_PROPERTY)
        if raw is not None:
            return decode_offsets(raw)
    return {}


def next_commit_identifier(table: Any) -> int:
    """The commit identifier of the next commit: the latest snapshot id + 1 (1 for a new table)."""
    latest = table.snapshot_manager().get_latest_snapshot()
    return 1 if latest is None else int(latest.id) + 1
