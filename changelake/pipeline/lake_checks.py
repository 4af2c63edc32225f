"""The lake's own checks beside the key-state comparison: unique primary keys and freshness.

Engine code (no Dagster): the asset checks and ``changelake check`` call these.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from changelake.changelog import TableId
from changelake.pipeline.definition import PipelineDefinition

__all__ = ["check_unique_keys", "Freshness", "check_freshness", "upstream_gap", "topics_of_table"]


def check_unique_keys(defn: PipelineDefinition, table: TableId, sample_size: int = 10) -> Any:
    """:class:`~changelake.checks.duplicates.DuplicateKeys` of lake table ``table`` of ``defn``'s
    sink, on the primary key the lake table declares (Iceberg: its identifier fields; Paimon: its
    primary keys), else the pipeline's ``transform`` primary keys.

    Raises:
        IcebergSinkError / PaimonSinkError: the table does not exist.
        CheckError: no primary key is known for the table.
    """
    from changelake.checks.duplicates import find_duplicate_keys
    from changelake.checks.errors import CheckError
    from changelake.pipeline.verify import lake_primary_key, read_lake_table

    key = lake_primary_key(defn, table)
    rows = read_lake_table(defn, table)
    if not key:
        raise CheckError(f"lake table {table} has no known primary key (identifier fields / transform primary-keys)")
    return find_duplicate_keys(rows, key, sample_size)


def topics_of_table(defn: PipelineDefinition, table: TableId) -> list[str]:
    """The source topics of a lake table: topics are named ``db.table`` (as Pipeline 1 writes them),
    listed in ``topic`` or matched by ``topic-pattern`` (the whole name, as the Kafka source)."""
    pattern = defn.source.get("topic-pattern")
    if pattern:
        return [str(table)] if re.fullmatch(str(pattern), str(table)) else []
    topics = [t.strip() for t in defn.source.get("topic", "").split(";") if t.strip()]
    return [t for t in topics if t == str(table)]


@dataclass(frozen=True)
class Freshness:
    """Whether a lake table keeps up with its topic(s).

    Attributes:
        lag: offsets on the table's topic partitions past the pipeline's lake checkpoint.
        last_commit_age_s: seconds since the table's current snapshot (None: never written).
        max_age_s: how long a lag may stand unabsorbed.
    """

    lag: int
    last_commit_age_s: float | None
    max_age_s: float
    #: the upstream MySQL -> Kafka capture against its server (None: no upstream pipeline known)
    source: Any = None
    #: why the upstream position could not be compared (``ErrorClass: message``), or None
    source_error: str | None = None

    @property
    def behind_mysql(self) -> bool:
        """MySQL's binlog is past the position the upstream Pipeline 1 last committed."""
        return bool(self.source is not None and self.source.behind)

    @property
    def passed(self) -> bool:
        """Caught up with Kafka and with MySQL, or the last commit is recent enough that the lag
        is being worked off."""
        if self.lag <= 0 and not self.behind_mysql:
            return True
        return self.last_commit_age_s is not None and self.last_commit_age_s <= self.max_age_s

    def metadata(self) -> dict[str, Any]:
        age = self.last_commit_age_s
        md: dict[str, Any] = {
            "lag": self.lag,
            "last_commit_age_s": round(age, 1) if age is not None else "never",
            "max_age_s": self.max_age_s,
        }
        if self.source is not None:
            md.update(mysql_position=self.source.server, captured_position=self.source.captured,
                      behind_mysql=self.source.behind)
        elif self.source_error is not None:
            md["mysql_position"] = f"not compared ({self.source_error})"
        return md


def upstream_gap(upstream: PipelineDefinition, mysql: Any) -> Any:
    """:class:`~changelake.checks.source_position.SourceGap` of MySQL -> Kafka pipeline
    ``upstream`` (bound: its sink's connection options filled): its stored position (read through
    its sink, before open) against ``SHOW MASTER STATUS`` on the server of PyMySQL params ``mysql``."""
    from changelake.checks.source_position import master_position, source_gap
    from changelake.connectors.registry import ConnectorContext, find_factory

    sink = find_factory(upstream.sink_type).create_sink(upstream.options("sink"), ConnectorContext(upstream.name))
    try:
        stored = sink.stored_position()
    finally:
        sink.close()
    return source_gap(stored, master_position(mysql))


def check_freshness(defn: PipelineDefinition, table: TableId, max_age_s: float = 300.0,
                    upstream: PipelineDefinition | None = None, mysql: Any = None) -> Freshness:
    """Lag of lake table ``table`` behind Kafka, the age of its last commit (Iceberg or Paimon),
    and, given the MySQL -> Kafka pipeline ``upstream`` that writes its topic (bound) and PyMySQL
    params ``mysql``, whether MySQL's binlog is past what that pipeline captured."""
    from changelake.pipeline.progress import lag_by_topic
    from changelake.pipeline.lake_checkpoint import kafka_lag, open_lake_sink

    topics = set(topics_of_table(defn, table))
    lag = sum(n for topic, n in lag_by_topic(kafka_lag(defn)).items() if topic in topics)
    sink = open_lake_sink(defn)
    try:
        committed_ms = sink.last_commit_ms(table)
    finally:
        sink.close()
    age = max(0.0, time.time() - committed_ms / 1000.0) if committed_ms is not None else None
    gap, error = None, None
    if upstream is not None and mysql is not None:
        try:
            gap = upstream_gap(upstream, mysql)
        except Exception as exc:  # noqa: BLE001 - MySQL or the offsets topic unreachable: say so, keep the Kafka lag
            error = f"{type(exc).__name__}: {exc}"
    return Freshness(lag=lag, last_commit_age_s=age, max_age_s=max_age_s, source=gap, source_error=error)
