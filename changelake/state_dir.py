"""Where changelake keeps local state: ``$CHANGELAKE_STATE_DIR``, else ``<repo>/.state``.

The local services' data, pipeline locks and discovery files, the default Paimon warehouse and
the demo's pipelines live below it. One small module, so that the runner, the sensors, the ops and
the assets need not import the services launcher to find it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO_ROOT", "default_state_dir"]

#: The repository checkout this package runs from.
REPO_ROOT = Path(__file__).resolve().parent.parent


def default_state_dir() -> Path:
    """``$CHANGELAKE_STATE_DIR`` or ``<repo>/.state``, resolved (absolute)."""
    return Path(os.environ.get("CHANGELAKE_STATE_DIR", REPO_ROOT / ".state")).resolve()
