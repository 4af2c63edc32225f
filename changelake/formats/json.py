"""The ``json`` format: one row <-> one JSON object of the schema's columns (Flink's ``json``).

Encoding writes the schema's columns in schema order with :mod:`changelake.formats.json_values`
values (compact, UTF-8). Decoding accepts an object (one row) or, as Flink since 1.15, an array of
objects (one row each); every decoded row is ``+I``. Without a schema, encoding writes the row's
values as they are and decoding returns plain JSON values (numbers with a fraction as float).

Example::

    fmt = JsonFormat(schema, {"fail-on-missing-field": "true"})
    fmt.encode(ChangelogRow.insert({"id": 1, "price": Decimal("9.90")}))  # b'{"id":1,"price":9.90}'
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any, Callable, Mapping, Sequence

import msgspec

from changelake.changelog.decimals import column_context
from changelake.changelog.row import ChangelogRow
from changelake.changelog.rowkind import INSERT_ONLY, RowKind
from changelake.changelog.schema import Schema
from changelake.changelog.types import DataType, TypeRoot
from changelake.formats.base import Format
from changelake.formats.errors import DecodeError, EncodeError, FormatOptionError
from changelake.formats.json_values import (
    _INT_RANGES,
    dumps,
    from_json_value,
    json_decoder_for,
    json_encoder_for,
    loads,
    to_json_untyped,
    to_plain,
)
from changelake.formats.options import MapNullKeyMode, TimestampFormat
from changelake.options import key, option_field

__all__ = ["JsonFormat", "JsonOptions", "JsonCodecOptions", "encode_object", "decode_object"]


@dataclass(frozen=True)
class JsonCodecOptions:
    """Options shared by every JSON-based format (Flink's ``JsonFormatOptions``)."""

    ignore_parse_errors: bool = option_field(
        key("ignore-parse-errors").bool_type().default_value(False)
        .with_description("Skip a message that cannot be parsed (yield no rows) instead of failing.")
    )
    timestamp_format_standard: TimestampFormat = option_field(
        key("timestamp-format.standard").enum_type(TimestampFormat, exact=True).default_value(TimestampFormat.SQL)
        .with_description("TIMESTAMP text: 'SQL' (yyyy-MM-dd HH:mm:ss.f) or 'ISO-8601' (yyyy-MM-ddTHH:mm:ss.f). Both are read.")
    )
    map_null_key_mode: MapNullKeyMode = option_field(
        key("map-null-key.mode").enum_type(MapNullKeyMode, exact=True).default_value(MapNullKeyMode.FAIL)
        .with_description("Null MAP keys: FAIL, DROP or LITERAL (no MAP type yet).")
    )
    map_null_key_literal: str = option_field(
        key("map-null-key.literal").string_type().default_value("null")
        .with_description("Literal for null MAP keys in LITERAL mode.")
    )
    encode_decimal_as_plain_number: bool = option_field(
        key("encode.decimal-as-plain-number").bool_type().default_value(False)
        .with_description("Accepted for Flink compatibility; changelake always writes DECIMAL as a plain number.")
    )
    encode_ignore_null_fields: bool = option_field(
        key("encode.ignore-null-fields").bool_type().default_value(False)
        .with_description("Leave NULL columns out of the written object.")
    )


@dataclass(frozen=True)
class JsonOptions(JsonCodecOptions):
    """Options of the ``json`` format."""

    fail_on_missing_field: bool = option_field(
        key("fail-on-missing-field").bool_type().default_value(False)
        .with_description("Fail when a schema column is absent from the object (else NULL).")
    )


def _decimal_text(value: Decimal) -> str:
    return format(value, "f") if value.is_finite() else encode_basestring(str(value))


def _float_text(value: float) -> str:
    if math.isfinite(value):
        return float.__repr__(value)
    return encode_basestring("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))


#: JSON text of a JSON value by its exact type, as ``json_values.dumps`` writes it; other types
#: (subclasses) take the general path.
_TEXT: dict[type, Callable[[Any], str]] = {
    str: encode_basestring,
    int: int.__repr__,
    bool: lambda b: "true" if b else "false",
    float: _float_text,
    Decimal: _decimal_text,
}


_NONE = type(None)
#: the timestamp text :func:`~changelake.formats.json_values.parse_timestamp` hands to
#: ``datetime.fromisoformat`` (a narrower, ASCII-only spelling of its shape test)
_CANONICAL_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d{1,9})?", re.ASCII)


def _batch_decoder_for(dtype: DataType) -> Callable[[list[Any]], list[Any] | None] | None:
    """The batch step of one column for :meth:`_ObjectCodec.decode_values_many`: ``values ->
    converted values``, equal to the column converter's (``json_decoder_for``) value by value, or
    None when a value is not of the kinds it takes or the step raises (the caller then converts
    value by value). None for types without one."""
    root = dtype.root
    if dtype.is_string:

        def strings(raw: list[Any]) -> list[Any] | None:
            return raw if set(map(type, raw)) <= {str, _NONE} else None

        return strings
    if dtype.is_integer:
        lo, hi = _INT_RANGES[root]

        def integers(raw: list[Any]) -> list[Any] | None:
            kinds = set(map(type, raw))
            if not kinds <= {int, _NONE}:
                return None
            present = raw if _NONE not in kinds else [x for x in raw if x is not None]
            return raw if not present or (lo <= min(present) and max(present) <= hi) else None

        return integers
    if root is TypeRoot.DECIMAL:
        exp = Decimal(1).scaleb(-(dtype.scale or 0))
        quantize = column_context(dtype.precision if dtype.precision is not None else 38).quantize

        def decimals(raw: list[Any]) -> list[Any] | None:
            # as _quantize_fast: ROUND_HALF_UP to the scale, refused past the precision (the
            # column's context signals it on quantize); msgspec gives only finite Decimals
            if not set(map(type, raw)) <= {Decimal, int, _NONE}:
                return None
            try:
                return [None if v is None else quantize(v, exp) for v in raw]
            except ArithmeticError:
                return None

        return decimals
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        ltz = root is TypeRoot.TIMESTAMP_LTZ
        canonical = _CANONICAL_TIMESTAMP.fullmatch
        fromisoformat = dt.datetime.fromisoformat
        utc = dt.timezone.utc

        def timestamps(raw: list[Any]) -> list[Any] | None:
            if not set(map(type, raw)) <= {str, _NONE} or not all(v is None or canonical(v) for v in raw):
                return None
            try:
                out = [None if v is None else fromisoformat(v) for v in raw]
            except ValueError:
                return None
            return [None if v is None else v.replace(tzinfo=utc) for v in out] if ltz else out

        return timestamps
    return None


class _ObjectCodec:
    """The per-column converters of one schema (built once, see :func:`_codec_for`)."""

    __slots__ = ("schema", "format", "encoders", "decoders", "text_columns", "names", "batch_decoders")

    def __init__(self, schema: Schema, format: str, timestamp_format: TimestampFormat) -> None:
        self.schema = schema
        self.format = format
        #: (column, encoder) in schema order
        self.encoders = [
            (c.name, json_encoder_for(c.type, c.name, timestamp_format=timestamp_format, format=format))
            for c in schema.columns
        ]
        #: (column, decoder, type) in schema order
        self.decoders = [(c.name, json_decoder_for(c.type, c.name, format=format), c.type) for c in schema.columns]
        self.names = [c.name for c in schema.columns]
        #: per column, the batch step of :meth:`decode_values_many` (or None)
        self.batch_decoders = [_batch_decoder_for(c.type) for c in schema.columns]
        #: (column, '"column":', encoder) in schema order
        self.text_columns = [(name, encode_basestring(name) + ":", enc) for name, enc in self.encoders]

    def decode_values(
        self, obj: dict[str, Any], fail_on_missing_field: bool, format: str | None = None, path: str | None = None
    ) -> dict[str, Any]:
        """The schema's values of a parsed JSON object (see :func:`decode_object`)."""
        values: dict[str, Any] = {}
        for name, dec, dtype in self.decoders:
            if name not in obj:
                if fail_on_missing_field:
                    field = f"{path}.{name}" if path else name
                    raise DecodeError(f"Could not find field with name '{name}'.", format=format or self.format, field=field)
                values[name] = None
                continue
            try:
                values[name] = dec(obj[name])
            except DecodeError:
                # the same error, naming the field with its path
                values[name] = from_json_value(
                    obj[name], dtype, f"{path}.{name}" if path else name, format=format or self.format
                )
        return values

    def decode_values_many(self, objs: Sequence[Any], fail_on_missing_field: bool) -> list[dict[str, Any] | None]:
        """:meth:`decode_values` of each of ``objs`` (parsed by :data:`_BATCH_PARSER`: numbers with
        a fraction as finite ``Decimal``), column by column: a column whose values all have the
        column's plain Python type is converted by one batch step (``int`` in range and ``str``
        as given, DECIMAL by one context's ``quantize``, timestamp text of the canonical shape by
        ``datetime.fromisoformat``: what the column's converter does for such values), any other
        value by the column's converter. Same values as ``decode_values``; an entry is None where
        that one is not certain to give them without an error: not a dict (an array, or None for a
        message the caller could not parse), a missing field with ``fail_on_missing_field``, a
        value the converter refuses (the caller then decodes that message row by row, which raises
        the exact error)."""
        n = len(objs)
        bad: set[int] = set()
        rows: list[Any] = list(objs)
        for i, obj in enumerate(rows):
            if type(obj) is not dict:
                bad.add(i)
                rows[i] = {}
        columns: list[list[Any]] = []
        for (name, dec, _dtype), batch in zip(self.decoders, self.batch_decoders):
            raw = [obj.get(name) for obj in rows]
            if fail_on_missing_field:
                bad.update(i for i, obj in enumerate(rows) if name not in obj)
            col = None if batch is None else batch(raw)
            if col is None:
                try:
                    col = list(map(dec, raw))
                except DecodeError:
                    col = []
                    for i, v in enumerate(raw):
                        try:
                            col.append(dec(v))
                        except DecodeError:
                            bad.add(i)
                            col.append(None)
            columns.append(col)
        names = self.names
        out: list[dict[str, Any] | None] = [dict(zip(names, t)) for t in zip(*columns)] if columns else [{} for _ in range(n)]
        for i in bad:
            out[i] = None
        return out

    def encode_text(self, values: Mapping[str, Any], ignore_null_fields: bool) -> bytes | None:
        """``dumps(encode_object(values, ...))`` without the intermediate object; None when a
        value needs the general writer (an unusual type or text that is not valid UTF-8)."""
        parts = []
        text = _TEXT
        for name, prefix, enc in self.text_columns:
            jv = enc(values.get(name))
            if jv is None:
                if not ignore_null_fields:
                    parts.append(prefix + "null")
                continue
            write = text.get(type(jv))
            if write is None:
                return None
            parts.append(prefix + write(jv))
        try:
            return ("{" + ",".join(parts) + "}").encode("utf-8")
        except UnicodeEncodeError:
            return None


    def encode_text_many(self, rows: Sequence[Mapping[str, Any]]) -> list[bytes | None]:
        """:meth:`encode_text` of each of ``rows`` (nulls written, not ignored), column by
        column: each column's converter runs over the whole batch and each row's text comes from
        one ``%`` of a per-schema template. Same bytes as ``encode_text``; an entry is None where
        ``encode_text`` gives None (the caller then uses the general writer for that row).
        Raises EncodeError naming the column, as ``encode_text``."""
        n = len(rows)
        text = _TEXT
        columns: list[list[str]] = []
        odd: set[int] = set()
        none = type(None)
        for (name, _prefix, enc), column in zip(self.text_columns, self.schema.columns):
            raw = [v.get(name) for v in rows]
            kinds = set(map(type, raw))
            dtype = column.type
            if dtype.is_string and kinds <= {str, none}:  # the converter would return them as given
                jvs = raw
            elif dtype.is_integer and kinds <= {int, none}:
                present: list[Any] = raw if none not in kinds else [x for x in raw if x is not None]
                lo, hi = _INT_RANGES[dtype.root]
                jvs = raw if not present or (lo <= min(present) and max(present) <= hi) else [enc(x) for x in raw]
            else:
                jvs = [enc(x) for x in raw]
            kinds = set(map(type, jvs))
            if none in kinds and len(kinds) == 2 and (write := text.get((kinds - {none}).pop())) is not None:
                columns.append(["null" if jv is None else write(jv) for jv in jvs])
                continue
            if len(kinds) == 1 and (write := text.get(kinds.pop())) is not None:
                columns.append(list(map(write, jvs)))
                continue
            col: list[str] = []
            for i, jv in enumerate(jvs):
                if jv is None:
                    col.append("null")
                    continue
                w = text.get(type(jv))
                if w is None:
                    odd.add(i)
                    col.append("")
                else:
                    col.append(w(jv))
            columns.append(col)
        template = "{" + ",".join(prefix.replace("%", "%%") + "%s" for _n, prefix, _e in self.text_columns) + "}"
        texts = list(map(template.__mod__, zip(*columns))) if columns else ["{}"] * n
        if not odd:
            try:
                return list(map(str.encode, texts))  # UTF-8
            except UnicodeEncodeError:
                pass  # a lone surrogate somewhere: find it row by row
        out: list[bytes | None] = []
        for i, t in enumerate(texts):
            if i in odd:
                out.append(None)
                continue
            try:
                out.append(t.encode("utf-8"))
            except UnicodeEncodeError:
                out.append(None)
        return out


_CODECS_BY_ID: dict[tuple[int, str, TimestampFormat], tuple[Schema, _ObjectCodec]] = {}
_CODECS: dict[tuple[Schema, str, TimestampFormat], _ObjectCodec] = {}


def _codec_for(schema: Schema, format: str, timestamp_format: TimestampFormat = TimestampFormat.SQL) -> _ObjectCodec:
    """The codec of ``schema``, cached by value: equal schemas (e.g. one rebuilt from every
    message's schema wrapper) share one codec. A second map by ``id()`` skips hashing the schema
    when the same object comes again (it holds the schema, so the id is not reused while cached)."""
    fast = (id(schema), format, timestamp_format)
    hit = _CODECS_BY_ID.get(fast)
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = (schema, format, timestamp_format)
    codec = _CODECS.get(key)
    if codec is None:
        if len(_CODECS) >= 256:
            _CODECS.clear()
        codec = _CODECS[key] = _ObjectCodec(schema, format, timestamp_format)
    if len(_CODECS_BY_ID) >= 1024:
        _CODECS_BY_ID.clear()
    _CODECS_BY_ID[fast] = (schema, codec)
    return codec


def encode_object(
    values: Mapping[str, Any],
    schema: Schema | None,
    *,
    format: str,
    timestamp_format: TimestampFormat = TimestampFormat.SQL,
    ignore_null_fields: bool = False,
) -> dict[str, Any]:
    """The JSON object of one row's values: schema columns in order (missing -> null), or, without a
    schema, the row's own keys and values. Raises EncodeError naming the column."""
    obj: dict[str, Any] = {}
    if schema is None:
        for name, value in values.items():
            try:
                obj[name] = to_json_untyped(value, timestamp_format=timestamp_format)
            except TypeError as exc:
                raise EncodeError(str(exc), format=format, field=name, value=value) from exc
    else:
        for name, enc in _codec_for(schema, format, timestamp_format).encoders:
            obj[name] = enc(values.get(name))
    if ignore_null_fields:
        obj = {k: v for k, v in obj.items() if v is not None}
    return obj


def encode_image(
    values: Mapping[str, Any], schema: Schema | None, options: JsonCodecOptions, *, format: str
) -> dict[str, Any]:
    """:func:`encode_object` with a JSON format's own ``timestamp-format.standard`` and
    ``encode.ignore-null-fields`` (the row images of debezium-json, canal-json and maxwell-json)."""
    return encode_object(
        values,
        schema,
        format=format,
        timestamp_format=options.timestamp_format_standard,
        ignore_null_fields=options.encode_ignore_null_fields,
    )


def decode_object(
    obj: Any,
    schema: Schema | None,
    *,
    format: str,
    path: str | None = None,
    fail_on_missing_field: bool = False,
) -> dict[str, Any]:
    """Values of one row from a parsed JSON object (numbers as int/Decimal).

    With a schema: the schema's columns in order, absent ones NULL (or an error with
    ``fail_on_missing_field``), other keys ignored. Without one: every key, plain JSON values.

    Raises:
        DecodeError: not an object, a missing field, or a value that does not parse; ``field`` is
            ``<path>.<column>``.
    """
    if not isinstance(obj, dict):
        raise DecodeError(f"expected a JSON object, got {type(obj).__name__}", format=format, field=path)
    if schema is None:
        return {str(k): to_plain(v) for k, v in obj.items()}
    return _codec_for(schema, format).decode_values(obj, fail_on_missing_field, format, path)


#: msgspec's JSON parser with numbers that have a fraction or an exponent as ``Decimal`` (exact),
#: as :func:`~changelake.formats.json_values.loads`: where it parses a text it gives the same
#: values; it refuses the few texts only the stdlib parser reads (``NaN``/``Infinity``, a BOM,
#: UTF-16/32, lone surrogates), which then take the row-by-row path.
_BATCH_PARSER = msgspec.json.Decoder(float_hook=Decimal)


class JsonFormat(Format):
    """Flink's ``json`` format (insert-only). See the module docstring."""

    name = "json"
    changelog_mode = INSERT_ONLY
    Options = JsonOptions
    schema_optional = True
    options: JsonOptions

    def _validate(self) -> None:
        if self.options.fail_on_missing_field and self.options.ignore_parse_errors:
            raise FormatOptionError(
                "fail-on-missing-field and ignore-parse-errors shouldn't both be true.", format=self.name
            )
        self._validate_codec()

    def _validate_codec(self) -> None:
        self._codec = (
            None if self.schema is None else _codec_for(self.schema, self.name, self.options.timestamp_format_standard)
        )

    def encode(self, row: ChangelogRow) -> bytes:
        """The row's values as one compact JSON object; the row kind is not written (insert-only)."""
        return self.encode_values(row.values)

    def encode_values(self, values: Mapping[str, Any]) -> bytes:
        """``encode`` of a row with these values: the schema's columns (missing -> null, other keys
        ignored) as one compact JSON object. Raises EncodeError naming the column."""
        codec = self._codec
        if codec is not None:
            data = codec.encode_text(values, self.options.encode_ignore_null_fields)
            if data is not None:
                return data
        obj = encode_object(
            values,
            self.schema,
            format=self.name,
            timestamp_format=self.options.timestamp_format_standard,
            ignore_null_fields=self.options.encode_ignore_null_fields,
        )
        return dumps(obj)

    def encode_values_many(self, rows: Sequence[Mapping[str, Any]]) -> list[bytes]:
        """:meth:`encode_values` of each of ``rows`` (a batch, encoded column by column): the
        same bytes, in order. Raises EncodeError naming the column, as ``encode_values``."""
        codec = self._codec
        if codec is None or self.options.encode_ignore_null_fields:
            return [self.encode_values(v) for v in rows]
        out = codec.encode_text_many(rows)
        return [self.encode_values(rows[i]) if b is None else b for i, b in enumerate(out)]

    def decode(self, data: bytes | None) -> list[ChangelogRow]:
        """One ``+I`` row per JSON object ([] for a null/empty message). Raises DecodeError."""
        return [ChangelogRow(RowKind.INSERT, values) for values in self.decode_to_values(data)]

    def decode_to_values(self, data: bytes | None) -> list[dict[str, Any]]:
        """The values of the rows :meth:`decode` returns (one dict per JSON object), without
        building the rows. Raises DecodeError as :meth:`decode`."""
        return self._decode_guarded(self._decode_values, data)

    def decode_values_many(self, datas: Sequence[bytes | None]) -> list[dict[str, Any] | None]:
        """The values of each message that holds one JSON object, for a batch (a poll of an upsert
        topic): every message parsed by msgspec (compiled; numbers with a fraction as ``Decimal``,
        as :func:`~changelake.formats.json_values.loads`), then converted column by column
        (:meth:`_ObjectCodec.decode_values_many`).

        An entry equals ``decode_to_values(data)[0]`` where it is not None. It is None for a
        message this path does not decode with certainty: null or empty, not one object, text
        msgspec refuses (malformed, or what only the stdlib parser reads: ``NaN``, a BOM, UTF-16,
        lone surrogates), a missing field with ``fail-on-missing-field``, a value that does not
        convert. For those the caller calls :meth:`decode_to_values`, which returns the rows, ``[]``
        (``ignore-parse-errors``) or raises the DecodeError, exactly as without this method.
        Without a schema every entry is None."""
        codec = self._codec
        if codec is None:
            return [None] * len(datas)
        parse = _BATCH_PARSER.decode
        present = [d for d in datas if d]  # null and empty messages: decoded alone ([] or an error)
        try:
            parsed: list[Any] = list(map(parse, present))
        except msgspec.DecodeError:
            parsed = []
            for data in present:
                try:
                    parsed.append(parse(data))
                except msgspec.DecodeError:
                    parsed.append(None)
        if len(present) == len(datas):
            objs = parsed
        else:
            it = iter(parsed)
            objs = [next(it) if d else None for d in datas]
        return codec.decode_values_many(objs, self.options.fail_on_missing_field)

    def decode_columns(self, datas: Sequence[bytes]) -> Any | None:
        """The values of ``datas`` (one JSON object per message) as ONE ``pyarrow.Table`` in the
        columnar lane's types (:func:`~changelake.changelog.change_batch.batch_arrow_schema` of
        the format's schema), read by pyarrow's JSON reader in one call with an explicit schema
        (the read types of ``debezium-json``'s batch path, chosen so that every value Arrow accepts
        is the value :meth:`decode_to_values` gives); DATE and TIMESTAMP text cast by Arrow, TIME
        and binary through the per-value decoders.

        None, for the caller to decode message by message (which raises the exact DecodeError or
        drops the record with ``ignore-parse-errors``), when: the format has no schema or has
        ``fail-on-missing-field`` or a non-SQL ``timestamp-format.standard``; a message is empty,
        not one compact object on one line (``null``, an array, a newline inside), or anything
        Arrow refuses (malformed, another JSON type, a value out of range or needing more DECIMAL
        scale, a duplicate field); a column has no batch type."""
        from changelake.changelog.change_batch import batch_arrow_schema
        from changelake.formats.arrow_values import _arrow_read_type, _temporal_in_arrow, arrow_decimals_fit, read_json_lines

        schema = self.schema
        opts = self.options
        if (schema is None or not datas or opts.fail_on_missing_field
                or opts.timestamp_format_standard is not TimestampFormat.SQL):
            return None
        joined = b"\n".join(datas)
        lines = len(datas) - 1
        # every message non-empty, on one line, starting with '{' (not ``null``, an array, ...)
        if joined[:1] != b"{" or joined.count(b"\n") != lines or joined.count(b"\n{") != lines or b"\r" in joined:
            return None
        import pyarrow as pa

        plan = self.__dict__.get("_column_plan")
        if plan is None:
            target = batch_arrow_schema(schema)
            read_types = [_arrow_read_type(c.type) for c in schema.columns]
            if target is None or any(t is None for t in read_types):
                return None
            read_schema = pa.schema([pa.field(c.name, t) for c, t in zip(schema.columns, read_types)])
            plan = self.__dict__["_column_plan"] = (target, read_schema)
        target, read_schema = plan
        table = read_json_lines(joined, read_schema, len(datas))  # NaN/Inf tokens, Arrow's refusals, UTF-8
        if table is None:
            return None
        import pyarrow.compute as pc

        columns = []
        try:
            for column, field, read_type in zip(schema.columns, target, read_schema.types):
                array = table.column(column.name).combine_chunks()
                if column.type.is_integer:
                    lo, hi = _INT_RANGES[column.type.root]
                    bounds = pc.min_max(array).as_py()
                    if bounds["min"] is not None and (bounds["min"] < lo or bounds["max"] > hi):
                        return None
                elif pa.types.is_decimal(read_type) and not arrow_decimals_fit(array, read_type):
                    return None  # more digits left of the point than the column takes
                if pa.types.is_string(read_type) and not column.type.is_string:
                    fast = _temporal_in_arrow(array, column.type, field.type)
                    if fast is None:
                        if column.type.root is TypeRoot.TIME:
                            return None  # TIME: the per-message path (its text form)
                        decode = json_decoder_for(column.type, column.name, format=self.name)
                        fast = pa.array([None if v is None else decode(v) for v in array.to_pylist()], type=field.type)
                    array = fast
                elif array.type != field.type:
                    array = array.cast(field.type, safe=column.type.root is not TypeRoot.FLOAT)
                columns.append(array)
        except (DecodeError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            return None
        return pa.Table.from_arrays(columns, schema=target)

    def decode_one_value(self, data: bytes | None) -> dict[str, Any] | None:
        """:meth:`decode_values_many` of one message (parsed by msgspec, converted row-wise by the
        column converters): ``decode_to_values(data)[0]`` where not None, None where that one
        must decide (see :meth:`decode_values_many`)."""
        codec = self._codec
        if codec is None or not data:
            return None
        try:
            obj = _BATCH_PARSER.decode(data)
        except msgspec.DecodeError:
            return None
        if type(obj) is not dict:
            return None
        try:
            return codec.decode_values(obj, self.options.fail_on_missing_field)
        except DecodeError:
            return None

    def _decode_values(self, data: bytes) -> list[dict[str, Any]]:
        try:
            doc = loads(data)
        except ValueError as exc:
            raise self._corrupt(f"malformed JSON: {exc}", data) from exc
        codec = self._codec
        if codec is not None and type(doc) is dict:
            return [codec.decode_values(doc, self.options.fail_on_missing_field)]
        objects = doc if isinstance(doc, list) else [doc]
        return [
            decode_object(obj, self.schema, format=self.name, fail_on_missing_field=self.options.fail_on_missing_field)
            for obj in objects
        ]
