"""The ``changelake`` command line: the top layer, above ``platform_defs/``.

It drives Dagster (in-process runs of the platform's jobs, ``dagster dev``) and the engine
(``changelake/``), so it may import every package below it; nothing imports it. ``main.py`` holds
the entry point (the ``changelake`` console script, ``python -m cli``); one module per sub-command.
"""
