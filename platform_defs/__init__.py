"""The Dagster code location of changelake: ``platform_defs.definitions.defs``."""
