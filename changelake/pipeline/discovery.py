"""Tables a Kafka -> Iceberg pipeline has found, cached in a local state file for the Dagster layer.

Pipeline 2 finds tables at run time: a ``topic-pattern`` matches topics created after it started
(re-listed every ``scan.topic-partition-discovery.interval``), and a distributed topic
(``<format>.distributed-tables``) names a new table in its records. Each table the pipeline has
written to the lake is recorded in ``<state dir>/discovered-tables/<pipeline name>.json``::

    {"pipeline": "kafka-to-iceberg", "tables": ["kafka_test.customers", "kafka_test.orders"]}

so that code which must not touch the network (loading Dagster definitions: no Kafka, no catalog)
can list them with :func:`discovered_tables`; a code-location reload then shows the new table's
asset and key-state check. The state directory is ``$CHANGELAKE_STATE_DIR`` or the repository's
``.state`` (:func:`changelake.services.default_state_dir`). The file is rewritten atomically
(write to a temporary file, then rename); it is a cache: deleting it only hides tables until the
pipeline writes to them again.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Iterable

from changelake.changelog import TableId

__all__ = ["discovery_file", "discovered_tables", "record_tables"]


def discovery_file(pipeline_name: str, state_dir: Path | None = None) -> Path:
    """``<state dir>/discovered-tables/<pipeline name>.json`` (characters outside
    ``[A-Za-z0-9._-]`` in the name replaced by ``-``)."""
    from changelake.state_dir import default_state_dir

    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", pipeline_name).strip("-") or "pipeline"
    return (state_dir or default_state_dir()) / "discovered-tables" / f"{safe}.json"


def discovered_tables(pipeline_name: str, state_dir: Path | None = None) -> list[TableId]:
    """The lake tables pipeline ``pipeline_name`` has written, sorted; ``[]`` when it has not run
    here yet or the file is unreadable (a cache: never an error). Reads one local file only."""
    path = discovery_file(pipeline_name, state_dir)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        names = doc.get("tables", []) if isinstance(doc, dict) else []
    except (OSError, ValueError):
        return []
    return [TableId.parse(n) for n in sorted({str(n) for n in names if n})]


def record_tables(pipeline_name: str, tables: Iterable[str], state_dir: Path | None = None) -> bool:
    """Add ``tables`` (``db.table`` texts) to the pipeline's discovery file.

    Returns:
        True when the file changed (a table was new).

    Raises:
        OSError: the state directory cannot be created or written.
    """
    path = discovery_file(pipeline_name, state_dir)
    known = {str(t) for t in discovered_tables(pipeline_name, state_dir)}
    merged = known | {str(t) for t in tables}
    if merged == known and path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"pipeline": pipeline_name, "tables": sorted(merged)}, indent=1)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True
