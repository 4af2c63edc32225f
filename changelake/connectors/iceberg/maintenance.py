"""Iceberg table maintenance: compact small files, expire snapshots, remove orphan files.

As Iceberg's own maintenance actions (``RewriteDataFiles``, ``ExpireSnapshots``,
``DeleteOrphanFiles``), configured by Iceberg's table properties where Iceberg has one:

- ``history.expire.max-snapshot-age-ms`` (default 5 days) and
  ``history.expire.min-snapshots-to-keep`` (default 1) decide which snapshots expire;
- ``write.target-file-size-bytes`` (default 512 MiB) is the size compaction aims for; a data file
  below 75 % of it is "small" (Iceberg's ``min-file-size-bytes`` default);
- orphan files (in the table's location, referenced by no metadata) are removed only when older
  than a safety window (default 3 days, as ``DeleteOrphanFiles``), so an in-flight write is never
  touched.

The exactly-once bookkeeping survives every step: compaction commits a snapshot without
``changelake.kafka-offsets`` (so offsets are still read from the sink's last commit, see
:func:`~changelake.connectors.iceberg.offsets.read_committed_offsets`), and expiry always keeps
the current snapshot's ancestors down to the newest one carrying offsets. The pipeline-level
checkpoint is a namespace property and does not depend on snapshots at all.

pyiceberg 0.12 expires snapshots in metadata only and has no rewrite action, so deleting the
files of expired snapshots, orphan removal and compaction are done here on pyiceberg's public
scan/commit API (plus its data-file writer, ``_dataframe_to_data_files``, which ``append`` uses).
"""

from __future__ import annotations

import time
import uuid
import warnings
from typing import Any, Iterable
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, ValidationException
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from changelake.connectors.iceberg.catalog import PIPELINE_NAMESPACE, open_catalog
from changelake.connectors.iceberg.errors import IcebergSinkError
from changelake.connectors.iceberg.offsets import COMMIT_ID_PROPERTY, OFFSETS_PROPERTY
from changelake.connectors.iceberg.options import IcebergSinkOptions
from changelake.connectors.lake.maintenance import DAY_MS as _DAY_MS, MaintenanceOptions, MaintenanceResult

__all__ = [
    "MaintenanceOptions",
    "MaintenanceResult",
    "MaintenanceError",
    "maintain_table",
    "maintain_catalog",
    "maintain_lake",
    "compact_data_files",
    "expire_snapshots",
    "remove_orphan_files",
    "OPERATION_PROPERTY",
]

#: Snapshot-summary key naming the maintenance operation that wrote the snapshot.
OPERATION_PROPERTY = "changelake.operation"
_SMALL_FILE_RATIO = 0.75


class MaintenanceError(IcebergSinkError):
    """A maintenance step failed (names the table). The table is unchanged by the failed step."""


def maintain_table(table: Table, options: MaintenanceOptions = MaintenanceOptions(), *, now_ms: int | None = None) -> MaintenanceResult:
    """Compact small files, expire old snapshots, then remove orphan files, in that order.

    Args:
        table: a loaded pyiceberg table (refreshed between steps).
        options: see :class:`MaintenanceOptions`.
        now_ms: "now" in ms since the epoch (default: the clock), for expiry and the orphan window.

    Returns:
        A :class:`MaintenanceResult`.

    Raises:
        MaintenanceError: a commit failed (e.g. lost a race with a pipeline commit that rewrote
            the same files); nothing of that step was committed, so running it again is safe.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    name = _name(table)
    compacted = written = expired = deleted = orphans = 0
    if options.compact:
        compacted, written = compact_data_files(
            table, target_file_size_bytes=options.target_file_size_bytes, min_input_files=options.min_input_files
        )
    if options.expire:
        expired, deleted = expire_snapshots(
            table,
            max_snapshot_age_ms=options.max_snapshot_age_ms,
            min_snapshots_to_keep=options.min_snapshots_to_keep,
            now_ms=now,
        )
    if options.remove_orphans:
        orphans = remove_orphan_files(table, older_than_ms=options.orphan_older_than_ms, now_ms=now)
    table.refresh()
    return MaintenanceResult(
        table=name,
        files_compacted=compacted,
        files_written=written,
        snapshots_expired=expired,
        files_deleted=deleted,
        orphan_files_deleted=orphans,
        data_files=sum(1 for _ in table.scan().plan_files()) if table.current_snapshot() else 0,
        snapshots=len(table.metadata.snapshots),
    )


def maintain_catalog(
    catalog: Catalog,
    options: MaintenanceOptions = MaintenanceOptions(),
    *,
    tables: Iterable[tuple[str, str]] | None = None,
    skip_namespaces: Iterable[str] = (),
    now_ms: int | None = None,
) -> list[MaintenanceResult]:
    """:func:`maintain_table` for each table of ``catalog`` (or the ``(namespace, table)`` given).

    Args:
        catalog: an open pyiceberg catalog.
        options: see :class:`MaintenanceOptions`.
        tables: the identifiers to maintain; None means every table of every namespace.
        skip_namespaces: namespaces left alone when listing (e.g. the pipeline's checkpoint namespace).
        now_ms: "now" in ms since the epoch (default: the clock).

    Returns:
        One :class:`MaintenanceResult` per table, in identifier order.

    Raises:
        MaintenanceError: a table's step failed (earlier tables stay maintained).
    """
    if tables is None:
        skip = set(skip_namespaces)
        found: list[tuple[str, str]] = []
        for namespace in catalog.list_namespaces():
            if ".".join(namespace) in skip:
                continue
            found.extend((".".join(ident[:-1]), ident[-1]) for ident in catalog.list_tables(namespace))
        tables = found
    return [maintain_table(catalog.load_table(ident), options, now_ms=now_ms) for ident in sorted(tables)]


def maintain_lake(
    options: IcebergSinkOptions,
    maintenance: MaintenanceOptions = MaintenanceOptions(),
    *,
    tables: Iterable[tuple[str, str]] | None = None,
) -> list[MaintenanceResult]:
    """The ``iceberg`` sink's maintenance (the registry's ``maintenance`` of its factory): open the
    catalog of ``options`` and :func:`maintain_catalog` its tables, leaving the pipeline checkpoint
    namespace (:data:`~changelake.connectors.iceberg.catalog.PIPELINE_NAMESPACE`) alone.

    Raises:
        OptionValidationError: the catalog URI is invalid.
        IcebergSinkError: the catalog cannot be loaded.
        MaintenanceError: a table's step failed.
    """
    return maintain_catalog(open_catalog(options), maintenance, tables=tables, skip_namespaces=[PIPELINE_NAMESPACE])


# -- compaction --------------------------------------------------------------------------------
def compact_data_files(
    table: Table, *, target_file_size_bytes: int | None = None, min_input_files: int = 5
) -> tuple[int, int]:
    """Rewrite the table's small data files into files of the target size, in one commit.

    On a partitioned (or bucketed) table a partition's small files become that partition's files
    (as Iceberg's ``RewriteDataFiles`` groups by partition); partitions with a single small file
    are left alone. A data file is small below 75 % of ``target_file_size_bytes`` (default: the table's
    ``write.target-file-size-bytes``). Runs only with at least ``min_input_files`` small files and
    no delete files (this project's sink writes none; another writer's merge-on-read deletes are
    left alone). The commit's snapshot carries ``changelake.operation: rewrite-data-files`` and no
    offsets, so the sink's stored offsets are unchanged.

    Returns:
        ``(files rewritten, files written)``; ``(0, 0)`` when nothing was worth compacting.

    Raises:
        MaintenanceError: the commit conflicted with a concurrent one (e.g. the pipeline rewrote
            one of the files meanwhile); nothing was committed.
    """
    table.refresh()
    if table.current_snapshot() is None:
        return 0, 0
    target = target_file_size_bytes or int(
        table.properties.get(TableProperties.WRITE_TARGET_FILE_SIZE_BYTES, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT)
    )
    tasks = list(table.scan().plan_files())
    if any(task.delete_files for task in tasks):
        return 0, 0
    # Per partition (a bucketed or partitioned table): a partition's small files are merged into
    # that partition's own files, so one alone gains nothing and is left as it is.
    by_partition: dict[tuple[int, str], list[Any]] = {}
    for task in tasks:
        if task.file.file_size_in_bytes < target * _SMALL_FILE_RATIO:
            by_partition.setdefault((task.file.spec_id, repr(task.file.partition)), []).append(task)
    small = [t for group in by_partition.values() if len(group) >= 2 for t in group]
    if len(small) < max(min_input_files, 2):
        return 0, 0
    rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(small)
    key = sorted(table.schema().identifier_field_names())
    if key and rows.num_rows > 1:  # keep files sorted by key, as the sink writes them
        rows = rows.sort_by([(k, "ascending") for k in key])
    props = {OPERATION_PROPERTY: "rewrite-data-files", COMMIT_ID_PROPERTY: str(uuid.uuid4())}
    written = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with table.transaction() as tx:
                with tx.update_snapshot(snapshot_properties=props).overwrite() as overwrite:
                    for task in small:
                        overwrite.delete_data_file(task.file)
                    for data_file in _dataframe_to_data_files(tx.table_metadata, _with_table_schema(rows, table), table.io):
                        overwrite.append_data_file(data_file)
                        written += 1
    except (CommitFailedException, CommitStateUnknownException, ValidationException) as exc:
        raise MaintenanceError(
            f"compacting Iceberg table {_name(table)!r} failed: {type(exc).__name__}: {exc}", table=_name(table)
        ) from exc
    table.refresh()
    return len(small), written


def _with_table_schema(rows: pa.Table, table: Table) -> pa.Table:
    return rows.cast(table.schema().as_arrow()) if rows.schema != table.schema().as_arrow() else rows


# -- expiry ------------------------------------------------------------------------------------
def expire_snapshots(
    table: Table,
    *,
    max_snapshot_age_ms: int | None = None,
    min_snapshots_to_keep: int | None = None,
    now_ms: int | None = None,
) -> tuple[int, int]:
    """Expire old snapshots and delete the files only they referenced (Iceberg's ``ExpireSnapshots``).

    A snapshot is kept when it is newer than ``max_snapshot_age_ms``, among the newest
    ``min_snapshots_to_keep`` ancestors of the current snapshot, a branch or tag head, or on the
    current snapshot's ancestor chain down to the newest snapshot carrying Kafka offsets (the
    sink's resume point must stay readable).

    Returns:
        ``(snapshots expired, files deleted)``.

    Raises:
        MaintenanceError: the metadata commit failed; nothing was expired or deleted.
    """
    table.refresh()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    max_age = max_snapshot_age_ms if max_snapshot_age_ms is not None else int(
        table.properties.get(TableProperties.MAX_SNAPSHOT_AGE_MS, TableProperties.MAX_SNAPSHOT_AGE_MS_DEFAULT)
    )
    keep_last = min_snapshots_to_keep if min_snapshots_to_keep is not None else int(
        table.properties.get(TableProperties.MIN_SNAPSHOTS_TO_KEEP, TableProperties.MIN_SNAPSHOTS_TO_KEEP_DEFAULT)
    )
    keep = _protected_snapshot_ids(table, keep_last)
    expire = [
        s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id not in keep and s.timestamp_ms < now - max_age
    ]
    if not expire:
        return 0, 0
    before = _referenced_files(table, table.metadata.snapshots)
    try:
        table.maintenance.expire_snapshots().by_ids(expire).commit()
    except (CommitFailedException, CommitStateUnknownException, ValidationException, ValueError) as exc:
        raise MaintenanceError(
            f"expiring snapshots of Iceberg table {_name(table)!r} failed: {type(exc).__name__}: {exc}", table=_name(table)
        ) from exc
    table.refresh()
    after = _referenced_files(table, table.metadata.snapshots)
    unreferenced = before - after
    for path in sorted(unreferenced):
        table.io.delete(path)
    return len(expire), len(unreferenced)


def _protected_snapshot_ids(table: Table, keep_last: int) -> set[int]:
    keep = {ref.snapshot_id for ref in table.metadata.refs.values()}
    chain: list[Snapshot] = list(ancestors_of(table.current_snapshot(), table.metadata))
    keep.update(s.snapshot_id for s in chain[: max(keep_last, 1)])
    for snapshot in chain:  # down to and including the newest snapshot carrying offsets
        keep.add(snapshot.snapshot_id)
        if snapshot.summary is not None and snapshot.summary.get(OFFSETS_PROPERTY) is not None:
            break
    return keep


def _referenced_files(table: Table, snapshots: Iterable[Snapshot]) -> set[str]:
    """Data/delete files, manifests and manifest lists that ``snapshots`` reference."""
    files: set[str] = set()
    seen_manifests: set[str] = set()
    for snapshot in snapshots:
        files.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            files.add(manifest.manifest_path)
            if manifest.manifest_path in seen_manifests:
                continue
            seen_manifests.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                files.add(entry.data_file.file_path)
    return files


# -- orphan files ------------------------------------------------------------------------------
def remove_orphan_files(table: Table, *, older_than_ms: int = 3 * _DAY_MS, now_ms: int | None = None) -> int:
    """Delete files under the table's location that no metadata references (Iceberg's ``DeleteOrphanFiles``).

    Referenced: every file of every remaining snapshot (see :func:`expire_snapshots`), the
    current metadata file, the metadata log, and statistics files. Files modified less than
    ``older_than_ms`` ago are kept, so a write in flight is never removed.

    Returns:
        The number of files deleted.
    """
    table.refresh()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    referenced = {_path(p) for p in _referenced_files(table, table.metadata.snapshots)}
    referenced.add(_path(table.metadata_location))
    referenced.update(_path(entry.metadata_file) for entry in table.metadata.metadata_log)
    referenced.update(_path(stats.statistics_path) for stats in table.metadata.statistics)
    filesystem, root = pafs.FileSystem.from_uri(table.location())
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    except OSError as exc:
        raise MaintenanceError(f"cannot list the location of Iceberg table {_name(table)!r}: {exc}", table=_name(table)) from exc
    deleted = 0
    for info in infos:
        if info.type != pafs.FileType.File or _path(info.path) in referenced:
            continue
        mtime_ms = int(info.mtime.timestamp() * 1000) if info.mtime is not None else now
        if mtime_ms > now - older_than_ms:
            continue
        filesystem.delete_file(info.path)
        deleted += 1
    return deleted


def _path(location: str) -> str:
    """A location as a bare path (``file:///a/b`` -> ``/a/b``; ``s3://b/k`` -> ``b/k``)."""
    parsed = urlparse(location)
    if not parsed.scheme or len(parsed.scheme) == 1:  # a plain path (or a Windows drive letter)
        return location
    return f"{parsed.netloc}{parsed.path}" if parsed.scheme != "file" else parsed.path


def _name(table: Table) -> str:
    return ".".join(table.name())
