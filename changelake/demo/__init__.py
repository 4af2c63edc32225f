"""The demo: seed data, workload and the end-to-end main job on the local services."""
