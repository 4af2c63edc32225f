"""The ``maxwell-json`` format: Maxwell's row messages with Flink's JSON values (Flink's ``maxwell-json``).

Written layout (compact JSON, this field order)::

    {"database":"shop","table":"orders","type":"update","ts":1709287200,
     "data":{...full row after...},"old":{...changed columns only, with their previous values...}}

* ``ts`` is the commit time in **seconds** (as Maxwell; Flink multiplies by 1000).
* insert (also snapshot rows, written as ``insert`` rather than Maxwell's ``bootstrap-insert`` so
  Flink can read them) and delete carry no ``old``; delete's ``data`` is the deleted row.
* update's ``old`` holds exactly the columns whose value changed, keeping explicit nulls (a
  NULL -> x change), as Maxwell.
* Maxwell has no truncate message: ``encode_event`` returns None for a truncate.

Decoding follows Flink's ``MaxwellJsonDeserializationSchema``: ``old`` is merged over ``data`` to
rebuild the before image (a column present in ``old``, even as null, is the old value).
``bootstrap-insert`` is read as a snapshot row and ``bootstrap-start``/``bootstrap-complete`` are
skipped (Flink would fail on them); other types (DDL ``table-*``, ``database-*``) fail unless
``ignore-parse-errors``. Row-level encode is Flink's serializer: +I/+U -> insert, -U/-D -> delete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import Schema, TableId
from changelake.formats.base import ChangelogFormat
from changelake.formats.json import JsonCodecOptions, decode_object, encode_image
from changelake.formats.json_values import dumps

__all__ = ["MaxwellJsonFormat", "MaxwellJsonOptions"]

_TYPES = {"insert": Op.CREATE, "bootstrap-insert": Op.READ, "update": Op.UPDATE, "delete": Op.DELETE}


@dataclass(frozen=True)
class MaxwellJsonOptions(JsonCodecOptions):
    """Options of the ``maxwell-json`` format (Flink's ``MaxwellJsonFormatOptions``)."""


class MaxwellJsonFormat(ChangelogFormat):
    """Flink's ``maxwell-json`` format (retract changelog). See the module docstring."""

    name = "maxwell-json"
    Options = MaxwellJsonOptions
    options: MaxwellJsonOptions

    def _image(self, values: Mapping[str, Any], schema: Schema | None) -> dict[str, Any]:
        return encode_image(values, schema, self.options, format=self.name)

    def _message(
        self, type_: str, table: TableId | None, ts_ms: int, data: dict[str, Any], old: dict[str, Any] | None = None
    ) -> bytes:
        msg: dict[str, Any] = {
            "database": table.database if table is not None else None,
            "table": table.table if table is not None else None,
            "type": type_,
            "ts": ts_ms // 1000,
            "data": data,
        }
        if old is not None:
            msg["old"] = old
        return dumps(msg)

    def encode_event(self, event: DataChangeEvent) -> bytes | None:
        """One message per row event; None for a truncate. Raises EncodeError naming the column."""
        schema = event.schema if event.schema is not None else self.schema
        if event.op is Op.TRUNCATE:
            return None
        if event.op is Op.DELETE:
            return self._message("delete", event.table, event.ts_ms, self._image(event.before or {}, schema))
        after = self._image(event.after or {}, schema)
        if event.op is Op.UPDATE:
            before = self._image(event.before or {}, schema)
            old = {k: v for k, v in before.items() if k not in after or after[k] != v or type(after[k]) is not type(v)}
            return self._message("update", event.table, event.ts_ms, after, old)
        return self._message("insert", event.table, event.ts_ms, after)

    def encode(self, row: ChangelogRow) -> bytes:
        """As Flink's serializer: +I/+U -> insert, -U/-D -> delete (``data`` = the row)."""
        ts_ms = int(row.metadata.get("ts_ms", 0) or 0)
        type_ = "insert" if row.kind.is_accumulate else "delete"
        return self._message(type_, row.table, ts_ms, self._image(row.values, self.schema))

    def _decode_events(self, data: bytes) -> list[DataChangeEvent]:
        """The event of one message ([] for null/empty and bootstrap-start/-complete).

        ``ts_ms`` is ``ts`` × 1000. Raises DecodeError (unknown type, missing ``data``, bad value
        with field ``data.<col>``/``old.<col>``) unless ``ignore-parse-errors``.
        """
        doc = self._load_json_object(data)
        type_ = doc.get("type")
        if type_ in ("bootstrap-start", "bootstrap-complete"):
            return []
        op = _TYPES.get(type_) if isinstance(type_, str) else None
        if op is None:
            raise self._corrupt(
                f"Unknown \"type\" value {type_!r}; expected insert, update, delete or bootstrap-insert", data, "type"
            )
        ts = doc.get("ts") or 0
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise self._corrupt(f"expected integer seconds in 'ts', got {ts!r}", data, "ts")
        table = TableId(doc.get("database"), doc.get("table") or "")
        row = doc.get("data")
        if not isinstance(row, dict):
            raise self._corrupt("expected 'data' to be a JSON object", data, "data")
        schema = self.schema
        values = decode_object(row, schema, format=self.name, path="data")
        if op is Op.DELETE:
            return [DataChangeEvent(table, op, values, None, schema, ts_ms=ts * 1000)]
        if op is Op.UPDATE:
            old = doc.get("old") or {}
            if not isinstance(old, dict):
                raise self._corrupt("expected 'old' to be a JSON object", data, "old")
            before = decode_object({**row, **old}, schema, format=self.name, path="old")
            return [DataChangeEvent(table, op, before, values, schema, ts_ms=ts * 1000)]
        return [DataChangeEvent(table, op, None, values, schema, ts_ms=ts * 1000)]
