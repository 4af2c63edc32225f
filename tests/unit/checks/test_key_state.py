"""compare_key_state: DuckDB full outer join of lake vs source key state."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from changelake.changelog.row import ChangelogRow
from changelake.changelog.schema import Schema, TableId
from changelake.changelog.types import DataType, parse_data_type
from changelake.checks import KeyStateCheckError, compare_key_state
from changelake.connectors.iceberg import IcebergSink, IcebergSinkOptions, read_table
from changelake.connectors.iceberg.types import rows_to_arrow

UTC = dt.timezone.utc
SCHEMA = Schema.of(
    [
        ("id", DataType.decimal(20, 0, nullable=False)),
        ("name", parse_data_type("STRING")),
        ("frac", DataType.decimal(5, 5)),
        ("blob", parse_data_type("BYTES")),
        ("at", parse_data_type("TIMESTAMP_LTZ(6)")),
        ("wall", parse_data_type("TIMESTAMP(6)")),
        ("dur", parse_data_type("TIME(0)")),
        ("score", parse_data_type("FLOAT")),
    ],
    ["id"],
)


def base_rows() -> list[dict[str, Any]]:
    return [
        {
            "id": Decimal("18446744073709551615"),
            "name": "Zoë 😀",
            "frac": Decimal("0.12345"),
            "blob": b"\x00\x01",
            "at": dt.datetime(2024, 1, 1, 12, 0, 0, 1, tzinfo=UTC),
            "wall": dt.datetime(2024, 1, 1, 12, 0, 0, 1),
            "dur": dt.timedelta(hours=-838, minutes=-59, seconds=-59),
            "score": 0.1,
        },
        {"id": Decimal(1), "name": None, "frac": None, "blob": None, "at": None, "wall": None, "dur": None, "score": None},
        {
            "id": Decimal(2),
            "name": "b",
            "frac": Decimal("0.00001"),
            "blob": b"",
            "at": dt.datetime(1970, 1, 1, tzinfo=UTC),
            "wall": dt.datetime(1000, 1, 1),
            "dur": dt.timedelta(0),
            "score": -2.5,
        },
    ]


def arrow(rows: list[dict[str, Any]]) -> pa.Table:
    return rows_to_arrow(rows, SCHEMA)


def test_equal_tables_pass() -> None:
    result = compare_key_state(arrow(base_rows()), arrow(base_rows()), ["id"])
    assert result.passed and result.schema_matches
    assert (result.rows_source, result.rows_lake) == (3, 3)
    assert (result.missing_in_lake, result.extra_in_lake, result.value_mismatches) == (0, 0, 0)
    assert result.columns == ["name", "frac", "blob", "at", "wall", "dur", "score"]


def test_missing_row_is_caught() -> None:
    result = compare_key_state(arrow(base_rows()[1:]), arrow(base_rows()), ["id"])
    assert not result.passed
    assert (result.missing_in_lake, result.extra_in_lake, result.value_mismatches) == (1, 0, 0)
    assert result.sample_missing == [{"id": Decimal("18446744073709551615")}]


def test_extra_row_is_caught() -> None:
    result = compare_key_state(arrow(base_rows()), arrow(base_rows()[:2]), ["id"])
    assert not result.passed
    assert (result.missing_in_lake, result.extra_in_lake, result.value_mismatches) == (0, 1, 0)
    assert result.sample_extra == [{"id": Decimal(2)}]


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("name", "Zoe 😀"),
        ("name", None),  # value vs NULL
        ("frac", Decimal("0.12346")),  # one unit in the last place of DECIMAL(5, 5)
        ("blob", b"\x00\x02"),
        ("at", dt.datetime(2024, 1, 1, 12, 0, 0, 2, tzinfo=UTC)),  # one microsecond
        ("wall", dt.datetime(2024, 1, 1, 12, 0, 0, 0)),
        ("dur", dt.timedelta(hours=-838, minutes=-59, seconds=-58)),
        ("score", 0.2),
    ],
)
def test_single_changed_cell_is_caught(column: str, value: Any) -> None:
    lake_rows = base_rows()
    lake_rows[0][column] = value
    result = compare_key_state(arrow(lake_rows), arrow(base_rows()), ["id"])
    assert not result.passed
    assert (result.missing_in_lake, result.extra_in_lake, result.value_mismatches) == (0, 0, 1)
    assert result.mismatches_by_column == {column: 1}
    [sample] = result.sample_mismatches
    assert sample["key"] == {"id": Decimal("18446744073709551615")}
    assert list(sample["columns"]) == [column]


def test_null_equals_null_and_key_at_bigint_unsigned_max() -> None:
    lake_rows = base_rows()
    lake_rows[0]["id"] = Decimal("18446744073709551614")
    result = compare_key_state(arrow(lake_rows), arrow(base_rows()), ["id"])
    assert (result.missing_in_lake, result.extra_in_lake) == (1, 1)  # exact: no float rounding of the key


def test_decimals_of_different_scale_compare_by_value() -> None:
    source = pa.table({"id": [1, 2], "p": pa.array([Decimal("1.50"), Decimal("2.00")], pa.decimal128(10, 2))})
    lake = pa.table({"id": [1, 2], "p": pa.array([Decimal("1.5000"), Decimal("2.0001")], pa.decimal128(12, 4))})
    result = compare_key_state(lake, source, ["id"])
    assert result.value_mismatches == 1 and result.sample_mismatches[0]["key"] == {"id": 2}


def test_timestamptz_vs_naive_timestamp_is_deliberate() -> None:
    lake = pa.table({"id": [1], "at": pa.array([dt.datetime(2024, 1, 1, 10, 0, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))})
    naive = pa.table({"id": [1], "at": pa.array([dt.datetime(2024, 1, 1, 10, 0)], pa.timestamp("us"))})
    utc = compare_key_state(lake, naive, ["id"])
    assert utc.passed
    assert utc.alignments == {"at": "naive side read in UTC; compared as UTC instants"}
    berlin = compare_key_state(lake, naive, ["id"], naive_timezone="Europe/Berlin")  # 10:00 CET = 09:00Z
    assert berlin.value_mismatches == 1
    shifted = pa.table({"id": [1], "at": pa.array([dt.datetime(2024, 1, 1, 11, 0)], pa.timestamp("us"))})
    assert compare_key_state(lake, shifted, ["id"], naive_timezone="+01:00").passed


def test_timestamp_units_are_aligned() -> None:
    lake = pa.table({"id": [1], "t": pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 5000)], pa.timestamp("us"))})
    source = pa.table({"id": [1], "t": pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 5000)], pa.timestamp("ms"))})
    assert compare_key_state(lake, source, ["id"]).passed


def test_time_text_vs_duration() -> None:
    lake = pa.table({"id": [1, 2], "t": pa.array(["-838:59:59.000", "01:02:03.5"], pa.large_string())})
    source = pa.table({"id": [1, 2], "t": pa.array([dt.timedelta(hours=-838, minutes=-59, seconds=-59), dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=500001)], pa.duration("us"))})
    result = compare_key_state(lake, source, ["id"])
    assert result.value_mismatches == 1 and result.sample_mismatches[0]["key"] == {"id": 2}
    assert result.alignments["t"] == "TIME compared as signed microseconds"


def test_float_vs_double_compared_at_float_precision() -> None:
    lake = pa.table({"id": [1], "f": pa.array([0.1], pa.float32())})
    source = pa.table({"id": [1], "f": pa.array([0.1], pa.float64())})
    assert compare_key_state(lake, source, ["id"]).passed


def test_composite_keys_and_quoted_names() -> None:
    source = pa.table({'re"gion': ["eu", "eu", "us"], "id x": [1, 2, 1], "v": ["a", "b", "c"]})
    lake = pa.table({'re"gion': ["eu", "us", "us"], "id x": [1, 1, 2], "v": ["a", "c", "d"]})
    result = compare_key_state(lake, source, ['re"gion', "id x"])
    assert result.sample_missing == [{'re"gion': "eu", "id x": 2}]
    assert result.sample_extra == [{'re"gion': "us", "id x": 2}]
    assert result.value_mismatches == 0


def test_columns_on_one_side_are_reported() -> None:
    source = pa.table({"id": [1], "v": ["a"], "new_col": [1]})
    lake = pa.table({"id": [1], "v": ["a"], "dropped": ["x"]})
    result = compare_key_state(lake, source, ["id"])
    assert result.passed and not result.schema_matches
    assert result.columns_only_in_source == ["new_col"] and result.columns_only_in_lake == ["dropped"]


def test_selected_columns_only() -> None:
    source = pa.table({"id": [1], "v": ["a"], "w": ["x"]})
    lake = pa.table({"id": [1], "v": ["a"], "w": ["y"]})
    assert compare_key_state(lake, source, ["id"], columns=["v"]).passed
    assert not compare_key_state(lake, source, ["id"]).passed


def test_duplicate_keys_in_lake_fail() -> None:
    source = pa.table({"id": [1, 2], "v": ["a", "b"]})
    lake = pa.table({"id": [1, 1, 2], "v": ["a", "a", "b"]})
    result = compare_key_state(lake, source, ["id"])
    assert result.duplicate_keys_lake == 1 and not result.passed


def test_sample_size_limits_samples() -> None:
    source = pa.table({"id": list(range(100)), "v": ["a"] * 100})
    lake = pa.table({"id": [], "v": []}, schema=source.schema)
    result = compare_key_state(lake, source, ["id"], sample_size=3)
    assert result.missing_in_lake == 100 and result.sample_missing == [{"id": 0}, {"id": 1}, {"id": 2}]
    meta = result.metadata()
    assert meta["missing_in_lake"] == 100 and meta["passed"] is False


def test_all_null_column_aligned() -> None:
    source = pa.table({"id": [1], "v": pa.array([None], pa.null())})
    lake = pa.table({"id": [1], "v": pa.array([None], pa.large_string())})
    assert compare_key_state(lake, source, ["id"]).passed


# -- Negative tests ------------------------------------------------------------------------------


def test_errors() -> None:
    t = pa.table({"id": [1], "v": ["a"]})
    with pytest.raises(KeyStateCheckError, match="needs a primary key"):
        compare_key_state(t, t, [])
    with pytest.raises(KeyStateCheckError, match=r"primary-key column\(s\) \['k'\] missing from the source table"):
        compare_key_state(t, t, ["k"])
    with pytest.raises(KeyStateCheckError, match=r"column\(s\) \['w'\] requested for comparison are not on both sides"):
        compare_key_state(t, t, ["id"], columns=["w"])
    ts = pa.table({"id": [1], "v": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us"))})
    with pytest.raises(KeyStateCheckError, match="column 'v': cannot align source type string with lake type timestamp"):
        compare_key_state(ts, t, ["id"])


# -- with the real sink --------------------------------------------------------------------------


def test_lake_written_by_sink_matches_source_rows(tmp_path: Path) -> None:
    options = IcebergSinkOptions.sql(f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh")
    table_id = TableId("shop", "t")
    rows = base_rows()
    with IcebergSink(options) as sink:
        sink.write(table_id, [ChangelogRow.insert(r) for r in rows], SCHEMA, {"t/0": 3})
        result = compare_key_state(read_table(options, table_id), arrow(rows), SCHEMA.primary_key)
        assert result.passed, result.metadata()
        sink.write(table_id, [ChangelogRow.delete({"id": Decimal(2)})], SCHEMA, {"t/0": 4})
    after = compare_key_state(read_table(options, table_id), arrow(rows), SCHEMA.primary_key)
    assert after.missing_in_lake == 1 and after.sample_missing == [{"id": Decimal(2)}]
