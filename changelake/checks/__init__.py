"""Data checks of the lake against its sources (engine; no Dagster import).

:func:`compare_key_state` compares a lake table's rows with the source table's rows in DuckDB.
"""

from changelake.checks.errors import CheckError, KeyStateCheckError
from changelake.checks.key_state import KeyStateComparison, compare_key_state

__all__ = ["compare_key_state", "KeyStateComparison", "CheckError", "KeyStateCheckError"]
