"""Dagster assets: lake tables (Pipeline 2), the page-views aggregate, and DuckDB asset checks."""
