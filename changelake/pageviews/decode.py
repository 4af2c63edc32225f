"""Decoding a batch of ``pageviews`` records in one columnar pass (Arrow's JSON reader), with the
source's json format record by record as the exact fallback, and aggregating it as one mini-batch."""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from changelake.changelog import ChangelogRow, RowKind
from changelake.changelog.aggregate import GroupAggregate

__all__ = ["decode_pageviews_batch", "aggregate_messages"]

_ARROW_JSON_SCHEMA = pa.schema(
    [("user_id", pa.int64()), ("page_id", pa.int64()), ("viewtime", pa.string()), ("user_region", pa.string())]
)
_ARROW_JSON_PARSE = pajson.ParseOptions(explicit_schema=_ARROW_JSON_SCHEMA, unexpected_field_behavior="ignore")
_TIMESTAMP_SHAPE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?$"


def decode_pageviews_batch(values: Sequence[bytes | None]) -> pa.Table | None:
    """Record values of the ``pageviews`` topic (json, one object per record, Flink's json format
    with default options) decoded in one pass by Arrow's JSON reader: a table with ``user_id``
    int64 and ``user_region`` string, one row per value, in order.

    Returns None when the batch is not one that the json format would decode to exactly the same
    rows: a null or empty value, a value that is not a single ``{...}`` object on one line, a
    column of another JSON type (``"1"`` for BIGINT), an integer outside BIGINT, invalid UTF-8, a
    ``viewtime`` that is not a valid ``yyyy-MM-dd HH:mm:ss[.f]``. The caller then decodes record
    by record with the source's json format, which accepts or raises its DecodeError (naming the
    topic, partition and offset) exactly as the row path does.
    """
    n = len(values)
    if n == 0 or None in values:
        return None
    joined = b"\n".join(values)  # type: ignore[arg-type]  # None was ruled out above
    # one object per line, nothing between them: every separator sits between "}" and "{"
    if not (
        joined[:1] == b"{" and joined[-1:] == b"}" and joined.count(b"\n") == n - 1
        and joined.count(b"}\n{") == n - 1 and b"\r" not in joined
    ):
        return None
    if not joined.isascii():
        try:
            joined.decode("utf-8")  # the json format refuses invalid UTF-8 anywhere, field names too
        except UnicodeDecodeError:
            return None
    try:
        table = pajson.read_json(
            pa.BufferReader(joined),
            read_options=pajson.ReadOptions(use_threads=False, block_size=len(joined) + 1),
            parse_options=_ARROW_JSON_PARSE,
        )
        if table.num_rows != n:
            return None
        table.validate(full=True)  # UTF-8 of every string
        viewtime = table.column("viewtime")
        if viewtime.null_count < len(viewtime):
            shaped = pc.match_substring_regex(viewtime, _TIMESTAMP_SHAPE)
            if pc.any(pc.invert(shaped)).as_py() or pc.any(pc.starts_with(viewtime, "0000")).as_py():
                return None
            pc.cast(pc.utf8_slice_codeunits(viewtime, 0, 19), pa.timestamp("s"))  # valid dates and times
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError, ValueError):
        return None
    return table.select(["user_id", "user_region"])


def _decode_rows_to_table(source: Any, msgs: Sequence[Any]) -> tuple[pa.Table, list[RowKind]]:
    """Record-by-record decoding through the source's format (exact errors), as a table."""
    rows = [r for m in msgs for r in source.decode_message(m)]
    table = pa.table(
        {
            "user_id": pa.array([r.values.get("user_id") for r in rows], pa.int64()),
            "user_region": pa.array([r.values.get("user_region") for r in rows], pa.string()),
        }
    )
    return table, [r.kind for r in rows]


def aggregate_messages(agg: GroupAggregate, source: Any, msgs: Sequence[Any]) -> list[ChangelogRow]:
    """Decode a batch of messages (columnar when possible) and aggregate it as one mini-batch."""
    table = decode_pageviews_batch([m.value() for m in msgs])
    if table is not None:
        return agg.process_arrow(table)
    table, kinds = _decode_rows_to_table(source, msgs)
    return agg.process_arrow(table, kinds)
