"""Key-state comparison of a lake table with its source table, in DuckDB (no Dagster here).

Both sides arrive as Arrow tables (lake: a full scan of the lake table; source: MySQL rows converted with
:func:`changelake.connectors.lake.arrow.rows_to_arrow`). DuckDB joins them in process with a
FULL OUTER JOIN on the primary key and compares every other column NULL-safely
(``IS DISTINCT FROM``). Arrow tables are registered as DuckDB relations; only identifiers, quoted
with double quotes, are written into the SQL, never data.

Before comparing, each column pair is aligned so that equality is exact and deliberate:

=====================================  ==========================================================
column types (source / lake)           compared as
=====================================  ==========================================================
same type, or int widths, decimals     as is (DuckDB compares decimals exactly, any precision/scale)
timestamp vs timestamp (both naive)    wall clock, microseconds
timestamptz vs timestamptz             instants, microseconds
naive vs tz-aware timestamp            the naive side is read in ``naive_timezone`` (default UTC,
                                       as the sink stores TIMESTAMP_LTZ in UTC), then instants
float32 on either side                 both cast to float32 (MySQL FLOAT holds float32 precision)
TIME: duration/time vs text            both as signed microseconds (text ``[-]HH:mm:ss[.f]``)
decimal vs text (DECIMAL(p > 38))      both as text; the decimal side printed with its scale
anything else vs text                  both as text (Arrow's cast)
all-NULL column (Arrow ``null``)       cast to the other side's type
=====================================  ==========================================================

Timestamps with a unit finer than microseconds are truncated to microseconds (MySQL has none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from changelake.checks.errors import KeyStateCheckError

__all__ = ["KeyStateComparison", "compare_key_state", "next_step"]

_PRESENT = "__changelake_present"
_TIME_RE = re.compile(r"^(-)?(\d+):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")


@dataclass(frozen=True)
class KeyStateComparison:
    """Result of :func:`compare_key_state`. Counts are rows (or keys); samples are key dicts.

    Attributes:
        primary_key: key columns joined on.
        columns: non-key columns compared (present on both sides).
        rows_source, rows_lake: rows on each side.
        missing_in_lake: source keys absent from the lake.
        extra_in_lake: lake keys absent from the source.
        value_mismatches: keys on both sides with at least one differing column.
        mismatches_by_column: column -> keys where it differs.
        duplicate_keys_source, duplicate_keys_lake: keys held by more than one row on that side
            (a correct upsert sink never produces one in the lake).
        sample_missing, sample_extra: up to ``sample_size`` keys (column -> value), key order.
        sample_mismatches: up to ``sample_size`` of ``{"key": {...}, "columns": {col: {"source": v, "lake": v}}}``.
        columns_only_in_source, columns_only_in_lake: columns not compared because one side lacks
            them (a column dropped in MySQL stays in the lake, by design of the sink).
        alignments: column -> how its two sides were cast before comparing (only when they were).
    """

    primary_key: list[str]
    columns: list[str]
    rows_source: int
    rows_lake: int
    missing_in_lake: int
    extra_in_lake: int
    value_mismatches: int
    mismatches_by_column: dict[str, int] = field(default_factory=dict)
    duplicate_keys_source: int = 0
    duplicate_keys_lake: int = 0
    sample_missing: list[dict[str, Any]] = field(default_factory=list)
    sample_extra: list[dict[str, Any]] = field(default_factory=list)
    sample_mismatches: list[dict[str, Any]] = field(default_factory=list)
    columns_only_in_source: list[str] = field(default_factory=list)
    columns_only_in_lake: list[str] = field(default_factory=list)
    alignments: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when every key is on both sides exactly once with equal values in every compared column.

        Columns present on one side only do not fail the comparison; see :attr:`schema_matches`.
        """
        return (
            self.missing_in_lake == 0
            and self.extra_in_lake == 0
            and self.value_mismatches == 0
            and self.duplicate_keys_source == 0
            and self.duplicate_keys_lake == 0
        )

    @property
    def schema_matches(self) -> bool:
        """True when no source column is missing from the lake (lake-only columns are allowed)."""
        return not self.columns_only_in_source

    @property
    def differing_keys(self) -> list[dict[str, Any]]:
        """The sampled keys that differ in any way (missing, extra or mismatched)."""
        return [*self.sample_missing, *self.sample_extra, *(m["key"] for m in self.sample_mismatches)]

    def metadata(self) -> dict[str, Any]:
        """A JSON-friendly summary (for Dagster check metadata); values are str/int/list/dict."""
        return {
            "passed": self.passed,
            "rows_source": self.rows_source,
            "rows_lake": self.rows_lake,
            "missing_in_lake": self.missing_in_lake,
            "extra_in_lake": self.extra_in_lake,
            "value_mismatches": self.value_mismatches,
            "mismatches_by_column": dict(self.mismatches_by_column),
            "duplicate_keys_source": self.duplicate_keys_source,
            "duplicate_keys_lake": self.duplicate_keys_lake,
            "sample_missing": _jsonable(self.sample_missing),
            "sample_extra": _jsonable(self.sample_extra),
            "sample_mismatches": _jsonable(self.sample_mismatches),
            "columns_only_in_source": list(self.columns_only_in_source),
            "columns_only_in_lake": list(self.columns_only_in_lake),
            "alignments": dict(self.alignments),
        }


    def samples_markdown(self, limit: int = 10) -> str:
        """Up to ``limit`` sample differing keys as a Markdown table: ``key | difference | column |
        MySQL | lake`` (a key missing from the lake shows ``(row)`` / ``(absent)``, an extra one the
        reverse; a differing value one line per column). Empty when nothing differs."""
        lines: list[tuple[str, str, str, str, str]] = []
        for m in self.sample_mismatches:
            for col, pair in (m.get("columns") or {}).items():
                lines.append((_key_text(m["key"]), "value differs", col, _cell(pair.get("source")), _cell(pair.get("lake"))))
        lines += [(_key_text(k), "missing in lake", "", "(row)", "(absent)") for k in self.sample_missing]
        lines += [(_key_text(k), "extra in lake", "", "(absent)", "(row)") for k in self.sample_extra]
        if not lines:
            return ""
        out = ["| key | difference | column | MySQL | lake |", "|---|---|---|---|---|"]
        out += ["| " + " | ".join(_md_escape(v) for v in line) + " |" for line in lines[:limit]]
        shown = len(lines[:limit])
        total = self.missing_in_lake + self.extra_in_lake + self.value_mismatches
        if total > shown:
            out.append(f"\n{shown} sample line(s) of {total} differing key(s).")
        return "\n".join(out)


def next_step(passed: bool, duplicate_keys_lake: int = 0, *, mysql_table_exists: bool = True) -> str:
    """What to do about a failed key-state check (empty when it passed); ``mysql_table_exists``
    False: MySQL has no such table now, the lake table still holds rows."""
    if passed:
        return ""
    if not mysql_table_exists:
        return ("The MySQL table no longer exists (DROP TABLE or RENAME TABLE) but its lake table still holds rows: "
                "run the pipelines until caught up (Pipeline 1, then Pipeline 2 with "
                "changelake pipeline run FILE --until-caught-up), which applies the DROP or RENAME and empties the "
                "lake table, then re-check. If it persists, the drop was not captured (e.g. under DROP DATABASE, or "
                "before the pipeline read the binlog): empty the lake table by hand.")
    if duplicate_keys_lake:
        return ("The lake holds a primary key more than once: the table's primary key in the lake differs from the "
                "transform's primary-keys, or two pipelines write the table; fix the key, then re-snapshot.")
    return ("Run the pipelines until caught up (changelake pipeline run FILE --until-caught-up for Pipeline 1, then "
            "Pipeline 2), then re-check. If it persists: a schema change MySQL made without binlog rows (ADD COLUMN "
            "... DEFAULT) or rows written with binlog_format other than ROW; re-snapshot by running Pipeline 1 under "
            "a new pipeline.name.")


def _key_text(key: Any) -> str:
    if isinstance(key, dict):
        return ", ".join(f"{k}={_cell(v)}" for k, v in key.items())
    return _cell(key)


def _cell(value: Any) -> str:
    text = "NULL" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def compare_key_state(
    lake: pa.Table,
    source: pa.Table,
    primary_key: Sequence[str],
    columns: Sequence[str] | None = None,
    sample_size: int = 10,
    *,
    naive_timezone: str = "UTC",
) -> KeyStateComparison:
    """Compare the key state of ``lake`` with ``source`` (full outer join on ``primary_key``).

    Args:
        lake: the lake table's rows (e.g. :func:`changelake.connectors.iceberg.read_table`).
        source: the source table's rows, e.g. MySQL's, as Arrow.
        primary_key: key column names (non-empty, present on both sides).
        columns: non-key columns to compare; None compares every column present on both sides.
        sample_size: keys listed per kind of difference (>= 0).
        naive_timezone: zone of naive timestamps compared with tz-aware ones (IANA name or
            ``+HH:MM``); default ``UTC``.

    Returns:
        A :class:`KeyStateComparison` (``.passed``, counts, sample keys).

    Raises:
        KeyStateCheckError: no primary key, a key column or a requested column is missing on a
            side, or a column pair cannot be aligned (names the column and both types).
    """
    pk = list(primary_key)
    if not pk:
        raise KeyStateCheckError("compare_key_state needs a primary key (got none)")
    for side, table in (("source", source), ("lake", lake)):
        missing = [k for k in pk if k not in table.column_names]
        if missing:
            raise KeyStateCheckError(f"primary-key column(s) {missing} missing from the {side} table", column=missing[0])
    common = [c for c in source.column_names if c in lake.column_names and c not in pk]
    only_source = [c for c in source.column_names if c not in lake.column_names]
    only_lake = [c for c in lake.column_names if c not in source.column_names]
    if columns is None:
        compared = common
    else:
        absent = [c for c in columns if c not in source.column_names or c not in lake.column_names]
        if absent:
            raise KeyStateCheckError(f"column(s) {absent} requested for comparison are not on both sides", column=absent[0])
        compared = [c for c in columns if c not in pk]

    src_cols, lake_cols, alignments = {}, {}, {}
    for name in [*pk, *compared]:
        s, l, note = _align(source.column(name), lake.column(name), name, naive_timezone)
        src_cols[name], lake_cols[name] = s, l
        if note:
            alignments[name] = note
    src = pa.table({**src_cols, _PRESENT: pa.repeat(True, source.num_rows)})
    lk = pa.table({**lake_cols, _PRESENT: pa.repeat(True, lake.num_rows)})

    with duckdb.connect(":memory:") as con:
        con.register("src", src)
        con.register("lake", lk)
        return _compare(con, pk, compared, source.num_rows, lake.num_rows, sample_size, only_source, only_lake, alignments)


def _q(name: str) -> str:
    """A DuckDB identifier in double quotes (embedded quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def _compare(
    con: duckdb.DuckDBPyConnection,
    pk: list[str],
    compared: list[str],
    rows_source: int,
    rows_lake: int,
    sample_size: int,
    only_source: list[str],
    only_lake: list[str],
    alignments: dict[str, str],
) -> KeyStateComparison:
    on = " AND ".join(f"s.{_q(k)} = l.{_q(k)}" for k in pk)
    keys = ", ".join(f"COALESCE(s.{_q(k)}, l.{_q(k)}) AS {_q(k)}" for k in pk)
    diffs = "".join(f", (s.{_q(c)} IS DISTINCT FROM l.{_q(c)}) AS {_q('d' + str(i))}" for i, c in enumerate(compared))
    values = "".join(f", s.{_q(c)} AS {_q('s' + str(i))}, l.{_q(c)} AS {_q('l' + str(i))}" for i, c in enumerate(compared))
    con.execute(
        f"CREATE TEMP TABLE joined AS SELECT s.{_q(_PRESENT)} AS s_present, l.{_q(_PRESENT)} AS l_present, "
        f"{keys}{diffs}{values} FROM src s FULL OUTER JOIN lake l ON {on}"
    )
    any_diff = " OR ".join(_q(f"d{i}") for i in range(len(compared))) or "FALSE"
    both = "s_present AND l_present"
    per_column = "".join(f", count(*) FILTER (WHERE {both} AND {_q('d' + str(i))})" for i in range(len(compared)))
    counts = con.execute(
        "SELECT count(*) FILTER (WHERE l_present IS NULL), count(*) FILTER (WHERE s_present IS NULL), "
        f"count(*) FILTER (WHERE {both} AND ({any_diff})){per_column} FROM joined"
    ).fetchone()
    assert counts is not None
    missing, extra, mismatched = int(counts[0]), int(counts[1]), int(counts[2])
    by_column = {c: int(n) for c, n in zip(compared, counts[3:]) if n}

    key_list = ", ".join(_q(k) for k in pk)
    limit = max(0, int(sample_size))

    def sample(where: str) -> list[dict[str, Any]]:
        rows = con.execute(f"SELECT {key_list} FROM joined WHERE {where} ORDER BY {key_list} LIMIT ?", [limit]).fetchall()
        return [dict(zip(pk, r)) for r in rows]

    cursor = con.execute(f"SELECT * FROM joined WHERE {both} AND ({any_diff}) ORDER BY {key_list} LIMIT ?", [limit])
    names = [d[0] for d in cursor.description or []]
    mismatch_rows = [dict(zip(names, r)) for r in cursor.fetchall()]
    sample_mismatches = [
        {
            "key": {k: r[k] for k in pk},
            "columns": {c: {"source": r[f"s{i}"], "lake": r[f"l{i}"]} for i, c in enumerate(compared) if r[f"d{i}"]},
        }
        for r in mismatch_rows
    ]
    dup_sql = "SELECT count(*) FROM (SELECT 1 FROM {t} GROUP BY " + key_list + " HAVING count(*) > 1)"
    dup_source = con.execute(dup_sql.format(t="src")).fetchone()
    dup_lake = con.execute(dup_sql.format(t="lake")).fetchone()
    return KeyStateComparison(
        primary_key=pk,
        columns=compared,
        rows_source=rows_source,
        rows_lake=rows_lake,
        missing_in_lake=missing,
        extra_in_lake=extra,
        value_mismatches=mismatched,
        mismatches_by_column=by_column,
        duplicate_keys_source=int(dup_source[0]) if dup_source else 0,
        duplicate_keys_lake=int(dup_lake[0]) if dup_lake else 0,
        sample_missing=sample("l_present IS NULL"),
        sample_extra=sample("s_present IS NULL"),
        sample_mismatches=sample_mismatches,
        columns_only_in_source=only_source,
        columns_only_in_lake=only_lake,
        alignments=alignments,
    )


# -- alignment of column pairs -------------------------------------------------------------------

ArrowColumn = Any  # pyarrow.ChunkedArray (pyarrow ships no type information)


def _align(s: ArrowColumn, l: ArrowColumn, name: str, naive_tz: str) -> tuple[ArrowColumn, ArrowColumn, str | None]:
    st, lt = s.type, l.type
    if pa.types.is_null(st) and not pa.types.is_null(lt):
        return s.cast(lt), l, None
    if pa.types.is_null(lt) and not pa.types.is_null(st):
        return s, l.cast(st), None
    try:
        if pa.types.is_timestamp(st) or pa.types.is_timestamp(lt):
            return _align_timestamps(s, l, naive_tz)
        if _is_time_like(st) or _is_time_like(lt):
            return _time_micros(s), _time_micros(l), "TIME compared as signed microseconds"
        if pa.types.is_float32(st) or pa.types.is_float32(lt):
            if st != lt:
                return s.cast(pa.float32()), l.cast(pa.float32()), "compared as FLOAT (float32)"
            return s, l, None
        if _is_text(st) != _is_text(lt):
            return s.cast(pa.large_string()), l.cast(pa.large_string()), f"{st} vs {lt} compared as text"
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise KeyStateCheckError(
            f"column {name!r}: cannot align source type {st} with lake type {lt}: {exc}", column=name
        ) from exc
    return s, l, None


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_time_like(t: pa.DataType) -> bool:
    return bool(pa.types.is_duration(t) or pa.types.is_time(t))


def _align_timestamps(s: ArrowColumn, l: ArrowColumn, naive_tz: str) -> tuple[ArrowColumn, ArrowColumn, str | None]:
    st, lt = s.type, l.type
    if not (pa.types.is_timestamp(st) and pa.types.is_timestamp(lt)):
        raise ValueError(f"a timestamp can only be compared with a timestamp, not {st if pa.types.is_timestamp(lt) else lt}")
    s_aware, l_aware = st.tz is not None, lt.tz is not None
    note = None
    if s_aware != l_aware:
        note = f"naive side read in {naive_tz}; compared as UTC instants"
        if not s_aware:
            s = _assume_timezone(s, naive_tz)
        else:
            l = _assume_timezone(l, naive_tz)
        s_aware = l_aware = True
    target = pa.timestamp("us", tz="UTC") if s_aware else pa.timestamp("us")
    if st.unit == "ns" or lt.unit == "ns":
        note = (note + "; " if note else "") + "nanoseconds truncated to microseconds"
    s = s.cast(target, safe=False)
    l = l.cast(target, safe=False)
    return s, l, note


_OFFSET_RE = re.compile(r"^([+-])(\d{2}):(\d{2})$")


def _assume_timezone(column: ArrowColumn, zone: str) -> ArrowColumn:
    """Naive timestamps read in ``zone`` (IANA name or ``+HH:MM``) as UTC instants. A fixed offset
    is applied by arithmetic: pyarrow < 20 (pinned by pypaimon 2.1) cannot look ``+HH:MM`` up."""
    m = _OFFSET_RE.match(zone)
    if m is None:
        return pc.assume_timezone(column, zone)
    sign, hours, minutes = m.groups()
    offset_us = (int(hours) * 60 + int(minutes)) * 60_000_000 * (1 if sign == "+" else -1)
    micros = column.cast(pa.timestamp("us"), safe=False).cast(pa.int64())
    return pc.subtract(micros, offset_us).cast(pa.timestamp("us", tz="UTC"))


def _time_micros(column: ArrowColumn) -> ArrowColumn:
    """TIME values (duration, time64/32 or ``[-]HH:mm:ss[.f]`` text) as int64 microseconds."""
    t = column.type
    if pa.types.is_duration(t):
        return column.cast(pa.duration("us"), safe=False).cast(pa.int64())
    if pa.types.is_time(t):
        return column.cast(pa.time64("us"), safe=False).cast(pa.int64())
    if _is_text(t):
        return pa.chunked_array([pa.array([_parse_time(v) for v in column.to_pylist()], pa.int64())])
    raise ValueError(f"{t} is not a TIME representation")


def _parse_time(text: str | None) -> int | None:
    if text is None:
        return None
    m = _TIME_RE.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a TIME value [-]HH:mm:ss[.f]")
    sign, h, mi, sec, frac = m.groups()
    micros = ((int(h) * 60 + int(mi)) * 60 + int(sec)) * 1_000_000 + int((frac or "0").ljust(6, "0")[:6])
    return -micros if sign else micros


def _jsonable(value: Any) -> Any:
    """Samples with values made JSON-friendly (str for decimals, dates, bytes as hex)."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    return str(value)
