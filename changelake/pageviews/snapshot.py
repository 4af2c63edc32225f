"""The aggregation's local state snapshot: the state plus the input offsets it covers, in one JSON
file replaced atomically. An optimisation of recovery only (the input topic is the source of truth):
a missing or unreadable snapshot means a full replay."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Mapping

from changelake.changelog.aggregate import GroupAggregate, InvalidAggregateError

__all__ = ["SNAPSHOT_FILE", "load_snapshot", "save_snapshot"]

SNAPSHOT_FILE = "pageviews_aggregation.snapshot.json"


def load_snapshot(state_dir: Path | None, agg: GroupAggregate) -> dict[tuple[str, int], int] | None:
    """Restore ``agg`` from the local snapshot; returns the offsets it covers, or None."""
    if state_dir is None:
        return None
    path = state_dir / SNAPSHOT_FILE
    if not path.exists():
        return None
    try:
        body = json.loads(path.read_text())
        offsets = {(t, int(p)): int(o) for t, p, o in body["offsets"]}
        agg.restore(body["state"].encode())
    except (ValueError, KeyError, TypeError, InvalidAggregateError):
        agg.store.clear()
        return None
    return offsets


def save_snapshot(state_dir: Path | None, agg: GroupAggregate, offsets: Mapping[tuple[str, int], int]) -> None:
    """Atomically replace the local snapshot (write a temp file, fsync, rename)."""
    if state_dir is None:
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    body = {"offsets": [[t, p, o] for (t, p), o in sorted(offsets.items())], "state": agg.snapshot().decode()}
    fd, tmp = tempfile.mkstemp(dir=state_dir, prefix=".snapshot-")
    with os.fdopen(fd, "w") as f:
        json.dump(body, f, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, state_dir / SNAPSHOT_FILE)
