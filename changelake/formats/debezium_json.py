"""The ``debezium-json`` format: Debezium's change-event envelope with Flink's JSON values.

Message layout (compact JSON, this field order; DESIGN.md "Change events on Kafka")::

    {"before":{...}|null,"after":{...}|null,"op":"c|u|d|r|t","source":{"db":"shop","table":"orders","ts_ms":1709287200000}}

``source.ts_ms`` is the commit time in ms (0 for snapshot rows, which are ``r``); a delete is a
normal ``d`` message (never a tombstone); a truncate is ``t`` with no row images. Values are
written by :mod:`changelake.formats.json_values` (DECIMAL as plain numbers, temporals as SQL
text), which is what Flink's debezium-json format reads.

With ``include-schema.enabled`` (Flink CDC's Kafka sink spelling) the message is
``{"schema":<Kafka Connect struct schema>,"payload":<the message above>}``. Unlike Flink CDC's,
that schema **matches the payload**: each column's entry gives the Connect type of its JSON value
plus the exact SQL type, so :func:`schema_from_connect` rebuilds the changelake Schema:

=======================  ===========  ================  ====================================
SQL type                 ``type``     ``name``          ``parameters``
=======================  ===========  ================  ====================================
BOOLEAN                  boolean
TINYINT/SMALLINT/        int8/int16/
INT/BIGINT               int32/int64
FLOAT / DOUBLE           float/double
DECIMAL(p, s)            double       ``decimal``       ``precision``, ``scale`` (payload is
                                                        an exact JSON number)
CHAR(n) / VARCHAR(n)     string       ``char``/         ``length`` (when known)
                                      ``varchar``
STRING                   string
BINARY(n)/VARBINARY(n)   bytes        ``binary``/       ``length`` (payload: base64 text, as
                                      ``varbinary``     Connect's JsonConverter writes bytes)
BYTES                    bytes
DATE                     string       ``date``
TIME(p)                  string       ``time``          ``precision``
TIMESTAMP(p)             string       ``timestamp``     ``precision``
TIMESTAMP_LTZ(p)         string       ``timestamp_ltz`` ``precision``
=======================  ===========  ================  ====================================

``optional`` is the column's nullability, a column comment is ``doc``, and the before/after
struct carries ``"parameters":{"primary.key":"[\\"id\\"]"}`` (a JSON list of the key columns).
Parameter values are strings, as in Kafka Connect. For reading, Flink's ``schema-include`` is
accepted as well, and a wrapped message is recognised whatever the options say.

Row-level ``encode`` is Flink's serializer (it cannot merge -U/+U): +I and +U -> ``c``,
-U and -D -> ``d``. Row-level ``decode`` is Flink's deserializer: ``c``/``r`` -> +I,
``u`` -> -U (before) and +U (after), ``d`` -> -D (before); ``t`` yields no rows (use
:meth:`DebeziumJsonFormat.decode_events` to see it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from changelake.changelog.event import DataChangeEvent, Op
from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import Column, Schema, TableId
from changelake.changelog.types import DataType, TypeRoot
from changelake.formats.base import ChangelogFormat
from changelake.formats.arrow_values import (  # noqa: F401
    _arrow_read_type,
    _temporal_in_arrow,
    arrow_decimals_fit,
    read_json_lines,
)
from changelake.formats.errors import DecodeError, EncodeError
from changelake.formats.json import JsonCodecOptions, decode_object, encode_image
from changelake.formats.json_values import (
    _INT_RANGES,
    dumps,
    dumps_envelope,
    format_time,
    json_decoder_for,
    json_encoder_for,
    loads,
)
from changelake.options import key, option_field

__all__ = ["DebeziumJsonFormat", "DebeziumJsonOptions", "connect_schema_for", "schema_from_connect", "read_batch", "decode_batch",
           "decode_columns", "ColumnarChanges"]

_OPS = {op.value: op for op in Op}

_PLAIN = {
    TypeRoot.BOOLEAN: "boolean",
    TypeRoot.TINYINT: "int8",
    TypeRoot.SMALLINT: "int16",
    TypeRoot.INT: "int32",
    TypeRoot.BIGINT: "int64",
    TypeRoot.FLOAT: "float",
    TypeRoot.DOUBLE: "double",
    TypeRoot.STRING: "string",
    TypeRoot.BYTES: "bytes",
}
_PLAIN_BACK = {v: k for k, v in _PLAIN.items()}
_NAMED = {
    TypeRoot.DECIMAL: ("double", "decimal"),
    TypeRoot.CHAR: ("string", "char"),
    TypeRoot.VARCHAR: ("string", "varchar"),
    TypeRoot.BINARY: ("bytes", "binary"),
    TypeRoot.VARBINARY: ("bytes", "varbinary"),
    TypeRoot.DATE: ("string", "date"),
    TypeRoot.TIME: ("string", "time"),
    TypeRoot.TIMESTAMP: ("string", "timestamp"),
    TypeRoot.TIMESTAMP_LTZ: ("string", "timestamp_ltz"),
}
_NAMED_BACK = {name: root for root, (_, name) in _NAMED.items()}


@dataclass(frozen=True)
class DebeziumJsonOptions(JsonCodecOptions):
    """Options of the ``debezium-json`` format (Flink's ``DebeziumJsonFormatOptions`` + Flink CDC)."""

    include_schema_enabled: bool = option_field(
        key("include-schema.enabled").bool_type().default_value(False)
        .with_description("Write {schema, payload} with a Connect schema matching the payload.")
    )
    schema_include: bool = option_field(
        key("schema-include").bool_type().default_value(False)
        .with_description("Flink's name: messages are {schema, payload}; also enables writing the wrapper.")
    )


# -- Connect schema <-> changelake Schema -----------------------------------------------------------
def _column_entry(col: Column) -> dict[str, Any]:
    t = col.type
    entry: dict[str, Any]
    if t.root in _PLAIN:
        entry = {"type": _PLAIN[t.root], "optional": t.nullable}
    else:
        connect_type, name = _NAMED[t.root]
        entry = {"type": connect_type, "optional": t.nullable, "name": name}
        params: dict[str, str] = {}
        if t.root is TypeRoot.DECIMAL:
            params = {"precision": str(t.precision if t.precision is not None else 10), "scale": str(t.scale or 0)}
        elif t.length is not None and (t.is_string or t.is_binary):
            params = {"length": str(t.length)}
        elif t.precision is not None and t.root in (TypeRoot.TIME, TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
            params = {"precision": str(t.precision)}
        if params:
            entry["parameters"] = params
    if col.comment:
        entry["doc"] = col.comment
    entry["field"] = col.name
    return entry


def connect_schema_for(schema: Schema, table: TableId | None) -> dict[str, Any]:
    """The Kafka Connect JSON schema of a debezium-json envelope for rows of ``schema``.

    Returns ``{"type":"struct","fields":[before, after, op, source],"optional":false,"name":...}``;
    see the module docstring for the column entries.
    """
    prefix = str(table) if table is not None else "changelake"
    value: dict[str, Any] = {
        "type": "struct",
        "fields": [_column_entry(c) for c in schema.columns],
        "optional": True,
        "name": f"{prefix}.Value",
    }
    if schema.primary_key:
        value["parameters"] = {"primary.key": dumps(list(schema.primary_key)).decode("utf-8")}
    if schema.comment:  # the table comment (include-comments.enabled), as Connect's struct doc
        value["doc"] = schema.comment
    source = {
        "type": "struct",
        "fields": [
            {"type": "string", "optional": True, "field": "db"},
            {"type": "string", "optional": True, "field": "table"},
            {"type": "int64", "optional": False, "field": "ts_ms"},
        ],
        "optional": True,
        "name": "io.debezium.connector.mysql.Source",
        "field": "source",
    }
    return {
        "type": "struct",
        "fields": [
            {**value, "field": "before"},
            {**value, "field": "after"},
            {"type": "string", "optional": False, "field": "op"},
            source,
        ],
        "optional": False,
        "name": f"{prefix}.Envelope",
    }


#: Debezium's schema of the ``transaction`` block (``provide.transaction.metadata``).
_TRANSACTION_BLOCK_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": False, "field": "total_order"},
        {"type": "int64", "optional": False, "field": "data_collection_order"},
    ],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}


def _int_param(params: Mapping[str, Any], key: str) -> int | None:
    value = params.get(key)
    return int(value) if value is not None else None


def _column_from_entry(entry: Any) -> Column:
    if not isinstance(entry, dict) or not isinstance(entry.get("field"), str):
        raise ValueError(f"a column entry needs a 'field' name: {entry!r}")
    params = entry.get("parameters") or {}
    nullable = bool(entry.get("optional", True))
    name = entry.get("name")
    if name in _NAMED_BACK:
        root = _NAMED_BACK[name]
        if root is TypeRoot.DECIMAL:
            dtype = DataType.decimal(_int_param(params, "precision") or 10, _int_param(params, "scale") or 0, nullable)
        elif root in (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY):
            dtype = DataType(root, nullable, length=_int_param(params, "length"))
        elif root is TypeRoot.DATE:
            dtype = DataType(root, nullable)
        else:
            dtype = DataType(root, nullable, precision=_int_param(params, "precision"))
    else:
        connect_type = entry.get("type")
        if connect_type not in _PLAIN_BACK:
            raise ValueError(f"unsupported Connect type {connect_type!r} of column {entry['field']!r}")
        dtype = DataType(_PLAIN_BACK[connect_type], nullable)
    return Column(entry["field"], dtype, entry.get("doc"))


def schema_from_connect(envelope: Any) -> Schema:
    """Rebuild the table schema from a debezium-json envelope's Connect schema.

    Reads the ``after`` (else ``before``) struct's column entries and its ``primary.key``
    parameter. Raises ValueError when the schema is not such an envelope.
    """
    if not isinstance(envelope, dict) or not isinstance(envelope.get("fields"), list):
        raise ValueError("the 'schema' is not a Connect struct with 'fields'")
    structs = {f.get("field"): f for f in envelope["fields"] if isinstance(f, dict)}
    value = structs.get("after") or structs.get("before")
    if not isinstance(value, dict) or not isinstance(value.get("fields"), list):
        raise ValueError("the 'schema' has no 'before'/'after' struct")
    columns = tuple(_column_from_entry(e) for e in value["fields"])
    pk_text = (value.get("parameters") or {}).get("primary.key")
    pk = tuple(loads(pk_text)) if pk_text else ()
    doc = value.get("doc")
    return _interned(Schema(columns, pk, comment=str(doc) if doc else None))


_SCHEMAS: dict[Schema, Schema] = {}
_TABLES: dict[tuple[Any, Any], TableId] = {}


def _table_id(db: Any, table: Any) -> TableId:
    """The (cached) TableId of a message's ``source.db`` / ``source.table``."""
    key = (db, table)
    found = _TABLES.get(key)
    if found is None:
        if len(_TABLES) >= 4096:
            _TABLES.clear()
        found = _TABLES[key] = TableId(db, table)
    return found


def _interned(schema: Schema) -> Schema:
    """The one cached instance equal to ``schema``: every message of a table then carries the same
    Schema object, so codecs and the sink's per-table buffers match it by identity."""
    cached = _SCHEMAS.get(schema)
    if cached is None:
        if len(_SCHEMAS) >= 1024:
            _SCHEMAS.clear()
        cached = _SCHEMAS[schema] = schema
    return cached


# -- the format --------------------------------------------------------------------------------------
class DebeziumJsonFormat(ChangelogFormat):
    """Flink's ``debezium-json`` format (retract changelog). See the module docstring.

    Example::

        fmt = DebeziumJsonFormat(schema, {})
        fmt.encode_event(DataChangeEvent(TableId("shop", "orders"), Op.UPDATE, before, after, schema, ts_ms=1))
        # b'{"before":{...},"after":{...},"op":"u","source":{"db":"shop","table":"orders","ts_ms":1}}'
    """

    name = "debezium-json"
    Options = DebeziumJsonOptions
    options: DebeziumJsonOptions
    #: the batch reader's plan for this format's schema (:func:`decode_batch`), built on first use
    _batch_plans: "dict[Schema, _BatchPlan] | None" = None

    @property
    def _wrap(self) -> bool:
        return self.options.include_schema_enabled or self.options.schema_include

    def _image(self, values: Mapping[str, Any] | None, schema: Schema | None) -> dict[str, Any] | None:
        if values is None:
            return None
        return encode_image(values, schema, self.options, format=self.name)

    def _message(
        self,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        op: str,
        table: TableId | None,
        ts_ms: int,
        schema: Schema | None,
        transaction: Mapping[str, Any] | None = None,
    ) -> bytes:
        before_obj, after_obj = self._image(before, schema), self._image(after, schema)
        payload: dict[str, Any] = {"before": before_obj, "after": after_obj, "op": op}
        if table is not None:
            payload["source"] = {"db": table.database, "table": table.table, "ts_ms": ts_ms}
        if transaction is not None:  # Debezium's provide.transaction.metadata block
            payload["transaction"] = {"id": transaction["id"], "total_order": transaction["total_order"],
                                      "data_collection_order": transaction["data_collection_order"]}
        if not self._wrap:
            return dumps_envelope(payload, (before_obj, after_obj))
        if schema is None:
            where = f" of table {table}" if table is not None else ""
            hint = (": a DROP TABLE (or TRUNCATE) of a table whose definition Pipeline 1 never saw (created and dropped, or "
                    "dropped, while it was not reading, with no row change in between) - without "
                    "include-schema.enabled the drop carries no schema and Pipeline 2 empties the lake table "
                    "with its own") if op == "t" else ""
            raise EncodeError(
                f"include-schema.enabled needs the table schema (the event{where} and the format have none){hint}",
                format=self.name,
            )
        envelope = connect_schema_for(schema, table)
        if transaction is not None:
            envelope = {**envelope, "fields": [*envelope["fields"], _TRANSACTION_BLOCK_SCHEMA]}
        return dumps({"schema": envelope, "payload": payload})

    def encode_event(self, event: DataChangeEvent) -> bytes:
        """One message per event (``t`` without row images). Raises EncodeError naming the column."""
        schema = event.schema if event.schema is not None else self.schema
        before = event.before if event.op in (Op.UPDATE, Op.DELETE) else None
        after = event.after if event.op in (Op.CREATE, Op.READ, Op.UPDATE) else None
        return self._message(before, after, event.op.value, event.table, event.ts_ms, schema, event.transaction)

    def event_encoder(self, schema: Schema | None) -> Callable[[DataChangeEvent], bytes]:
        """:meth:`encode_event` for the many events of one table whose ``schema`` is this object:
        the same bytes and errors, with the column converters looked up once instead of per row
        image (the Kafka pipeline sink's per-table plan). An event of another schema object, with
        a transaction block, or of a format that writes the schema wrapper or drops null fields
        goes through :meth:`encode_event`.
        """
        opts = self.options
        cls = type(self)
        if (schema is None or self._wrap or opts.encode_ignore_null_fields
                or cls.encode_event is not DebeziumJsonFormat.encode_event
                or cls._message is not DebeziumJsonFormat._message):  # a subclass writes its own
            return self.encode_event
        encoders = [(c.name, json_encoder_for(c.type, c.name, timestamp_format=opts.timestamp_format_standard,
                                              format=self.name)) for c in schema.columns]
        encode_event = self.encode_event
        with_before, with_after = (Op.UPDATE, Op.DELETE), (Op.CREATE, Op.READ, Op.UPDATE)

        def encode(event: DataChangeEvent) -> bytes:
            table = event.table
            if event.schema is not schema or event.transaction is not None or table is None:
                return encode_event(event)
            op = event.op
            before = event.before if op in with_before else None
            after = event.after if op in with_after else None
            before_obj = None if before is None else {name: enc(before.get(name)) for name, enc in encoders}
            after_obj = None if after is None else {name: enc(after.get(name)) for name, enc in encoders}
            payload = {"before": before_obj, "after": after_obj, "op": op.value,
                       "source": {"db": table.database, "table": table.table, "ts_ms": event.ts_ms}}
            return dumps_envelope(payload, (before_obj, after_obj))

        return encode

    def encode(self, row: ChangelogRow) -> bytes:
        """As Flink's serializer: +I/+U -> ``c`` (after), -U/-D -> ``d`` (before); ``source`` is
        written when the row names its table (``ts_ms`` from ``row.metadata``, else 0)."""
        ts_ms = int(row.metadata.get("ts_ms", 0) or 0)
        if row.kind.is_accumulate:
            return self._message(None, row.values, "c", row.table, ts_ms, self.schema)
        return self._message(row.values, None, "d", row.table, ts_ms, self.schema)

    def _decode_events(self, data: bytes) -> list[DataChangeEvent]:
        """The event of one message ([] for a null/empty message or a null payload).

        Table from ``source.db``/``source.table`` (``TableId(None, "")`` when there is no source);
        schema from the wrapper if present, else the format's, else None (plain JSON values);
        ``ts_ms`` from ``source.ts_ms``, else the top-level ``ts_ms``, else 0.

        Raises:
            DecodeError: malformed JSON, an unknown op ("Unknown op"), a missing before/after image,
                or a value that does not parse (field ``before.<col>``/``after.<col>``); none with
                ``ignore-parse-errors`` (the message yields []).
        """
        doc = self._load_json_object(data)
        schema = self.schema
        if "payload" in doc and "op" not in doc:
            if doc["payload"] is None:
                return []
            if doc.get("schema") is not None:
                try:
                    schema = schema_from_connect(doc["schema"])
                except (ValueError, TypeError) as exc:
                    raise self._corrupt(f"unreadable schema: {exc}", data, "schema") from exc
            doc = doc["payload"]
            if not isinstance(doc, dict):
                raise self._corrupt("expected 'payload' to be a JSON object", data, "payload")
        op_text = doc.get("op")
        op = _OPS.get(op_text) if isinstance(op_text, str) else None
        if op is None:
            raise self._corrupt(f"Unknown op {op_text!r}; expected one of c, r, u, d, t", data, "op")
        source = doc.get("source")
        if source is not None and not isinstance(source, dict):
            raise self._corrupt("expected 'source' to be a JSON object", data, "source")
        source = source or {}
        table = _table_id(source.get("db"), source.get("table") or "")
        ts = source.get("ts_ms", doc.get("ts_ms", 0))
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise self._corrupt(f"expected an integer ts_ms, got {ts!r}", data, "source.ts_ms")
        before = after = None
        if op is Op.UPDATE or op is Op.DELETE:
            if doc.get("before") is None:
                kind = "UPDATE" if op is Op.UPDATE else "DELETE"
                raise self._corrupt(
                    f'The "before" field of {kind} message is null; the source must log full row images '
                    "(MySQL binlog_row_image=FULL)",
                    data,
                    "before",
                )
            before = decode_object(doc["before"], schema, format=self.name, path="before")
        if op is not Op.DELETE and op is not Op.TRUNCATE:
            if doc.get("after") is None:
                raise self._corrupt(f'The "after" field of a "{op.value}" message is null', data, "after")
            after = decode_object(doc["after"], schema, format=self.name, path="after")
        return [DataChangeEvent(table, op, before, after, schema, ts_ms=ts)]



# -- batch decode (one call per group of messages) ------------------------------------------------
@dataclass
class _BatchPlan:
    """What :func:`decode_batch` needs per schema (built once and cached on the format)."""

    read_schema: Any  # pyarrow schema of the envelope
    #: (column, decoder) of the columns read as text or int64 that still need the value decoder
    post: list[tuple[str, Callable[[Any], Any]]]
    int_ranges: list[tuple[str, int, int]]


def _batch_plan(schema: Schema, format: str) -> _BatchPlan | None:
    import pyarrow as pa

    fields, post, ranges = [], [], []
    for col in schema.columns:
        arrow_type = _arrow_read_type(col.type)
        if arrow_type is None:
            return None
        fields.append(pa.field(col.name, arrow_type))
        if col.type.is_integer:
            lo, hi = _INT_RANGES[col.type.root]
            if (lo, hi) != _INT_RANGES[TypeRoot.BIGINT]:
                ranges.append((col.name, lo, hi))
        elif pa.types.is_string(arrow_type) and not col.type.is_string:
            post.append((col.name, json_decoder_for(col.type, col.name, format=format)))
    image = pa.struct(fields)
    source = pa.struct([pa.field("db", pa.string()), pa.field("table", pa.string()), pa.field("ts_ms", pa.int64())])
    read_schema = pa.schema([pa.field("before", image), pa.field("after", image), pa.field("op", pa.string()),
                             pa.field("source", source), pa.field("ts_ms", pa.int64())])
    return _BatchPlan(read_schema, post, ranges)


def read_batch(fmt: "DebeziumJsonFormat", values: Sequence[bytes]) -> Any | None:
    """``values`` as ONE ``pyarrow.Table`` (columns ``before``, ``after``: structs of the
    format's schema as read, see :func:`_arrow_read_type`; ``op``; ``source``: struct of ``db``,
    ``table``, ``ts_ms``; ``ts_ms``), read in one call of pyarrow's JSON reader with an explicit
    schema; None when the group cannot be read exactly that way (the caller then decodes it
    message by message, which names the bad message).

    Taken only for a format with a schema (Pipeline 1's schema header, or a format built with
    one), messages that are one compact JSON line each, without the ``schema``/``payload``
    wrapper. None for: any message Arrow refuses (malformed JSON, a value of another JSON type
    or out of range, a DECIMAL needing more scale or precision), a NaN/Inf token (Arrow reads
    ``Inf``, which the per-message decoder refuses), an unknown or missing op, an
    integer outside its column's range. Values of DATE, TIME, TIMESTAMP(_LTZ) and binary columns
    are still their JSON text (:func:`decode_batch` converts them).
    """
    schema = fmt.schema
    if schema is None or not values or not all(values):
        return None
    joined = b"\n".join(values)
    # one line per message: no message holds a line break of its own (counted once, in C)
    if joined.count(b"\n") != len(values) - 1 or b"\r" in joined:
        return None
    plan = _plan_of(fmt, schema)
    if plan is None:
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    table = read_json_lines(joined, plan.read_schema, len(values))  # NaN/Inf tokens, Arrow's refusals, UTF-8
    if table is None:
        return None
    ops = table.column("op")
    if ops.null_count or not pc.all(pc.is_in(ops, value_set=pa.array(sorted(_OPS)))).as_py():
        return None  # a null op: the schema/payload wrapper, or no op at all
    for side in ("before", "after"):
        for name, lo, hi in plan.int_ranges:
            bounds = pc.min_max(pc.struct_field(table.column(side), name)).as_py()
            if bounds["min"] is not None and (bounds["min"] < lo or bounds["max"] > hi):
                return None
        for field in plan.read_schema.field(side).type:
            if pa.types.is_decimal(field.type) and not arrow_decimals_fit(
                    pc.struct_field(table.column(side), field.name), field.type):
                return None
    return table


def _plan_of(fmt: "DebeziumJsonFormat", schema: Schema) -> "_BatchPlan | None":
    plan = fmt._batch_plans.get(schema) if fmt._batch_plans else None
    if plan is None:
        plan = _batch_plan(schema, fmt.name)
        if plan is not None:
            fmt._batch_plans = {schema: plan}
    return plan


def decode_batch(fmt: "DebeziumJsonFormat", values: Sequence[bytes]) -> list[list[DataChangeEvent]] | None:
    """The events of each message of ``values`` (one list per message, equal to what
    :meth:`DebeziumJsonFormat.decode_events` gives), from :func:`read_batch`; None when
    :func:`read_batch` refuses the group, an image is missing, a ``ts_ms`` is null, or a DATE,
    TIME, TIMESTAMP or binary value does not parse (decode those message by message).

    Measured (``bench/bench_decode.py``): the Arrow read is a fraction of the per-message decode,
    but turning the columns back into per-row dicts and events costs about as much as decoding
    per message: the gain needs the rows to stay in Arrow to the lake.
    """
    table = read_batch(fmt, values)
    schema = fmt.schema
    if table is None or schema is None:
        return None
    plan = _plan_of(fmt, schema)
    assert plan is not None
    ops = table.column("op").to_pylist()
    befores, afters = _struct_rows(table.column("before")), _struct_rows(table.column("after"))
    source = _struct_rows(table.column("source"))
    top_ts = table.column("ts_ms").to_pylist()
    out: list[list[DataChangeEvent]] = []
    try:
        for i, op_text in enumerate(ops):
            op = _OPS[op_text]
            src = source[i]
            # A null ts_ms is either absent (then 0 or the top-level one) or JSON null (an error):
            # the reader cannot tell them apart, so the per-message decoder decides.
            ts = src.get("ts_ms") if src is not None else top_ts[i]
            if ts is None:
                return None
            src = src or {}
            before = after = None
            if op is Op.UPDATE or op is Op.DELETE:
                before = befores[i]
                if before is None:
                    return None
                for name, decode in plan.post:
                    before[name] = decode(before[name])
            if op is not Op.DELETE and op is not Op.TRUNCATE:
                after = afters[i]
                if after is None:
                    return None
                for name, decode in plan.post:
                    after[name] = decode(after[name])
            out.append([DataChangeEvent(_table_id(src.get("db"), src.get("table") or ""), op, before, after, schema,
                                        ts_ms=ts)])
    except DecodeError:
        return None
    return out




@dataclass(frozen=True)
class ColumnarChanges:
    """The changelog rows of a group of messages, from :func:`decode_columns`.

    Attributes:
        rows: one row per changelog row (``+I`` after; ``-U`` before, ``+U`` after; ``-D``
            before), the columns of the schema in :func:`~changelake.changelog.change_batch.batch_arrow_type`.
        kinds: the row kinds (``+I``, ``-U``, ``+U``, ``-D``), parallel to ``rows``.
        message: int64, the index in ``values`` of each row's message.
        table: the one ``(source.db, source.table)`` of every message (``(None, "")`` without source).
        ops: messages per op letter.
    """

    rows: Any
    kinds: Any
    message: Any
    table: tuple[Any, str]
    ops: dict[str, int]


def decode_columns(fmt: "DebeziumJsonFormat", values: Sequence[bytes]) -> ColumnarChanges | None:
    """``values`` decoded to changelog rows in Arrow, never to Python objects per row, with
    :func:`read_batch`; equal, row for row, to :meth:`DataChangeEvent.to_rows` of what
    :meth:`DebeziumJsonFormat.decode_events` gives for each message (DATE, TIME, TIMESTAMP and
    binary values go through the same value decoders).

    None (decode those message by message, which names the bad one) when :func:`read_batch`
    refuses the group, a message is a truncate (``t``), an image is missing, a ``ts_ms`` is null,
    a value does not parse, the messages name more than one table, or a column has no batch type
    (DECIMAL wider than 38 digits).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from changelake.changelog.change_batch import batch_arrow_schema

    table = read_batch(fmt, values)
    schema = fmt.schema
    if table is None or schema is None:
        return None
    target = batch_arrow_schema(schema)
    if target is None:
        return None
    ops = table.column("op").combine_chunks()
    counts = {str(e["values"]): int(e["counts"]) for e in pc.value_counts(ops).to_pylist()}
    if "t" in counts:
        return None
    source = table.column("source").combine_chunks()
    ts = pc.if_else(source.is_valid(), pc.struct_field(source, "ts_ms"), table.column("ts_ms").combine_chunks())
    if ts.null_count:
        return None  # absent or JSON null: the per-message decoder tells them apart
    dbs, names = pc.unique(pc.struct_field(source, "db")), pc.unique(pc.struct_field(source, "table"))
    if source.null_count and source.null_count != len(source) or len(dbs) > 1 or len(names) > 1:
        return None
    db, name = (dbs[0].as_py() if len(dbs) else None), (names[0].as_py() if len(names) else None)
    after = table.column("after").combine_chunks()
    n = len(ops)
    if counts.keys() <= {"c", "r"}:
        # inserts and snapshot reads only (the insert-only stream): one +I row per message, its
        # after image, in message order -- what the general split below gives, without its copy
        if after.null_count:
            return None
        images = after
        kinds = pa.repeat(pa.scalar("+I", pa.string()), n)
        message = pa.array(np.arange(n, dtype=np.int64))
    else:
        before = table.column("before").combine_chunks()
        op_text = np.asarray(ops.to_numpy(zero_copy_only=False), dtype=object)
        is_update, is_delete = op_text == "u", op_text == "d"
        has_before, has_after = is_update | is_delete, ~is_delete
        if (not np.all(np.asarray(before.is_valid())[has_before])
                or not np.all(np.asarray(after.is_valid())[has_after])):
            return None
        # rows: per message [before] if u/d, then [after] if not d; indices into before ++ after
        per = has_before.astype(np.int64) + has_after.astype(np.int64)
        at = np.repeat(np.arange(n, dtype=np.int64), per)
        first = np.concatenate(([0], np.cumsum(per)[:-1])) if n else np.zeros(0, dtype=np.int64)
        take = at + n  # the after image by default
        kind_text = np.full(len(at), "+I", dtype=object)
        before_at = first[has_before]
        take[before_at] = at[before_at]
        kind_text[before_at] = np.where(is_update[has_before], "-U", "-D")
        if is_update.any():
            kind_text[first[is_update] + 1] = "+U"
        images = pa.concat_arrays([before, after]).take(pa.array(take))
        kinds = pa.array(kind_text, pa.string())
        message = pa.array(at, pa.int64())
    columns = []
    plan = _plan_of(fmt, schema)
    assert plan is not None
    post = dict(plan.post)
    try:
        for column, field in zip(schema.columns, target):
            array = images.field(column.name)
            decode = post.get(column.name)
            fast = _temporal_in_arrow(array, column.type, field.type) if decode is not None else None
            if fast is not None:
                array = fast
            elif decode is not None:
                decoded = [None if v is None else decode(v) for v in array.to_pylist()]
                if column.type.root is TypeRoot.TIME:
                    decoded = [None if v is None else format_time(v, column.type.precision) for v in decoded]
                array = pa.array(decoded, type=field.type)
            elif array.type != field.type:
                array = array.cast(field.type, safe=column.type.root is not TypeRoot.FLOAT)
            columns.append(array)
    except (DecodeError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None
    rows = pa.Table.from_arrays(columns, schema=target)
    return ColumnarChanges(rows, kinds, message, (db, name or ""), counts)



def _struct_rows(column: Any) -> list[dict[str, Any] | None]:
    """A struct column as row dicts (None for a null struct), built from the children's Python
    lists (a struct scalar's ``as_py`` goes through the Mapping ABC: about 5x slower)."""
    array = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    names = [array.type.field(i).name for i in range(array.type.num_fields)]
    children = [array.field(i).to_pylist() for i in range(len(names))]
    valid = array.is_valid().to_pylist() if array.null_count else None
    rows: list[dict[str, Any] | None] = [dict(zip(names, values)) for values in zip(*children)]
    if valid is not None:
        rows = [row if ok else None for row, ok in zip(rows, valid)]
    return rows
