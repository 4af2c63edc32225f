"""Pipelines: Flink-CDC-style definitions and their runners (engine, no Dagster)."""
