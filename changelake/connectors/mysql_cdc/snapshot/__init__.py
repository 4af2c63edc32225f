"""Snapshots: the lock-free snapshot reader, the incremental chunked snapshot (chunks, watermarks), row estimates, signals."""
