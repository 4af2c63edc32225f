"""Factory of the MySQL CDC source: raw string options -> validated :class:`MySqlSourceOptions`.

Validation order and messages follow Flink CDC's ``FactoryHelper`` and ``MySqlDataSourceFactory``:
unknown keys, then required keys, then values/ranges, then cross-option rules.
"""

from __future__ import annotations

from datetime import timedelta

import zoneinfo
from typing import TYPE_CHECKING, Any, Mapping

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import validate_unsupported_options
from changelake.connectors.registry import ConnectorContext, ConnectorFactory, Endpoint
from changelake.connectors.mysql_cdc.options import (
    METADATA_COLUMNS,
    OPTION_KEYS,
    ChunkKeyColumn,
    REQUIRED_KEYS,
    MySqlSourceOptions,
    ServerIdRange,
    StartupMode,
    duration_option,
)
from changelake.connectors.mysql_cdc.selectors import TableSelectors

if TYPE_CHECKING:
    from changelake.connectors.mysql_cdc.source import MySqlSource

__all__ = ["IDENTIFIER", "FACTORY", "validate_options"]

IDENTIFIER = "mysql"
#: keys a pipeline definition may carry next to the options (Flink CDC consumes them itself).
_IGNORED_KEYS = {"type", "name"}


def validate_unsupported(raw: Mapping[str, Any]) -> None:
    """Reject keys the source does not know, listing them and the supported keys (Flink CDC wording,
    :func:`~changelake.connectors.options.validate_unsupported_options`)."""
    validate_unsupported_options(IDENTIFIER, raw, OPTION_KEYS, accepted=_IGNORED_KEYS)


def validate_required(raw: Mapping[str, Any]) -> None:
    """Reject a missing or empty required option (hostname, username, password, tables)."""
    # an empty password is allowed (a passwordless account); other required keys must be non-empty
    missing = [k for k in REQUIRED_KEYS if raw.get(k) is None or (k != "password" and not str(raw[k]).strip())]
    if missing:
        raise OptionValidationError(
            "One or more required options are missing.\n\nMissing required options are:\n\n" + "\n".join(missing),
            option=missing[0],
        )


def _int(raw: Mapping[str, Any], key: str, minimum: int, default: int | None = None) -> int | None:
    value = raw.get(key)
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise OptionValidationError(f"Could not parse value '{value}' for key '{key}': expected an integer", option=key) from None
    if number < minimum:
        raise OptionValidationError(f"The value of option '{key}' must larger than {minimum - 1}, but is {number}", option=key)
    return number


def _float(raw: Mapping[str, Any], key: str, default: float) -> float:
    """A float option (Flink's Double), > 0. Raises OptionValidationError naming the key and value."""
    value = raw.get(key)
    if value is None:
        return default
    try:
        out = float(str(value).strip())
    except ValueError:
        raise OptionValidationError(f"Could not parse value '{value}' for key '{key}'.", option=key) from None
    if not out > 0 or out != out or out == float("inf"):
        raise OptionValidationError(f"The value of option '{key}' must be a positive number, but is {value}", option=key)
    return out


def _bool(raw: Mapping[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise OptionValidationError(f"Could not parse value '{value}' for key '{key}': expected true or false", option=key)
    return text == "true"


def validate_startup(mode: StartupMode, file: str | None, pos: int | None, gtid_set: str | None = None,
                     timestamp_millis: int | None = None) -> None:
    """specific-offset needs ``.file`` and ``.pos``, or ``.gtid-set``; timestamp needs ``scan.startup.timestamp-millis``."""
    if mode is StartupMode.SPECIFIC_OFFSET and not gtid_set and (not file or pos is None):
        raise OptionValidationError(
            "'scan.startup.mode' = 'specific-offset' needs 'scan.startup.specific-offset.file' and "
            "'scan.startup.specific-offset.pos', or 'scan.startup.specific-offset.gtid-set'; "
            f"got file={file!r}, pos={pos!r}, gtid-set={gtid_set!r}",
            option="scan.startup.specific-offset.file",
        )
    if mode is StartupMode.TIMESTAMP and timestamp_millis is None:
        raise OptionValidationError(
            "'scan.startup.mode' = 'timestamp' needs 'scan.startup.timestamp-millis' (ms since the epoch)",
            option="scan.startup.timestamp-millis",
        )


def validate_metadata_list(text: str | None) -> tuple[str, ...]:
    """``metadata.list``: comma-separated names among op_ts, database_name, table_name, row_kind."""
    if text is None:
        return ()
    names = tuple(n.strip() for n in str(text).split(",") if n.strip())
    unknown = [n for n in names if n not in METADATA_COLUMNS]
    if unknown:
        raise OptionValidationError(
            f"Invalid value for option 'metadata.list': unknown metadata {unknown}; supported are "
            f"{', '.join(METADATA_COLUMNS)}",
            option="metadata.list",
        )
    return tuple(dict.fromkeys(names))


#: Debezium's signaling channels this source reads (Debezium also has jmx and file).
SIGNAL_CHANNELS = ("source", "kafka")


def _signal_channels(text: Any) -> tuple[str, ...]:
    """``signal.enabled.channels`` (Debezium's: comma-separated channel names; default ``source``)."""
    if text is None or not str(text).strip():
        return ("source",)
    names = tuple(dict.fromkeys(n.strip().lower() for n in str(text).split(",") if n.strip()))
    unknown = [n for n in names if n not in SIGNAL_CHANNELS]
    if unknown:
        raise OptionValidationError(
            f"Invalid value for option 'signal.enabled.channels': {unknown} (supported channels: "
            f"{', '.join(SIGNAL_CHANNELS)}; Debezium's jmx and file channels are not available here), but was: {text}",
            option="signal.enabled.channels")
    return names


def validate_options(raw: Mapping[str, Any]) -> MySqlSourceOptions:
    """Turn raw option strings into typed options.

    Args:
        raw: option key -> value (strings as in a pipeline YAML; ints accepted too).

    Returns:
        MySqlSourceOptions.

    Raises:
        OptionValidationError: unknown key ("Unsupported options found for 'mysql'"), missing
            required key, unparsable or out-of-range value, or an inconsistent startup mode. The
            message names the key and the value, never the password.
    """
    validate_unsupported(raw)
    validate_required(raw)
    mode_text = str(raw.get("scan.startup.mode", StartupMode.INITIAL.value)).strip().lower()
    try:
        mode = StartupMode(mode_text)
    except ValueError:
        raise OptionValidationError(
            f"Invalid value for option 'scan.startup.mode'. Supported values are "
            f"[{', '.join(m.value for m in StartupMode)}], but was: {raw.get('scan.startup.mode')}",
            option="scan.startup.mode",
        ) from None
    tz = raw.get("server-time-zone")
    if tz is not None:
        try:
            zoneinfo.ZoneInfo(str(tz))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise OptionValidationError(
                f"The value of option 'server-time-zone' is not a valid time zone id: '{tz}'", option="server-time-zone"
            ) from None
    exclude = raw.get("tables.exclude")
    opts = MySqlSourceOptions(
        hostname=str(raw["hostname"]),
        username=str(raw["username"]),
        password=str(raw["password"]),
        tables=TableSelectors.parse(str(raw["tables"]), "tables"),
        port=_int(raw, "port", 1, 3306) or 3306,
        tables_exclude=TableSelectors.parse(str(exclude), "tables.exclude") if exclude else None,
        server_id=ServerIdRange.parse(str(raw["server-id"])) if raw.get("server-id") is not None else ServerIdRange(5400, 6400),
        server_time_zone=str(tz) if tz is not None else None,
        scan_startup_mode=mode,
        specific_offset_file=str(raw["scan.startup.specific-offset.file"]) if raw.get("scan.startup.specific-offset.file") else None,
        specific_offset_pos=_int(raw, "scan.startup.specific-offset.pos", 4),
        specific_offset_gtid_set=str(raw["scan.startup.specific-offset.gtid-set"]).strip() if raw.get("scan.startup.specific-offset.gtid-set") else None,
        startup_timestamp_millis=_int(raw, "scan.startup.timestamp-millis", 0),
        newly_added_table_enabled=_bool(raw, "scan.newly-added-table.enabled", False),
        read_changelog_as_append_only=_bool(raw, "scan.read-changelog-as-append-only.enabled", False),
        heartbeat_action_query=str(raw["heartbeat.action.query"]).strip() or None if raw.get("heartbeat.action.query") else None,
        include_comments_enabled=_bool(raw, "include-comments.enabled", False),
        metadata_list=validate_metadata_list(raw.get("metadata.list")),
        treat_tinyint1_as_boolean=_bool(raw, "treat-tinyint1-as-boolean.enabled", True),
        chunk_key_columns=ChunkKeyColumn.parse_all(str(raw["scan.incremental.snapshot.chunk.key-column"])) if raw.get("scan.incremental.snapshot.chunk.key-column") else (),
        snapshot_fetch_size=_int(raw, "scan.snapshot.fetch.size", 2, 1024) or 1024,
        chunk_size=_int(raw, "scan.incremental.snapshot.chunk.size", 2, 8096) or 8096,
        incremental_snapshot_enabled=_bool(raw, "scan.incremental.snapshot.enabled", False),
        chunk_key_factor_upper_bound=_float(raw, "chunk-key.even-distribution.factor.upper-bound", 1000.0),
        chunk_key_factor_lower_bound=_float(raw, "chunk-key.even-distribution.factor.lower-bound", 0.05),
        heartbeat_interval=duration_option(str(raw["heartbeat.interval"]), "heartbeat.interval") if raw.get("heartbeat.interval") is not None else (timedelta(milliseconds=_int(raw, "heartbeat.interval.ms", 0) or 0) if _int(raw, "heartbeat.interval.ms", 0) else MySqlSourceOptions.__dataclass_fields__["heartbeat_interval"].default),  # type: ignore[arg-type]
        heartbeat_interval_ms=_int(raw, "heartbeat.interval.ms", 0) or 0,
        provide_transaction_metadata=_bool(raw, "provide.transaction.metadata", False),
        signal_data_collection=str(raw["signal.data.collection"]).strip() or None if raw.get("signal.data.collection") else None,
        signal_enabled_channels=_signal_channels(raw.get("signal.enabled.channels")),
        signal_kafka_topic=str(raw["signal.kafka.topic"]).strip() or None if raw.get("signal.kafka.topic") else None,
        signal_kafka_bootstrap_servers=str(raw["signal.kafka.bootstrap.servers"]).strip() or None if raw.get("signal.kafka.bootstrap.servers") else None,
        signal_kafka_group_id=str(raw.get("signal.kafka.groupId") or "kafka-signal"),
        signal_kafka_poll_timeout_ms=_int(raw, "signal.kafka.poll.timeout.ms", 0, 100) or 0,
        connect_timeout=duration_option(str(raw["connect.timeout"]), "connect.timeout") if raw.get("connect.timeout") is not None else MySqlSourceOptions.__dataclass_fields__["connect_timeout"].default,  # type: ignore[arg-type]
    )
    if opts.port > 65535:
        raise OptionValidationError(f"The value of option 'port' must be <= 65535, but is {opts.port}", option="port")
    if opts.heartbeat_interval.total_seconds() <= 0:
        raise OptionValidationError(f"The value of option 'heartbeat.interval' must be > 0, but is {raw.get('heartbeat.interval')}", option="heartbeat.interval")
    if opts.signal_data_collection is not None and len(opts.signal_data_collection.split(".")) != 2:
        raise OptionValidationError(
            f"The value of option 'signal.data.collection' must be 'database.table', but is '{opts.signal_data_collection}'",
            option="signal.data.collection")
    if "kafka" in opts.signal_enabled_channels and not opts.signal_kafka_bootstrap_servers:
        raise OptionValidationError(
            "The option 'signal.kafka.bootstrap.servers' is required when 'signal.enabled.channels' includes 'kafka'",
            option="signal.kafka.bootstrap.servers")
    if opts.chunk_key_factor_lower_bound > opts.chunk_key_factor_upper_bound:
        raise OptionValidationError(
            f"The value of option 'chunk-key.even-distribution.factor.lower-bound' ({opts.chunk_key_factor_lower_bound}) "
            f"must not be larger than 'chunk-key.even-distribution.factor.upper-bound' ({opts.chunk_key_factor_upper_bound})",
            option="chunk-key.even-distribution.factor.lower-bound",
        )
    validate_startup(mode, opts.specific_offset_file, opts.specific_offset_pos, opts.specific_offset_gtid_set,
                     opts.startup_timestamp_millis)
    if opts.specific_offset_gtid_set:
        from changelake.connectors.mysql_cdc.binlog.gtid import parse_gtid_set

        parse_gtid_set(opts.specific_offset_gtid_set)
    return opts


def _build_source(options: MySqlSourceOptions, context: ConnectorContext) -> "MySqlSource":
    from changelake.connectors.mysql_cdc.source import MySqlSource

    return MySqlSource(options, context.start_position, pipeline=context.pipeline)


#: The ``mysql`` source factory (registered in :mod:`changelake.connectors.registry`).
FACTORY = ConnectorFactory(
    IDENTIFIER,
    source=Endpoint(
        required=REQUIRED_KEYS,
        optional=tuple(sorted(k for k in OPTION_KEYS if k not in REQUIRED_KEYS)),
        validate=lambda raw, context: validate_options(raw),
        build=_build_source,
        connection="mysql",
    ),
    description="MySQL/MariaDB snapshot + binlog change capture (Flink CDC's MySQL pipeline source).",
)
