"""Options of the ``iceberg`` pipeline sink, spelled as Flink CDC's Iceberg pipeline connector.

A pipeline definition's sink block::

    sink:
      type: iceberg
      catalog.properties.type: sql                       # default
      catalog.properties.uri: sqlite:////abs/path/catalog.db
      catalog.properties.warehouse: file:///abs/path/warehouse
      table.properties.write.target-file-size-bytes: "134217728"
      namespace: "kafka_test:lake;other_db:lake2"        # optional, default: database -> namespace
      commit.max-rows: 100000
      commit.interval: 10s

``catalog.properties.*`` (prefix stripped) are handed to :func:`pyiceberg.catalog.load_catalog`;
``table.properties.*`` (prefix stripped) become the properties of tables the sink creates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from changelake.changelog.schema import TableId
from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import ConfigOption, key
from changelake.connectors.iceberg.partitioning import PartitionField, parse_partition_keys
from changelake.connectors.lake.options import (
    CATALOG_PROPERTIES_PREFIX,
    DEFAULT_COMMIT_INTERVAL_S,
    DEFAULT_COMMIT_MAX_ROWS,
    TABLE_PROPERTIES_PREFIX,
    check_type,
    common_options,
    describe_options,
    parse_commit_interval,
    parse_commit_max_rows,
    prefixed,
    refuse_unknown_keys,
    supported_keys,
)

__all__ = [
    "IDENTIFIER",
    "CATALOG_PROPERTIES_PREFIX",
    "TABLE_PROPERTIES_PREFIX",
    "SUPPORTED_KEYS",
    "DEFAULT_NAMESPACE",
    "NamespaceMapping",
    "IcebergSinkOptions",
    "parse_sink_options",
]

#: The sink's ``type`` (Flink CDC factory identifier).
IDENTIFIER = "iceberg"
#: Namespace used for a TableId without a database.
DEFAULT_NAMESPACE = "default"

# The single declaration of every non-prefix option (the lake sinks' common keys and this sink's own).
_OPTIONS: tuple[ConfigOption[Any], ...] = (
    *common_options(IDENTIFIER),
    key("catalog.name").string_type().default_value("changelake").with_description(
        "Name given to the pyiceberg catalog (default 'changelake')."),
    key("namespace").string_type().no_default_value().with_description(
        "Iceberg namespace per source database: either one namespace for every table ('lake') or "
        "'db1:ns1;db2:ns2' (unlisted databases keep their own name). Default: the TableId's "
        "database is the namespace, so the lake table is '<db>.<table>'."),
    key("partition.key").string_type().no_default_value().with_description(
        "Partition fields of tables the sink creates, as Flink CDC's Iceberg sink: "
        "'db.t1:col1,bucket[16](id);db.t2:day(created_at)' with Iceberg's transforms bucket[N], truncate[W], "
        "year, month, day, hour (a bare column: identity); 'db.t:' creates it unpartitioned."),
    key("bucket-by-key").bool_type().default_value(True).with_description(
        "Tables without a 'partition.key' entry are bucketed by their first primary-key column "
        "(bucket[N], N from the table's first commit and its topic partitions); false: unpartitioned."),
)
SUPPORTED_KEYS: tuple[str, ...] = supported_keys(_OPTIONS)
_OPTION_BY_KEY = {option.key: option for option in _OPTIONS}


@dataclass(frozen=True)
class NamespaceMapping:
    """Maps a source TableId to an Iceberg identifier ``(namespace, table)``.

    Attributes:
        fixed: every table goes to this namespace when set.
        by_database: source database -> namespace (used when ``fixed`` is None).
    """

    fixed: str | None = None
    by_database: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> "NamespaceMapping":
        """Parse the ``namespace`` option: ``ns`` or ``db1:ns1;db2:ns2``.

        Raises:
            OptionValidationError: an entry is not ``db:namespace`` or is empty.
        """
        if text is None or not str(text).strip():
            return cls()
        text = str(text).strip()
        if ":" not in text:
            return cls(fixed=text)
        mapping: dict[str, str] = {}
        for entry in text.split(";"):
            if not entry.strip():
                continue
            db, sep, ns = entry.partition(":")
            if not sep or not db.strip() or not ns.strip():
                raise OptionValidationError(
                    f"'namespace' entries must look like 'database:namespace'; got {entry!r} in {text!r}",
                    option="namespace",
                )
            mapping[db.strip()] = ns.strip()
        return cls(by_database=MappingProxyType(mapping))

    def identifier(self, table_id: TableId) -> tuple[str, str]:
        """The Iceberg ``(namespace, table)`` of ``table_id``."""
        if self.fixed is not None:
            return (self.fixed, table_id.table)
        db = table_id.database or DEFAULT_NAMESPACE
        return (self.by_database.get(db, db), table_id.table)


@dataclass(frozen=True)
class IcebergSinkOptions:
    """Typed options of the Iceberg sink. Build with :func:`parse_sink_options` (validates).

    Attributes:
        catalog_properties: pyiceberg catalog properties (``type`` defaults to ``sql``), e.g.
            ``{"type": "sql", "uri": "sqlite:////tmp/c.db", "warehouse": "file:///tmp/wh"}``.
        table_properties: properties of tables the sink creates.
        namespace: source database -> Iceberg namespace mapping.
        commit_max_rows: rows (changelog rows, before compaction) per buffered commit.
        commit_interval_s: seconds Pipeline 2 buffers polls before committing (``commit.interval``).
        catalog_name: the pyiceberg catalog name.
        name: display name.
        partition_keys: ``TableId`` -> partition fields of a new table (``partition.key``).
        bucket_by_key: bucket new tables without a ``partition.key`` entry by key (``bucket-by-key``).
    """

    catalog_properties: Mapping[str, str]
    table_properties: Mapping[str, str] = field(default_factory=dict)
    namespace: NamespaceMapping = field(default_factory=NamespaceMapping)
    commit_max_rows: int = DEFAULT_COMMIT_MAX_ROWS
    commit_interval_s: float = DEFAULT_COMMIT_INTERVAL_S
    catalog_name: str = "changelake"
    name: str | None = None
    partition_keys: Mapping[TableId, tuple[PartitionField, ...]] = field(default_factory=dict)
    bucket_by_key: bool = True

    @staticmethod
    def sql(uri: str, warehouse: str, **extra: Any) -> "IcebergSinkOptions":
        """Shortcut for a SqlCatalog, e.g. ``IcebergSinkOptions.sql("sqlite:////t/c.db", "file:///t/wh")``.

        ``extra`` are further raw options (e.g. ``**{"commit.max-rows": 10}``).
        """
        raw = {
            "type": IDENTIFIER,
            CATALOG_PROPERTIES_PREFIX + "uri": uri,
            CATALOG_PROPERTIES_PREFIX + "warehouse": warehouse,
            **extra,
        }
        return parse_sink_options(raw)

    def describe(self) -> dict[str, str]:
        """The options as a flat dict safe to log: values of secret-looking keys are masked."""
        return describe_options(self.catalog_properties, self.commit_max_rows, self.commit_interval_s)


def _validate_catalog(props: Mapping[str, str]) -> None:
    if props.get("type", "sql") == "sql":
        for key in ("uri", "warehouse"):
            if not props.get(key):
                raise OptionValidationError(
                    f"'{CATALOG_PROPERTIES_PREFIX}{key}' is required when "
                    f"'{CATALOG_PROPERTIES_PREFIX}type' is 'sql'",
                    option=CATALOG_PROPERTIES_PREFIX + key,
                )


def parse_sink_options(raw: Mapping[str, Any]) -> IcebergSinkOptions:
    """Validate raw (YAML) sink options and build :class:`IcebergSinkOptions`.

    Validation order as Flink's FactoryHelper: unknown keys, then the sink type, then required
    catalog keys, then ranges.

    Raises:
        OptionValidationError: unknown key (the message lists the supported keys), wrong ``type``,
            missing ``catalog.properties.uri``/``warehouse`` for a SQL catalog, bad ``namespace``,
            ``commit.max-rows`` not a positive integer, ``commit.interval`` not a positive duration,
            a malformed ``partition.key`` or ``bucket-by-key`` not true/false.
    """
    refuse_unknown_keys(IDENTIFIER, raw, _OPTIONS)
    check_type(IDENTIFIER, raw)
    catalog = prefixed(raw, CATALOG_PROPERTIES_PREFIX)
    catalog.setdefault("type", "sql")
    _validate_catalog(catalog)
    table = prefixed(raw, TABLE_PROPERTIES_PREFIX)
    return IcebergSinkOptions(
        catalog_properties=MappingProxyType(catalog),
        table_properties=MappingProxyType(table),
        namespace=NamespaceMapping.parse(raw.get("namespace")),
        commit_max_rows=parse_commit_max_rows(raw),
        commit_interval_s=parse_commit_interval(raw),
        catalog_name=str(raw.get("catalog.name", "changelake")),
        name=str(raw["name"]) if raw.get("name") is not None else None,
        partition_keys=parse_partition_keys(raw.get("partition.key")),
        bucket_by_key=bool(_OPTION_BY_KEY["bucket-by-key"].value(raw)),
    )

