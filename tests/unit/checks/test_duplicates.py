"""Primary-key uniqueness in DuckDB."""

import pyarrow as pa
import pytest

from changelake.checks.duplicates import find_duplicate_keys
from changelake.checks.errors import CheckError


def test_unique_keys_pass():
    result = find_duplicate_keys(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), ["id"])
    assert result.passed and result.rows == 3 and result.sample == []


def test_duplicate_composite_keys_are_counted_and_sampled():
    table = pa.table({"k1": [1, 1, 1, 2, 2], "k2": ["x", "x", "x", "y", "z"], "n": [1, 2, 3, 4, 5]})
    result = find_duplicate_keys(table, ["k1", "k2"])
    assert not result.passed
    assert (result.duplicate_keys, result.extra_rows) == (1, 2)
    assert result.sample == [{"k1": 1, "k2": "x", "count": 3}]


def test_an_unknown_key_column_is_named():
    with pytest.raises(CheckError, match=r"\['nope'\] not in the table"):
        find_duplicate_keys(pa.table({"id": [1]}), ["nope"])
