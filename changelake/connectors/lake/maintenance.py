"""What a lake sink's table maintenance takes and reports (compaction, snapshot expiry, orphan
files), independent of the table format, so that callers above the connectors (the
``changelake lake maintain`` command, the Dagster maintenance jobs) name no lake.

A lake sink that maintains its tables declares it in its factory
(:func:`~changelake.connectors.lake.factory.lake_sink_factory` ``maintenance=``, a ``module:function``
taking ``(typed sink options, MaintenanceOptions, *, tables)`` and returning one
:class:`MaintenanceResult` per table); :func:`changelake.connectors.registry.maintenance_of` finds it.
``iceberg`` does (:func:`changelake.connectors.iceberg.maintenance.maintain_lake`); ``paimon``
does not (its compaction is Paimon's own, e.g. Flink's ``compact`` action).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DAY_MS", "MaintenanceOptions", "MaintenanceResult"]

#: One day in milliseconds.
DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True)
class MaintenanceOptions:
    """What a table's maintenance does; ``None`` means "the table property, else the format's default".

    Attributes:
        max_snapshot_age_ms: snapshots older than this many ms expire
            (Iceberg: ``history.expire.max-snapshot-age-ms``, default 5 days).
        min_snapshots_to_keep: the newest N ancestors of the current snapshot never expire
            (Iceberg: ``history.expire.min-snapshots-to-keep``, default 1).
        orphan_older_than_ms: unreferenced files younger than this many ms are kept (default 3 days).
        target_file_size_bytes: compaction's target file size (Iceberg: ``write.target-file-size-bytes``).
        min_input_files: compaction runs only when at least this many small files exist (default 5,
            as Iceberg's ``min-input-files``).
        compact, expire, remove_orphans: switch each step on or off (all on by default).
    """

    max_snapshot_age_ms: int | None = None
    min_snapshots_to_keep: int | None = None
    orphan_older_than_ms: int = 3 * DAY_MS
    target_file_size_bytes: int | None = None
    min_input_files: int = 5
    compact: bool = True
    expire: bool = True
    remove_orphans: bool = True


@dataclass(frozen=True)
class MaintenanceResult:
    """What maintenance did to one table.

    Attributes:
        table: ``namespace.table``.
        files_compacted: small data files rewritten (0 when compaction did not run).
        files_written: data files written by compaction.
        snapshots_expired: snapshots removed from the table metadata.
        files_deleted: files deleted because only expired snapshots referenced them.
        orphan_files_deleted: unreferenced files deleted from the table's location.
        data_files: live data files after maintenance.
        snapshots: snapshots left in the table metadata.
    """

    table: str
    files_compacted: int = 0
    files_written: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    orphan_files_deleted: int = 0
    data_files: int = 0
    snapshots: int = 0
