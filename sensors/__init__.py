"""Sensors and schedules: relaunch dead long-running pipelines, launch lake ingestion on Kafka lag."""
