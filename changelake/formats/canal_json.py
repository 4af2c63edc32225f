"""The ``canal-json`` format: Canal's FlatMessage with Flink's JSON values (Flink's ``canal-json``).

Written as the seed shows (Flink CDC's Kafka pipeline sink layout plus ``ts``/``es``)::

    {"old":[{...}]|null,"data":[{...}],"type":"INSERT|UPDATE|DELETE","database":"kafka_test",
     "table":"customers","pkNames":["id"],"ts":1728528674000,"es":1728528674000}

* INSERT (also snapshot rows, since Canal has no snapshot type): ``old`` null, ``data`` [after].
* UPDATE: ``old`` [the **full** before row] (Flink CDC, FLINK-36877), ``data`` [after].
* DELETE: ``old`` null, ``data`` [the deleted row].
* TRUNCATE: ``old``/``data``/``pkNames`` null plus ``"isDdl":true``.
* ``ts`` and ``es`` are both the event's commit time in ms (0 for snapshot rows), so the output is
  deterministic; ``pkNames`` is the schema's primary key (null without a schema).

Decoding follows Flink's ``CanalJsonDeserializationSchema``: a message may hold several rows;
for UPDATE, a column absent from ``old[i]`` is copied from ``data[i]`` (real Canal writes only
changed columns), a column present with null is a NULL before value; ``CREATE`` messages are
skipped; ``TRUNCATE`` becomes a truncate event (Flink would fail; changelake's lake sink needs it);
other DDL types (``ALTER``, ``ERASE``, ``QUERY``, ...) fail unless ``ignore-parse-errors``.
Types: without a format schema, a message's ``mysqlType`` map (real Canal writes it) gives the row
its exact types (:mod:`changelake.formats.mysql_type_text`), with ``pkNames`` as the primary key;
string values such as ``"12.34"`` are parsed to those types. Binary values are read as base64 (as
Flink's JSON writes them), not as Canal's ISO-8859-1 text.
``database.include`` / ``table.include`` are regular expressions that must match the whole name;
other messages are skipped. Commit time: ``es`` when > 0, else ``ts``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import Schema, TableId
from changelake.formats.base import ChangelogFormat
from changelake.formats.errors import FormatOptionError
from changelake.formats.json import JsonCodecOptions, decode_object, encode_image
from changelake.formats.json_values import dumps_envelope
from changelake.formats.mysql_type_text import schema_of_mysql_types
from changelake.options import key, option_field

__all__ = ["CanalJsonFormat", "CanalJsonOptions"]


@dataclass(frozen=True)
class CanalJsonOptions(JsonCodecOptions):
    """Options of the ``canal-json`` format (Flink's ``CanalJsonFormatOptions``)."""

    database_include: str | None = option_field(
        key("database.include").string_type().no_default_value()
        .with_description("Regular expression; only messages whose 'database' fully matches are read.")
    )
    table_include: str | None = option_field(
        key("table.include").string_type().no_default_value()
        .with_description("Regular expression; only messages whose 'table' fully matches are read.")
    )


class CanalJsonFormat(ChangelogFormat):
    """Flink's ``canal-json`` format (retract changelog). See the module docstring."""

    name = "canal-json"
    Options = CanalJsonOptions
    options: CanalJsonOptions

    def _validate(self) -> None:
        self._db_re = self._compile("database.include", self.options.database_include)
        self._table_re = self._compile("table.include", self.options.table_include)

    def _compile(self, key: str, pattern: str | None) -> re.Pattern[str] | None:
        if pattern is None:
            return None
        try:
            return re.compile(pattern)
        except re.error as exc:
            raise FormatOptionError(
                f"Option '{key}' is not a valid regular expression: {pattern!r} ({exc})", format=self.name, option=key
            ) from None

    # -- encoding ------------------------------------------------------------------------------------
    def _image(self, values: Mapping[str, Any], schema: Schema | None) -> dict[str, Any]:
        return encode_image(values, schema, self.options, format=self.name)

    def _message(
        self,
        old: list[Any] | None,
        data: list[Any] | None,
        type_: str,
        table: TableId | None,
        schema: Schema | None,
        ts_ms: int,
    ) -> bytes:
        msg: dict[str, Any] = {
            "old": old,
            "data": data,
            "type": type_,
            "database": table.database if table is not None else None,
            "table": table.table if table is not None else None,
            "pkNames": list(schema.primary_key) if schema is not None and data is not None else None,
            "ts": ts_ms,
            "es": ts_ms,
        }
        if type_ == "TRUNCATE":
            msg["isDdl"] = True
        return dumps_envelope(msg, [*(old or ()), *(data or ())])

    def encode_event(self, event: DataChangeEvent) -> bytes:
        """One message per event (see the module docstring). Raises EncodeError naming the column."""
        schema = event.schema if event.schema is not None else self.schema
        if event.op is Op.TRUNCATE:
            return self._message(None, None, "TRUNCATE", event.table, schema, event.ts_ms)
        if event.op is Op.UPDATE:
            old = [self._image(event.before or {}, schema)]
            return self._message(old, [self._image(event.after or {}, schema)], "UPDATE", event.table, schema, event.ts_ms)
        if event.op is Op.DELETE:
            return self._message(None, [self._image(event.before or {}, schema)], "DELETE", event.table, schema, event.ts_ms)
        return self._message(None, [self._image(event.after or {}, schema)], "INSERT", event.table, schema, event.ts_ms)

    def encode(self, row: ChangelogRow) -> bytes:
        """As Flink's serializer: +I/+U -> INSERT, -U/-D -> DELETE (``data`` [row])."""
        ts_ms = int(row.metadata.get("ts_ms", 0) or 0)
        type_ = "INSERT" if row.kind.is_accumulate else "DELETE"
        return self._message(None, [self._image(row.values, self.schema)], type_, row.table, self.schema, ts_ms)

    # -- decoding ------------------------------------------------------------------------------------
    def _decode_events(self, data: bytes) -> list[DataChangeEvent]:
        """The events of one message, one per row of ``data`` ([] for null/empty, CREATE, filtered).

        Raises:
            DecodeError: malformed JSON, an unknown ``type``, missing ``data``, a bad value (field
                ``data[0].price``); none with ``ignore-parse-errors`` (the message yields []).
        """
        doc = self._load_json_object(data)
        database, table_name = doc.get("database"), doc.get("table")
        if self._db_re is not None and not (isinstance(database, str) and self._db_re.fullmatch(database)):
            return []
        if self._table_re is not None and not (isinstance(table_name, str) and self._table_re.fullmatch(table_name)):
            return []
        table = TableId(database, table_name or "")
        ts = doc.get("es") or doc.get("ts") or 0
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise self._corrupt(f"expected an integer 'es'/'ts', got {ts!r}", data, "es")
        type_ = doc.get("type")
        schema = self.schema
        mysql_types = doc.get("mysqlType")
        if schema is None and isinstance(mysql_types, dict) and mysql_types:
            pk_names = doc.get("pkNames")
            schema = schema_of_mysql_types(mysql_types, pk_names if isinstance(pk_names, list) else None)
        if type_ == "CREATE":
            return []
        if type_ == "TRUNCATE":
            return [DataChangeEvent(table, Op.TRUNCATE, None, None, schema, ts_ms=ts)]
        if type_ not in ("INSERT", "UPDATE", "DELETE"):
            raise self._corrupt(
                f"Unknown \"type\" value {type_!r}; expected INSERT, UPDATE, DELETE (CREATE is skipped, "
                "TRUNCATE is a truncate)",
                data,
                "type",
            )
        rows = doc.get("data")
        if not isinstance(rows, list):
            raise self._corrupt(f"expected 'data' to be an array of rows, got {type(rows).__name__}", data, "data")
        olds = doc.get("old")
        if type_ == "UPDATE" and (not isinstance(olds, list) or len(olds) != len(rows)):
            raise self._corrupt("an UPDATE needs 'old' with one object per row of 'data'", data, "old")
        events = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise self._corrupt("expected a JSON object", data, f"data[{i}]")
            values = decode_object(row, schema, format=self.name, path=f"data[{i}]")
            if type_ == "INSERT":
                events.append(DataChangeEvent(table, Op.CREATE, None, values, schema, ts_ms=ts))
            elif type_ == "DELETE":
                events.append(DataChangeEvent(table, Op.DELETE, values, None, schema, ts_ms=ts))
            else:
                old = olds[i]  # type: ignore[index]
                if not isinstance(old, dict):
                    raise self._corrupt("expected a JSON object", data, f"old[{i}]")
                merged = {**row, **old}  # a column absent from old[i] keeps data[i]'s value, as Flink
                before = decode_object(merged, schema, format=self.name, path=f"old[{i}]")
                events.append(DataChangeEvent(table, Op.UPDATE, before, values, schema, ts_ms=ts))
        return events
