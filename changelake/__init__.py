"""changelake: change data capture with Flink's changelog semantics, orchestrated by Dagster.

Engine packages (no Dagster import): :mod:`changelake.changelog`, :mod:`changelake.formats`,
:mod:`changelake.connectors`. The Dagster layer lives in the top-level packages
``platform_defs``, ``assets``, ``resources`` and ``sensors``.
"""

__version__ = "0.1.0"
